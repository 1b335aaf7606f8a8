//! Detection of tool calls and fake tool results that a language model leaked into the
//! text of an assistant message.
//!
//! This crate is the pure core of `toolcall-recovery`: `&str` in, a plain [`Detection`]
//! out. It depends on nothing that does I/O (no async runtime, no database, no clock), so
//! the worker, the backfill, the admin API and the `scan` command all run exactly the same
//! decision, and it can be fuzzed and property-tested in isolation.
//!
//! How a message is examined:
//! 1. [`prefilter`]: one pass over the bytes looking for the few literal markers any leak
//!    must contain (`<tool_call`, `[TOOL_CALLS]`, a leading `{`, ...). A message without
//!    one is clean, and costs that scan and nothing else.
//! 2. [`code`]: where a marker is, fenced and inline code regions and closed reasoning
//!    blocks are mapped once, because markup inside code is an example and markup inside
//!    `<think>` is the model thinking, never a leak.
//! 3. [`families`]: each detector whose marker was seen parses its candidates: most formats
//!    are rows of `families::table`, tokens around one of the call grammars of [`grammar`],
//!    read by `families::engine`; the rest have finders of their own. Parsers only accept
//!    markup that parses completely into a call (or a result object of a known shape);
//!    anything else is prose and stays.
//! 4. The leaks are ordered, overlaps dropped, each leak extended over the end-of-turn tokens
//!    right after it, and the cleaned text built by cutting exactly the leaked spans out.
//!
//! Linear time: every family looks at a bounded number of candidates
//! ([`families::MAX_CANDIDATES`]) and parses each at most once; JSON nesting is bounded
//! ([`json5::MAX_DEPTH`]).

use std::cell::Cell;

pub mod code;
pub mod config;
pub mod families;
pub mod grammar;
pub mod json5;
pub mod prefilter;
pub mod types;

pub use config::Config;
pub use types::{Call, Detection, Family, Leak, ResultKind, ResultObject};

/// One message as detection sees it.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The message content as stored.
    pub content: &'a str,
    /// The message's `tools_used`: non-empty means the tool did run.
    pub tools_used: &'a [String],
    /// The tools the message's agent has enabled (empty when it has no agent).
    pub enabled_tools: &'a [String],
}

/// What a family parser gets besides the text.
pub struct Ctx<'a> {
    /// The policy.
    pub config: &'a Config,
    enabled_tools: &'a [String],
    /// Fenced and inline code regions of the text.
    pub code: &'a code::CodeRegions,
    /// Closed reasoning blocks of the text.
    pub reasoning: &'a code::Reasoning,
    /// Set when a family looked at the enabled tools: the verdict then depends on them.
    asked_tools: Cell<bool>,
}

impl<'a> Ctx<'a> {
    /// The context for one text.
    pub fn new(
        config: &'a Config,
        enabled_tools: &'a [String],
        code: &'a code::CodeRegions,
        reasoning: &'a code::Reasoning,
    ) -> Ctx<'a> {
        Ctx {
            config,
            enabled_tools,
            code,
            reasoning,
            asked_tools: Cell::new(false),
        }
    }

    /// Whether the agent has a tool of that name enabled. Families whose markers are weak
    /// (a bare JSON object, a `json` fence, a Python-looking call) only count as leaks for
    /// tools the agent really has.
    pub fn tool_enabled(&self, name: &str) -> bool {
        self.asked_tools.set(true);
        self.enabled_tools.iter().any(|t| t == name)
    }

    /// The agent's enabled tools (recorded as consulted, like [`Ctx::tool_enabled`]).
    pub fn enabled_tools(&self) -> &'a [String] {
        self.asked_tools.set(true);
        self.enabled_tools
    }

    /// Whether byte `pos` lies inside fenced or inline code.
    pub fn in_code(&self, pos: usize) -> bool {
        self.code.contains(pos)
    }

    /// Whether byte `pos` lies inside a closed reasoning block.
    pub fn in_reasoning(&self, pos: usize) -> bool {
        self.reasoning.contains(pos)
    }

    /// Whether markup at `pos` is quoted (in code or in reasoning) rather than made: no
    /// family takes a candidate there.
    pub fn quoted(&self, pos: usize) -> bool {
        self.in_code(pos) || self.in_reasoning(pos)
    }
}

