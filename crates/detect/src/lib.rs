//! Detection of tool calls and fake tool results that a language model leaked into the
//! text of an assistant message, instead of making the call.
//!
//! `&str` in, a plain [`Detection`] out: the calls read off the markup (name and
//! arguments), the byte spans to remove, and the cleaned text. Every format is read in one
//! pass, with no model hint. The crate does no I/O (no async runtime, no database, no clock),
//! so the worker of `toolcall-recovery`, its `scan` command, a chat app's own process and
//! the tests all run exactly the same decision.
//!
//! # The surface
//!
//! - [`detect`]: one finished message. [`Input`] says which tools the agent has enabled
//!   (formats whose markers prose could contain count only for those) and whether a tool
//!   already ran ([`Input::tools_used`]).
//! - [`Stream`]: one reply as it streams, delta by delta: each [`Stream::push`] returns what
//!   is safe to show now; [`Stream::finish`] returns the rest and the same [`Detection`].
//! - [`Config`]: the policy (allowed memory types, families switched off).
//! - [`might_leak`]: the one scan a clean message costs, for callers that skip work.
//! - [`detect_traced`] with a [`Trace`]: every step, for `scan --explain`.
//!
//! Everything else is private. What is stable is said in the crate's README.
//!
//! ```
//! use toolcall_detect::{detect, Config, Input};
//!
//! let tools = vec!["save_memory".to_string()];
//! let text = "Noted!<tool_call>{\"name\": \"save_memory\", \
//!             \"arguments\": {\"content\": \"likes tea\"}}</tool_call>";
//! let d = detect(
//!     &Input { content: text, tools_used: &[], enabled_tools: &tools },
//!     &Config::default(),
//! );
//! assert_eq!(d.cleaned.as_deref(), Some("Noted!"));
//! let call = &d.leaks[0].calls[0];
//! assert_eq!(call.name, "save_memory");
//! assert_eq!(call.arguments["content"], "likes tea");
//! assert_eq!(&text[d.leaks[0].span.clone()], &text["Noted!".len()..]);
//!
//! // Prose stays prose: nothing to clean, nothing to run.
//! let d = detect(
//!     &Input { content: "See {this} <b>bold</b> claim.", tools_used: &[], enabled_tools: &tools },
//!     &Config::default(),
//! );
//! assert!(d.is_clean() && d.cleaned.is_none());
//! ```
//!
//! # How a message is examined
//!
//! 1. `prefilter`: one pass over the bytes looking for the few literal markers any leak
//!    must contain (`<tool_call`, `[TOOL_CALLS]`, a leading `{`, a name before a `{`, ...),
//!    and a look at the ends of the text for bare calls. A message without one is clean, and
//!    costs that scan and nothing else.
//! 2. `code`: where a marker is, fenced and inline code regions and closed reasoning
//!    blocks are mapped once, because markup inside code is an example and markup inside
//!    `<think>` is the model thinking, never a leak.
//! 3. `families`: each detector whose marker was seen parses its candidates: most formats
//!    are rows of `families::table`, tokens around one of the call grammars of `grammar`,
//!    read by `families::engine`; the rest have finders of their own. Parsers only accept
//!    markup that parses completely into a call (or a result object of a known shape);
//!    anything else is prose and stays.
//! 4. The leaks are ordered, overlaps dropped, each leak extended over the end-of-turn tokens
//!    and the fake tool results right after it, and the cleaned text built by cutting
//!    exactly the leaked spans out.
//!
//! Linear time: every family looks at a bounded number of candidates and parses each at
//! most once; JSON nesting is bounded.

use std::cell::Cell;

mod aliases;
mod clean;
pub(crate) mod code;
pub(crate) mod config;
mod dangling;
mod envelope;
mod extend;
pub(crate) mod families;
pub(crate) mod grammar;
pub(crate) mod json5;
mod metaspace;
pub(crate) mod prefilter;
mod remnant;
mod respell;
mod settle;
mod stream;
pub(crate) mod trace;
pub(crate) mod types;
mod views;

use settle::{drop_overlaps, dropped, dropped_note, shadow_the_net, shown};

