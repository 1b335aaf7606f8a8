//! The leak formats: the table the engine reads, and the families whose leaks are not a
//! wrapper around a call grammar and so have finders of their own.
//!
//! - `table`: most formats, as rows of tokens (`format`) over the kit's grammars
//!   (`crate::grammar`), read by `engine` (candidates, sections, missing openers and
//!   closers, runs of calls, trailing control tokens, enabled-tool checks: once, for every
//!   row);
//! - own finders: `result` (fake results at the start), `llama3_json` and `xlam` (bare
//!   JSON, weak), `pythonic` (bare Python lists, weak), `json_fence`, `harmony` (a sequence
//!   of messages whose control tokens go and whose non-call bodies stay), `frames` (the
//!   templates' assistant-turn tokens around text), `mistral`,
//!   `minimax`, `xml_invoke`, `kimi_k3`, `apertus`, `lfm2`, `cwm`, `cli` (command-line form);
//! - `markup`: the net under all of them, a tolerant reader of markup by its structure.
//!
//! Parsers never guess: markup that does not parse completely is prose.
//!
//! May depend on: `crate::grammar`, `crate::json5`, `crate::types`, `crate::Ctx`. No I/O.

mod apertus;
pub mod bodies;
pub(crate) mod cli;
mod cwm;
mod dialects;
pub mod engine;
pub mod format;
mod frames;
mod gemini;
pub(crate) mod harmony;
mod hash;
mod json_fence;
mod kimi_k3;
mod labels;
mod lfm2;
mod llama3_json;
mod markup;
mod minimax;
mod mistral;
mod named;
mod pythonic;
mod react;
mod result;
pub mod rows;
pub mod table;
mod tag_names;
pub mod util;
mod xlam;
mod xml_invoke;
mod xml_tool;

use crate::types::Family;
use crate::{Ctx, Leak};
use rows::Row;

pub use format::MAX_CANDIDATES;
pub(crate) use frames::header_end as turn_header_end;
pub(crate) use named::lone_recipient_possible;
pub(crate) use result::lost_opener_possible;

/// A family's own finder, for the formats the table cannot express.
pub struct OwnFinder {
    /// The finder's name (its module), for `scan --explain`.
    pub name: &'static str,
    /// The family.
    pub family: Family,
    /// Literal markers one of which any leak contains.
    pub triggers: &'static [&'static str],
    /// Bytes a leak may start the message with, after leading whitespace.
    pub at_start: &'static [u8],
    /// Appends the leaks found in the text.
    pub find: fn(&str, &Ctx<'_>, &mut Vec<Leak>),
    /// For a trigger that is a bare anchor byte (`[`): a cheap look at the bytes after
    /// it that must confirm the hit, so that the byte alone does not send every message
    /// to the parsers.
    pub probe: Option<Probe>,
    /// For markup with no anchor byte at all (a bare `NAME(key=..)`): a check of the few
    /// places such markup may stand (the first and last line), run once per message.
    pub lines: Option<LinesCheck>,
    /// For a byte of `at_start`: a look at the reply's start that must confirm it (a `<`
    /// opening the reply starts a made-up result only in a frame named as one).
    pub start: Option<Probe>,
}

/// A prefilter confirmation: the text's bytes and the offset of the anchor byte.
pub type Probe = fn(&[u8], usize) -> bool;

/// A prefilter check of a whole text for markup with no anchor byte.
pub type LinesCheck = fn(&str) -> bool;

/// One detector of the registry: a table row or a family's own finder.
#[derive(Clone, Copy)]
pub enum Detector {
    /// A row of `table` (its spellings derived, see `rows`), read by `engine`.
    Row(&'static Row),
    /// A finder of its own.
    Own(&'static OwnFinder),
}

impl Detector {
    /// The detector's name: its family for a table row, its module for an own finder.
    pub fn name(self) -> &'static str {
        match self {
            Detector::Row(r) => r.format.family.as_str(),
            Detector::Own(o) => o.name,
        }
    }

    /// The family its leaks are reported as.
    pub fn family(self) -> Family {
        match self {
            Detector::Row(r) => r.format.family,
            Detector::Own(o) => o.family,
        }
    }

    /// Literal markers one of which any leak contains.
    pub fn triggers(self) -> &'static [&'static str] {
        match self {
            Detector::Row(r) => &r.triggers,
            Detector::Own(o) => o.triggers,
        }
    }

    /// Bytes a leak may start the message with.
    pub fn at_start(self) -> &'static [u8] {
        match self {
            Detector::Row(r) => r.format.at_start,
            Detector::Own(o) => o.at_start,
        }
    }

    /// The probe confirming a bare-anchor trigger, if any.
    pub fn probe(self) -> Option<Probe> {
        match self {
            Detector::Row(_) => None,
            Detector::Own(o) => o.probe,
        }
    }

    /// The probe confirming a byte of [`Detector::at_start`], if any.
    pub fn start(self) -> Option<Probe> {
        match self {
            Detector::Row(_) => None,
            Detector::Own(o) => o.start,
        }
    }

    /// The check for markup without an anchor byte, if any.
    pub fn lines(self) -> Option<LinesCheck> {
        match self {
            Detector::Row(_) => None,
            Detector::Own(o) => o.lines,
        }
    }

    /// Appends the leaks found in `text`.
    pub fn find(self, text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
        match self {
            Detector::Row(r) => engine::find(r, text, ctx, out),
            Detector::Own(o) => (o.find)(text, ctx, out),
        }
    }
}