/// Examines one message. Never panics; runs in time linear in the content's length.
pub fn detect(input: &Input<'_>, config: &Config) -> Detection {
    let text = input.content;
    let seen = prefilter::scan_detectors(text);
    if seen.is_empty() {
        return Detection::default();
    }
    let code = code::CodeRegions::find(text);
    let reasoning = code::Reasoning::find(text);
    let ctx = Ctx::new(config, input.enabled_tools, &code, &reasoning);
    let mut leaks = Vec::new();
    // Disabled families run too: their spans must still shadow what overlaps them, so
    // that switching a family off only ever removes its own leaks from the result and
    // never lets a more general family claim part of its markup.
    // Only the detectors whose own markers are in the text run: a message pays for
    // the formats it may hold, not for every format of a family it triggers.
    for det in seen.iter().filter_map(|i| families::detectors().get(i)) {
        det.find(text, &ctx, &mut leaks);
    }
    leaks.retain(|l| {
        l.span.start < l.span.end
            && text.is_char_boundary(l.span.start)
            && text.is_char_boundary(l.span.end)
            && !reasoning.contains(l.span.start)
            && (families::allowed_in_code(l.family) || !code.contains(l.span.start))
    });
    let mut leaks = drop_overlaps(leaks);
    take_trailing_tokens(text, &mut leaks);
    leaks.retain(|l| config.family_enabled(l.family));
    let depends_on_tools = ctx.asked_tools.get();
    if leaks.is_empty() {
        return Detection {
            depends_on_tools,
            ..Detection::default()
        };
    }
    let strip_only = !input.tools_used.is_empty();
    let cleaned = clean(text, &leaks, config);
    Detection {
        leaks,
        cleaned,
        strip_only,
        depends_on_tools,
    }
}

/// Orders leaks by position and keeps, of overlapping ones, the one that starts first
/// (the longer one when they start together): a family parser may claim markup that a
/// more general one also matches.
fn drop_overlaps(mut leaks: Vec<Leak>) -> Vec<Leak> {
    leaks.sort_by(|a, b| {
        a.span
            .start
            .cmp(&b.span.start)
            .then(b.span.end.cmp(&a.span.end))
    });
    let mut out: Vec<Leak> = Vec::with_capacity(leaks.len());
    for leak in leaks {
        match out.last() {
            Some(prev) if leak.span.start < prev.span.end => {}
            _ => out.push(leak),
        }
    }
    out
}

/// Extends every leak over the end-of-turn tokens right after it (`<|eot_id|>`, `</s>`,
/// ...): they close the model's markup, and left alone they would show the user half of a
/// control sequence. A fake tool result the model wrote right after its call
/// (`<tool_response>..</tool_response>`, see `families::util::RESULT_FRAMES`) goes with the
/// call the same way. What is already inside the next leak stays with that one.
fn take_trailing_tokens(text: &str, leaks: &mut [Leak]) {
    let mut trailer = families::util::Trailer::new(text);
    for i in 0..leaks.len() {
        let limit = leaks.get(i + 1).map_or(text.len(), |n| n.span.start);
        let end = trailer.extend(leaks[i].span.end);
        if end <= limit {
            leaks[i].span.end = end;
        }
    }
}

/// Cuts the leaked spans out. A message that is nothing but a result object stays as it
/// is unless the policy says otherwise (it is recorded for review instead).
fn clean(text: &str, leaks: &[Leak], config: &Config) -> Option<String> {
    let removable = |l: &Leak| l.family != Family::ResultOnly || config.result_only_recover;
    if !leaks.iter().any(removable) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for leak in leaks.iter().filter(|l| removable(l)) {
        // Spans were checked to be on char boundaries in `detect`, so `get` always succeeds.
        out.push_str(text.get(at..leak.span.start).unwrap_or_default());
        at = leak.span.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    Some(out.trim().to_string())
}