pub use config::Config;
pub use stream::{Finished, Stream, StreamPolicy};
pub use trace::{NoTrace, Note, Trace, Verdict};
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
pub(crate) struct Ctx<'a> {
    /// The policy.
    pub config: &'a Config,
    enabled_tools: &'a [String],
    text: &'a str,
    /// Fenced and inline code regions of the text, mapped when first asked: most texts the
    /// prefilter wakes on hold no candidate that asks.
    code: std::cell::OnceCell<code::CodeRegions>,
    /// Closed reasoning blocks of the text, likewise.
    reasoning: std::cell::OnceCell<code::Reasoning>,
    /// Set when a family looked at the enabled tools: the verdict then depends on them.
    asked_tools: Cell<bool>,
    /// What the detectors say they declined (`scan --explain`); records nothing normally.
    notes: trace::Notes,
    /// The detector running (its name and family), for its notes.
    current: Cell<(&'static str, Family)>,
}

impl<'a> Ctx<'a> {
    /// The context for one text.
    pub fn new(config: &'a Config, enabled_tools: &'a [String], text: &'a str) -> Ctx<'a> {
        Ctx {
            config,
            enabled_tools,
            text,
            code: std::cell::OnceCell::new(),
            reasoning: std::cell::OnceCell::new(),
            asked_tools: Cell::new(false),
            notes: trace::Notes::default(),
            current: Cell::new(("detect", Family::ResultPrefix)),
        }
    }

    /// `call` as the tool its generic call word wraps, when it is such an envelope
    /// (`envelope.rs`).
    pub fn unwrap_envelope(&self, call: &mut Call) {
        if envelope::unwrap(call, self.enabled_tools) {
            self.asked_tools.set(true);
        }
    }

    /// Whether the agent has a tool of that name enabled. Families whose markers are weak
    /// (a bare JSON object, a `json` fence, a Python-looking call) only count as leaks for
    /// tools the agent really has.
    pub fn tool_enabled(&self, name: &str) -> bool {
        self.asked_tools.set(true);
        let enabled = self.enabled_tools.iter().any(|t| t == name);
        if !enabled {
            self.declined(0..0, || {
                format!("a call of `{name}`, a tool the agent has not enabled")
            });
        }
        enabled
    }

    /// Notes (for `scan --explain`) that the running detector declined `span`; `why` is
    /// built only when a trace asked for notes.
    pub fn declined(&self, span: std::ops::Range<usize>, why: impl FnOnce() -> String) {
        self.notes.declined(self.current.get(), span, why);
    }

    /// The agent's enabled tools (recorded as consulted, like [`Ctx::tool_enabled`]).
    pub fn enabled_tools(&self) -> &'a [String] {
        self.asked_tools.set(true);
        self.enabled_tools
    }

    /// Whether the code regions were mapped: a detector asked where code is.
    pub fn code_mapped(&self) -> bool {
        self.code.get().is_some()
    }

    /// Fenced and inline code regions of the text.
    pub fn code(&self) -> &code::CodeRegions {
        self.code.get_or_init(|| code::CodeRegions::find(self.text))
    }

    /// Closed reasoning blocks of the text.
    pub fn reasoning(&self) -> &code::Reasoning {
        self.reasoning
            .get_or_init(|| code::Reasoning::find(self.text))
    }

    /// Whether byte `pos` lies inside fenced or inline code.
    pub fn in_code(&self, pos: usize) -> bool {
        let code = self.code().contains(pos);
        if code {
            self.declined(pos..pos, || "markup inside code is an example".into());
        }
        code
    }

    /// Whether byte `pos` lies inside a closed reasoning block.
    pub fn in_reasoning(&self, pos: usize) -> bool {
        let reasoning = self.reasoning().contains(pos);
        if reasoning {
            self.declined(pos..pos, || {
                "markup inside closed reasoning (<think>) is never touched".into()
            });
        }
        reasoning
    }

    /// Whether markup at `pos` is quoted (in code or in reasoning) rather than made: no
    /// family takes a candidate there.
    pub fn quoted(&self, pos: usize) -> bool {
        self.in_code(pos) || self.in_reasoning(pos)
    }
}

/// Whether `text` holds any marker of a leak: `false` means [`detect`] would find it
/// clean, and costs one scan of the bytes. For callers that skip work for clean text.
pub fn might_leak(text: &str) -> bool {
    !prefilter::scan_detectors(text).is_empty()
}

/// Examines one message. Never panics; runs in time linear in the content's length.
pub fn detect(input: &Input<'_>, config: &Config) -> Detection {
    detect_traced(input, config, &mut NoTrace)
}

