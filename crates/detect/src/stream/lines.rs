//! The stream's look at a line: whether a later line could complete it into a leak that
//! takes it too (a tool's name at an end, a label announcing a call), and the header words
//! of a Harmony output whose tokens were stripped.
//!
//! May depend on: `families::harmony`'s channel words, `remnant::lone_word`, `memchr`.

use crate::families::harmony::CHANNELS;

/// The last line of `window` that is not blank (`window` ends with a line break).
pub(super) fn last_line(window: &str) -> &str {
    let t = window.trim_end();
    let start = t.rfind('\n').map_or(0, |i| i + 1);
    &t[start..]
}

/// Whether `line` starts with header words of a Harmony output whose special tokens were
/// stripped: a channel word glued to the text (on a later line, only to a new sentence: a
/// word may start with `final`).
pub(super) fn harmony_frame(line: &str, first: bool) -> bool {
    let t = line.trim_start();
    CHANNELS.iter().any(|w| {
        t.strip_prefix(w).is_some_and(|rest| {
            let next = rest.chars().next();
            // A later line's channel word is glued to a new sentence: a capital, not a
            // name's `_` or digit (`final_inputs = ..` is code).
            next.is_some_and(|c| !c.is_whitespace() && (first || c.is_uppercase()))
        })
    })
}

/// Whether `lines` hold a role glued to its channel (`assistantcommentary`), the other
/// header words of a stripped Harmony output.
pub(super) fn role_glued_to_channel(lines: &str) -> bool {
    static ROLE: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let role = ROLE.get_or_init(|| memchr::memmem::Finder::new("assistant"));
    role.find_iter(lines.as_bytes()).any(|i| {
        let rest = &lines[i + "assistant".len()..];
        CHANNELS.iter().any(|w| rest.starts_with(w))
    })
}

/// Whether a later line could complete `line` into a leak that takes `line` too: its
/// first or last word, or a word that namespaces it (`to=functions.NAME`), holds the name
/// of an enabled tool (`save_memory` then `{..}` on the
/// next line, ReAct's `Action: save_memory` then `Action Input:`, Kimi's
/// `functions.search:0` with its tokens stripped, DeepSeek's `functionNAME`, a command
/// line's first word), or it is a label that announces a call (`**Tool Call:**` before a
/// fenced call), or one lower-case word alone (a wrapper opener as a model garbled it).
pub(super) fn leads_in(line: &str, tools: &[String]) -> bool {
    let t = line.trim();
    // A lone lower-case word may be a garbled wrapper opener: the call after it takes it.
    if announces_a_call(t) || crate::remnant::lone_word(t) {
        return true;
    }
    if tools.is_empty() {
        return false;
    }
    let first = t.split_ascii_whitespace().next().unwrap_or_default();
    let last = t.split_ascii_whitespace().next_back().unwrap_or_default();
    holds_name(first, tools)
        || holds_name(last, tools)
        || (memchr::memchr2(b'=', b':', t.as_bytes()).is_some()
            || namespaced().find(t.as_bytes()).is_some())
            && t.split_ascii_whitespace()
                .filter(|w| {
                    let inner = w.trim_end_matches(|c: char| c.is_ascii_punctuation());
                    inner.contains(['.', '=', ':'])
                })
                .any(|w| holds_name(w, tools))
}

/// Whether `line` is a label announcing a call on the lines after it (RWKV's
/// `**Tool Call:**` above a fenced call): a few words ending with a colon, one of them
/// about a tool, a call, a function or an action. A colon line of prose (`Here's how:`)
/// announces nothing a format reads.
pub(super) fn announces_a_call(line: &str) -> bool {
    let label = line.trim_matches(['*', '#', '_', '`', ' ', '.']);
    let Some(words) = label.strip_suffix([':', '：']) else {
        return false;
    };
    words.split_whitespace().count() <= 4
        && words.split_whitespace().any(|w| {
            let w = w.to_ascii_lowercase();
            ["tool", "call", "function", "action"]
                .iter()
                .any(|k| w.contains(k))
        })
}

/// The prefix OpenAI-style stacks write before a tool's name.
fn namespaced() -> &'static memchr::memmem::Finder<'static> {
    static NS: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    NS.get_or_init(|| memchr::memmem::Finder::new("functions."))
}

/// Whether a part of `word` between non-word characters is an enabled tool's name (or
/// `function` glued to one).
fn holds_name(word: &str, tools: &[String]) -> bool {
    word.split(|c: char| c.is_ascii() && !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .filter(|part| !part.is_empty())
        .any(|part| {
            let bare = part.strip_prefix("function").unwrap_or(part);
            tools.iter().any(|n| n == part || n == bare)
        })
}
