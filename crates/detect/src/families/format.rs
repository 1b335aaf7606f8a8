//! One leak format as the table writes it, and what the engine, the rows and the own
//! finders all read of it: the row types, the spellings a row's tokens allow, and the bound
//! on candidates. A leaf, so that the data flows one way: `rows` and `util` build on it,
//! `engine` reads what they built.
//!
//! May depend on: `super::bodies`, `crate::types`. No I/O.

use super::bodies::Grammar;
use crate::types::Family;

/// How many candidate positions one format examines in one message. Each candidate is
/// parsed at most once, so a format costs at most this many parses of the text: linear,
/// whatever an adversarial message repeats.
pub const MAX_CANDIDATES: usize = 64;

/// When a closing token may be missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Never: without it the markup is prose.
    Never,
    /// When only whitespace follows (the generation stopped there).
    AtEnd,
    /// The same, for calls of enabled tools only: a format whose closer is its stop token
    /// (FunctionGemma's `<end_function_call>`), so a server that stops on it always drops
    /// it, while a body that fills the text to its end is little evidence of its own.
    AtEndEnabled,
    /// Anywhere (the format's closer is optional).
    Always,
}

/// Whether the calls must name tools the agent has enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tools {
    /// The tokens are evidence enough.
    Any,
    /// Every call must name an enabled tool (the markup could be an answer or prose).
    Enabled,
    /// A call without arguments must name an enabled tool (`<tool_call>word</tool_call>`
    /// is too little markup); one with arguments need not.
    ArgsOrEnabled,
}

/// How else a format's tokens may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spell {
    /// Only as written in the table.
    Exact,
    /// DeepSeek-style tokens (`<｜tool▁sep｜>`): the full-width bar `｜` also as ASCII `|` or
    /// doubled `｜｜`, and `▁` also as `_` or a space (what decoders and copy-paste make of
    /// them).
    Bars,
}

/// One leak format: tokens around one of the kit's grammars.
pub struct Format {
    /// The family its leaks are reported as.
    pub family: Family,
    /// Literal markers one of which any leak contains (read by the prefilter).
    pub triggers: &'static [&'static str],
    /// Bytes a leak may start the message with (after whitespace), for the prefilter.
    pub at_start: &'static [u8],
    /// Tokens opening a section of calls (empty: the format has no sections).
    pub section_open: &'static [&'static str],
    /// Tokens closing a section.
    pub section_close: &'static [&'static str],
    /// When the section's closer may be missing.
    pub section_close_missing: Missing,
    /// A block may start with a call's opener without the section's (the section opener
    /// was stripped); an orphan section closer after its calls goes with it.
    pub section_open_optional: bool,
    /// Tokens opening each call (empty: calls follow each other bare).
    pub call_open: &'static [&'static str],
    /// Tokens closing each call.
    pub call_close: &'static [&'static str],
    /// When a call's closer may be missing.
    pub call_close_missing: Missing,
    /// Literals a call may start with when its opener is missing (Qwen3-Coder's
    /// `<function=`); an orphan call closer after it goes with it.
    pub bare_call: &'static [&'static str],
    /// Separators between calls.
    pub sep: &'static [&'static str],
    /// Noise (plain text without `<|`, at most this many bytes) tolerated between a
    /// section's opener and its first call.
    pub noise: usize,
    /// The grammar of one call body.
    pub grammar: Grammar,
    /// Whether calls must name enabled tools.
    pub tools: Tools,
    /// Tokens after the markup that belong to it, besides [`super::util::END_OF_TURN`].
    pub trailing: &'static [&'static str],
    /// How else the tokens may be spelled.
    pub spell: Spell,
    /// Tokens that stand right after a call's name inside its body (`<arg_key>`,
    /// `<|tool_call_argument_begin|>`): where the call's opener was stripped, the name before
    /// one of them starts a bare call.
    pub inner: &'static [&'static str],
    /// Other formats' openers: a bare call right after one of them belongs to that format.
    pub foreign: &'static [&'static str],
}

impl Format {
    /// A format with nothing but a family and a grammar; rows fill in the rest.
    pub const fn new(family: Family, grammar: Grammar) -> Format {
        Format {
            family,
            triggers: &[],
            at_start: &[],
            section_open: &[],
            section_close: &[],
            section_close_missing: Missing::Never,
            section_open_optional: false,
            call_open: &[],
            call_close: &[],
            call_close_missing: Missing::Never,
            bare_call: &[],
            sep: &[],
            noise: 0,
            grammar,
            tools: Tools::Any,
            trailing: &[],
            spell: Spell::Exact,
            inner: &[],
            foreign: &[],
        }
    }
}

/// The bars a `<｜..｜>` token may be written with, canonical first.
pub(super) const BARS: &[&str] = &["｜", "|", "｜｜"];
/// The word separators a `▁` may be written with, canonical first.
const SEPS: &[&str] = &["▁", "_", " "];

/// `token` in every spelling `spell` allows, the canonical one first.
pub fn spellings(token: &'static str, spell: Spell) -> Vec<&'static str> {
    if spell == Spell::Exact || !(token.contains('｜') || token.contains('▁')) {
        return vec![token];
    }
    let mut out = vec![token];
    for bar in BARS {
        for sep in SEPS {
            let s = token.replace('｜', bar).replace('▁', sep);
            if !out.iter().any(|o| *o == s) {
                out.push(Box::leak(s.into_boxed_str()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_separators_are_respelled() {
        let s = spellings("<｜tool▁sep｜>", Spell::Bars);
        assert_eq!(s[0], "<｜tool▁sep｜>");
        for want in [
            "<|tool_sep|>",
            "<｜tool_sep｜>",
            "<｜｜tool▁sep｜｜>",
            "<|tool sep|>",
        ] {
            assert!(s.contains(&want), "{want}");
        }
        assert_eq!(spellings("<tool_call>", Spell::Bars), vec!["<tool_call>"]);
        assert_eq!(spellings("<｜tool▁sep｜>", Spell::Exact).len(), 1);
    }
}