/// [`detect`], telling `trace` what it did (`scan --explain`). With [`NoTrace`] (what
/// `detect` passes) every step of the trace compiles away.
pub fn detect_traced<T: Trace>(input: &Input<'_>, config: &Config, trace: &mut T) -> Detection {
    detect_viewed(input, config, trace, false)
}

/// [`detect_traced`]; `respelled` when `input` is already a respelled view of the reply
/// (`views::respelled`): a view of it is not respelled again, so views never loop (the
/// metaspace view writes DeepSeek's `▁` as spaces, which respelling writes back).
pub(crate) fn detect_viewed<T: Trace>(
    input: &Input<'_>,
    config: &Config,
    trace: &mut T,
    respelled: bool,
) -> Detection {
    let text = input.content;
    let seen = prefilter::scan_detectors(text);
    if T::ENABLED {
        let ran: Vec<(&'static str, Vec<String>)> = seen
            .iter()
            .filter_map(|i| families::detectors().get(i))
            .map(|d| (d.name(), matched_markers(text, *d)))
            .collect();
        trace.prefilter(&ran);
    }
    if seen.is_empty() {
        return Detection::default();
    }
    let respell = !respelled && seen.reads_tokens();
    if let Some(r) = respell.then(|| respell::respelled(text)).flatten() {
        if let Some(d) = views::respelled(input, config, trace, &r) {
            return d;
        }
    }
    if let Some(aliased) = aliases::aliased(text, input.enabled_tools) {
        return views::under_aliases(input, config, trace, &aliased, respelled);
    }
    if let Some(decoded) = metaspace::decoded(text) {
        return views::in_metaspace(input, config, trace, &decoded, respelled);
    }
    if let Some(past) = grammar::text::front_glyph(text) {
        return views::past_glyph(input, config, trace, past, respelled);
    }
    let mut ctx = Ctx::new(config, input.enabled_tools, text);
    if T::ENABLED {
        ctx.notes = trace::Notes::new(true);
    }
    let mut leaks = Vec::new();
    // Disabled families run too: their spans must still shadow what overlaps them, so
    // that switching a family off only ever removes its own leaks from the result and
    // never lets a more general family claim part of its markup.
    // Only the detectors whose own markers are in the text run: a message pays for
    // the formats it may hold, not for every format of a family it triggers.
    for det in seen.iter().filter_map(|i| families::detectors().get(i)) {
        ctx.current.set((det.name(), det.family()));
        let (leaks_before, notes_before) = (leaks.len(), ctx.notes.len());
        det.find(text, &ctx, &mut leaks);
        if T::ENABLED && leaks.len() == leaks_before && ctx.notes.len() == notes_before {
            // Every detector that ran says why it took nothing, not only those with a
            // reason of their own to give.
            let markers = matched_markers(text, *det);
            let at = markers
                .iter()
                .find_map(|m| text.find(m.as_str()))
                .unwrap_or(0);
            ctx.declined(at..at, || {
                format!(
                    "{} matched, but no complete call of this format (nor a result of a known \
                     shape) stands there",
                    markers.join(" and ")
                )
            });
        }
    }
    if T::ENABLED {
        for note in ctx.notes.take() {
            trace.note(note);
        }
    }
    // Each step on no leaks is nothing: the code regions are mapped only for some.
    // A fence labelled as a call's wrapper is read as a reply of its own where a detector
    // looked into code (the regions are mapped), or where a fence ends the reply (what the
    // prefilter looks at).
    let fence_ends = text.trim_end().ends_with("```");
    let mapped = ctx.code_mapped() && ctx.code().holds_call_fence();
    let fenced = match mapped || fence_ends && views::holds_call_fence(text) {
        true => views::in_call_fences(input, config, ctx.code(), &leaks),
        false => (Vec::new(), false),
    };
    let (fenced, fence_asked) = fenced;
    if !leaks.is_empty() || !fenced.is_empty() {
        let (code, reasoning) = (ctx.code(), ctx.reasoning());
        shadow_the_net(&mut leaks);
        let mut kept = Vec::with_capacity(leaks.len() + fenced.len());
        for l in std::mem::take(&mut leaks) {
            match dropped(text, &l, code, reasoning).or_else(|| shown(text, &l, &ctx)) {
                None => kept.push(l),
                Some(why) if T::ENABLED => trace.note(dropped_note(&l, why)),
                Some(_) => {}
            }
        }
        kept.extend(
            fenced
                .into_iter()
                .filter(|l| !reasoning.contains(l.span.start)),
        );
        let overlapped;
        (leaks, overlapped) = drop_overlaps(kept);
        if T::ENABLED {
            for l in &overlapped {
                trace.note(dropped_note(l, "it overlaps a leak that starts before it"));
            }
        }
        extend::take_wrappers(text, code, &mut leaks);
        remnant::take(text, code, &mut leaks);
        extend::take_trailing_tokens(text, &mut leaks);
    }
    let quoted = |at: usize| ctx.code().contains(at) || ctx.reasoning().contains(at);
    dangling::take(text, quoted, &mut leaks);
    extend::take_turn_end(text, quoted, &mut leaks);
    if T::ENABLED {
        for l in &leaks {
            let note = match config.family_enabled(l.family) {
                true => Note {
                    detector: "detect",
                    family: l.family,
                    span: l.span.clone(),
                    verdict: Verdict::Taken(l.calls.clone()),
                },
                false => dropped_note(l, "its family is switched off"),
            };
            trace.note(note);
        }
    }
    leaks.retain(|l| config.family_enabled(l.family));
    for call in leaks.iter_mut().flat_map(|l| l.calls.iter_mut()) {
        ctx.unwrap_envelope(call);
    }
    let mut depends_on_tools = ctx.asked_tools.get() || fence_asked;
    // The text may sit in a chat template's turn (`<start_of_turn>model` .. `<end_of_turn>`,
    // `..}</s>`, a fence's backticks then `<|im_end|>`), tokens no format expects there:
    // where nothing but markup was read, it is read again without them.
    if leaks
        .iter()
        .all(|l| l.calls.is_empty() && l.results.is_empty())
    {
        let end = text.trim_end().len();
        let inner = families::turn_header_end(text).unwrap_or(0)
            ..grammar::keys::before_end_tokens(text, end);
        if (inner.start > 0 || inner.end < end) && !text[inner.clone()].trim().is_empty() {
            let d = views::in_turn(input, config, trace, inner, respelled);
            if d.leaks
                .iter()
                .any(|l| !l.calls.is_empty() || !l.results.is_empty())
            {
                return d;
            }
            depends_on_tools |= d.depends_on_tools;
        }
    }
    if leaks.is_empty() {
        let mut d = nothing_found(input, &ctx);
        d.depends_on_tools |= depends_on_tools;
        return d;
    }
    let strip_only = !input.tools_used.is_empty();
    let cleaned = clean::clean(text, &leaks, config);
    Detection {
        leaks,
        cleaned,
        strip_only,
        depends_on_tools,
    }
}

/// The detection of a text in which nothing was found: whether the verdict depends on the
/// tools. An enabled name with a `-`, `/` or `:` in it is read under an alias; without the
/// tools, say whether one stands where a name would (only a reply with some markup can hold
/// such a call: the prefilter wakes on those names' shapes too).
fn nothing_found(input: &Input<'_>, ctx: &Ctx<'_>) -> Detection {
    let text = input.content;
    let depends_on_tools = ctx.asked_tools.get()
        || input.enabled_tools.is_empty()
            && aliases::compound_name_position(text, |at| {
                ctx.in_code(at)
                    && !ctx.code().regions().iter().any(|r| {
                        r.contains(&at) && text[r.clone()].trim_start().starts_with("```tool_code")
                    })
            });
    Detection {
        depends_on_tools,
        ..Detection::default()
    }
}

/// What of a detector's the prefilter found in `text`: the markers that occur in it, or
/// the place a marker-less check looked (`scan --explain` only).
fn matched_markers(text: &str, det: families::Detector) -> Vec<String> {
    let mut found: Vec<String> = det
        .triggers()
        .iter()
        .filter(|t| t.len() > 1 && text.contains(**t))
        .map(|t| t.to_string())
        .collect();
    if found.is_empty() {
        let first = text.trim_start().as_bytes().first();
        if let Some(&b) = first.filter(|b| det.at_start().contains(b)) {
            found.push(format!("a `{}` opening the message", char::from(b)));
        }
        if det.probe().is_some() {
            found.push(format!(
                "a bare {} its probe confirmed",
                det.triggers().join(" ")
            ));
        }
        if det.lines().is_some() {
            found.push("the shape of a call on the first or last line".into());
        }
    }
    found
}