macro_rules! own {
    (@opt) => { None };
    (@opt $f:path) => { Some($f) };
    ($($family:ident => $module:ident $(probe ($probe:path))? $(lines ($lines:path))? $(start ($start:path))?),+ $(,)?) => {
        static OWN: &[OwnFinder] = &[$(OwnFinder {
            name: stringify!($module),
            family: Family::$family,
            triggers: $module::TRIGGERS,
            at_start: $module::AT_START,
            find: $module::find,
            probe: own!(@opt $($probe)?),
            lines: own!(@opt $($lines)?),
            start: own!(@opt $($start)?),
        }),+];
    };
}

own! {
    ResultPrefix => result start (result::start),
    Hermes => frames,
    Harmony => harmony,
    Minimax => minimax,
    XmlInvoke => xml_invoke,
    Mistral => mistral,
    JsonFence => json_fence probe (json_fence::probe),
    Llama3Json => llama3_json probe (llama3_json::probe),
    Pythonic => pythonic probe (pythonic::probe),
    Xlam => xlam,
    Apertus => apertus,
    Lfm2 => lfm2,
    KimiK3 => kimi_k3,
    Cwm => cwm,
    Lmstudio => named probe (named::probe) lines (named::lines_probe),
    ClineXml => xml_tool probe (xml_tool::probe),
    Gemini => gemini,
    React => react probe (react::probe),
    Markup => markup probe (markup::probe),
}

/// The table's rows, their spellings derived (built once).
pub fn rows() -> &'static [Row] {
    static ROWS: std::sync::OnceLock<Vec<Row>> = std::sync::OnceLock::new();
    ROWS.get_or_init(|| table::FORMATS.iter().map(Row::compile).collect())
}

/// Every detector: the own finders, then the table's rows.
pub fn registry() -> impl Iterator<Item = Detector> {
    OWN.iter()
        .map(Detector::Own)
        .chain(rows().iter().map(Detector::Row))
}

/// Every detector in the order detection runs them: by family ([`Family::ALL`] order),
/// registry order within a family. A detector's index here is its bit in the prefilter's
/// [`crate::prefilter::DetectorSet`]. Order does not decide overlaps (position does, see
/// `crate::detect`) except between leaks of the very same span, where the earlier keeps it.
pub fn detectors() -> &'static [Detector] {
    static ALL: std::sync::OnceLock<Vec<Detector>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<Detector> = registry().collect();
        all.sort_by_key(|d| d.family());
        all
    })
}

/// Families whose markup is itself a code fence, so a code region does not exclude it.
pub fn allowed_in_code(family: Family) -> bool {
    matches!(family, Family::JsonFence)
}

/// Test support: one family's `find` run alone on a text, as the driver would run it
/// (code and reasoning mapped), without the other families or overlap resolution.
#[cfg(test)]
pub(crate) mod testing {
    use crate::{Config, Ctx, Leak};

    /// One family's leaks alone and the text they leave.
    pub(crate) struct Out {
        pub leaks: Vec<Leak>,
        pub cleaned: Option<String>,
    }

    impl Out {
        pub fn is_clean(&self) -> bool {
            self.leaks.is_empty()
        }
    }

    /// Only the detectors of `family` on `text` (code and reasoning mapped as the driver
    /// does), without the other families or overlap resolution.
    pub(crate) fn run_only(family: crate::Family, text: &str, tools: &[&str]) -> crate::Detection {
        let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
        let config = Config::default();
        let ctx = Ctx::new(&config, &tools, text);
        let mut leaks = Vec::new();
        for det in super::registry().filter(|d| d.family() == family) {
            det.find(text, &ctx, &mut leaks);
        }
        leaks.sort_by_key(|l| l.span.start);
        let cleaned = (!leaks.is_empty()).then(|| {
            let mut s = String::new();
            let mut at = 0;
            for l in &leaks {
                s.push_str(text.get(at..l.span.start).unwrap_or_default());
                at = l.span.end.max(at);
            }
            s.push_str(text.get(at..).unwrap_or_default());
            s.trim().to_string()
        });
        crate::Detection {
            leaks,
            cleaned,
            ..Default::default()
        }
    }

    /// The whole of `detect` on `text`, default policy, nothing in `tools_used`, these
    /// enabled tools.
    pub(crate) fn detect_with(text: &str, enabled: &[&str]) -> crate::Detection {
        let enabled: Vec<String> = enabled.iter().map(|s| s.to_string()).collect();
        crate::detect(
            &crate::Input {
                content: text,
                tools_used: &[],
                enabled_tools: &enabled,
            },
            &Config::default(),
        )
    }

    /// Runs `find` on `text` with these enabled tools; panics on overlapping leaks.
    pub(crate) fn run_family(
        find: fn(&str, &Ctx<'_>, &mut Vec<Leak>),
        text: &str,
        tools: &[&str],
    ) -> Out {
        let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
        let config = Config::default();
        let ctx = Ctx::new(&config, &tools, text);
        let mut leaks = Vec::new();
        find(text, &ctx, &mut leaks);
        leaks.sort_by_key(|l| l.span.start);
        let cleaned = (!leaks.is_empty()).then(|| {
            let mut s = String::new();
            let mut at = 0;
            for l in &leaks {
                assert!(l.span.start >= at, "overlapping leaks");
                s.push_str(&text[at..l.span.start]);
                at = l.span.end;
            }
            s.push_str(&text[at..]);
            s.trim().to_string()
        });
        Out { leaks, cleaned }
    }
}

#[cfg(test)]
mod tests;
