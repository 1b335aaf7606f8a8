//! The format engine: reads every format of the table that is a wrapper around one of the
//! kit's call grammars. What the formats have in common lives here once:
//!
//! - finding candidates (the format's opening tokens) in one forward walk, at most
//!   [`MAX_CANDIDATES`] per format and message;
//! - a section (`<｜tool▁calls▁begin｜>` .. `<｜tool▁calls▁end｜>`) holding calls each in its
//!   own tokens (`<｜tool▁call▁begin｜>` .. `<｜tool▁call▁end｜>`), either level optional;
//! - several calls in a row, with or without separators, as one leak;
//! - a closing token that may be missing (at the end of the text, where the generation
//!   stopped, or anywhere, where the format's closer is optional), and an opening token that
//!   may be missing (servers strip special tokens): then the orphan closer goes too;
//! - the control tokens that end the model's turn right after the markup, which go with it;
//! - whether the calls must name tools the agent has enabled (a weak marker).
//!
//! A row of the table says which of these its format has; the grammar reads the calls.
//!
//! May depend on: `crate::grammar`, `crate::types`, `crate::Ctx`. No I/O.

use crate::grammar::brace::{self, BraceSyntax};
use crate::grammar::json::{self, JsonCalls, NamedJson};
use crate::grammar::kv::{self, KvSyntax};
use crate::grammar::python::{self, PyOpts};
use crate::grammar::text::{eat_any, preceded_by, rest_is_blank, skip_ws, AnyFinder, Finder};
use crate::grammar::xml::{self, InvokeSyntax};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use std::ops::Range;

/// How many candidate positions one format examines in one message. Each candidate is
/// parsed at most once, so a format costs at most this many parses of the text: linear,
/// whatever an adversarial message repeats.
pub const MAX_CANDIDATES: usize = 64;

/// Tokens that end a model's turn or message. Right after a leak (whitespace between)
/// they are part of it: the user must not see half of a control sequence. Elsewhere they
/// are left alone.
pub const END_OF_TURN: &[&str] = &[
    "<|eom_id|>",
    "<|eot_id|>",
    "<|eot|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<｜end▁of▁sentence｜>",
    "</s>",
];

/// A custom grammar: reads the calls of one call body at `pos`, within `limit` when the
/// call's closer was found; returns the calls and the offset past them.
pub type CustomGrammar = fn(&str, usize, Option<usize>, &Ctx<'_>) -> Option<(Vec<Call>, usize)>;

/// What the calls of a format are written in.
pub enum Grammar {
    /// JSON call objects.
    Json(JsonCalls),
    /// `NAME<sep>{json}`.
    Named(NamedJson),
    /// A run of `<invoke>`-like elements.
    Invoke(&'static InvokeSyntax),
    /// Qwen3-Coder's `<function=NAME><parameter=K>v</parameter></function>`; the call's
    /// closer must be `</function>`.
    FunctionEq,
    /// A name and key/value tag pairs, up to the call's closer.
    Kv(&'static KvSyntax),
    /// `call:NAME{k:v}`, up to the call's closer.
    Brace(&'static BraceSyntax),
    /// A Python list of keyword calls.
    PyList(PyOpts),
    /// Python keyword calls one after another (a list accepted too).
    PyCalls,
    /// The first grammar that reads the body.
    Either(&'static [Grammar]),
    /// A grammar of the format's own.
    Custom(CustomGrammar),
}

/// When a closing token may be missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Never: without it the markup is prose.
    Never,
    /// When only whitespace follows (the generation stopped there).
    AtEnd,
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
    /// Tokens after the markup that belong to it, besides [`END_OF_TURN`].
    pub trailing: &'static [&'static str],
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
        }
    }
}

/// Closers searched from increasing positions, each remembered (see [`Finder`]).
struct Closers<'t> {
    text: &'t str,
    finders: Vec<(&'static str, Finder<'t>)>,
}

impl<'t> Closers<'t> {
    fn new(text: &'t str) -> Closers<'t> {
        Closers {
            text,
            finders: Vec::new(),
        }
    }

    /// The earliest of `needles` at or after `from`: its offset and length.
    fn find(&mut self, needles: &[&'static str], from: usize) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for &n in needles {
            let i = match self.finders.iter().position(|(k, _)| *k == n) {
                Some(i) => i,
                None => {
                    self.finders.push((n, Finder::new(self.text, n)));
                    self.finders.len() - 1
                }
            };
            if let Some(p) = self.finders[i].1.find(from) {
                if best.is_none_or(|(b, l)| p < b || (p == b && n.len() > l)) {
                    best = Some((p, n.len()));
                }
            }
        }
        best
    }
}

/// What one candidate came to.
enum Outcome {
    /// A block: its span and calls.
    Block(Range<usize>, Vec<Call>),
    /// Nothing here.
    Skip,
}

/// Appends the leaks of `f` found in `text`.
pub fn find(f: &Format, text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut entries: Vec<&'static str> = Vec::new();
    entries.extend(f.section_open);
    if f.section_open.is_empty() || f.section_open_optional {
        entries.extend(f.call_open);
    }
    entries.extend(f.bare_call);
    let mut finder = AnyFinder::new(text, &entries);
    let mut closers = Closers::new(text);
    let mut blocks: Vec<(Range<usize>, Vec<Call>)> = Vec::new();
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some((pos, len)) = finder.find(from) else {
            break;
        };
        from = pos + len.max(1);
        if ctx.quoted(pos) || inside_failed_section(f, text, pos) {
            continue;
        }
        if let Outcome::Block(span, calls) = block(f, text, pos, ctx, &mut closers) {
            from = span.end.max(from);
            blocks.push((span, calls));
        }
    }
    merge(text, f.family, blocks, out);
}

/// Whether a call opener at `pos` belongs to a section (or a run of calls) that did not
/// parse: a call of a broken section is not a leak of its own.
fn inside_failed_section(f: &Format, text: &str, pos: usize) -> bool {
    !f.section_open.is_empty()
        && eat_any(text, pos, f.section_open).is_none()
        && f.section_open
            .iter()
            .chain(f.call_close)
            .any(|t| preceded_by(text, pos, t).is_some())
}

/// Parses the block starting at `start`, where one of the format's entry literals is.
fn block(f: &Format, text: &str, start: usize, ctx: &Ctx<'_>, cl: &mut Closers<'_>) -> Outcome {
    let mut pos = start;
    let in_section = match eat_any(text, pos, f.section_open) {
        Some(after) => {
            pos = after;
            true
        }
        None => false,
    };
    if in_section && f.noise > 0 && !f.call_open.is_empty() {
        pos = skip_noise(text, pos, f);
    }
    let mut calls = Vec::new();
    let mut end = pos;
    // A call may start without its opener as the first of a section whose opener stands
    // for both, or right after a separator (`{..};{..}` after one `<|python_tag|>`).
    let mut bare_ok = in_section && f.section_open_optional;
    while let Some((mut cs, call_end)) = one_call(f, text, end, bare_ok, ctx, cl) {
        let allowed = match f.tools {
            Tools::Any => true,
            Tools::Enabled => cs.iter().all(|c| ctx.tool_enabled(&c.name)),
            Tools::ArgsOrEnabled => cs.iter().all(|c| {
                c.arguments.as_object().is_some_and(|m| !m.is_empty()) || ctx.tool_enabled(&c.name)
            }),
        };
        if !allowed {
            break;
        }
        calls.append(&mut cs);
        end = call_end;
        let q = skip_ws(text, end);
        match eat_any(text, q, f.sep) {
            Some(after) => {
                // The separator belongs to the block only if a call follows it.
                match one_call(f, text, after, true, ctx, cl) {
                    Some(_) => {
                        end = after;
                        bare_ok = true;
                        continue;
                    }
                    None => break,
                }
            }
            None => bare_ok = false,
        }
        if !next_call_starts(f, text, skip_ws(text, end)) {
            break;
        }
    }
    if calls.is_empty() {
        return Outcome::Skip;
    }
    let q = skip_ws(text, end);
    match eat_any(text, q, f.section_close) {
        Some(after) if in_section || f.section_open_optional => end = after,
        _ if in_section => {
            let ok = match f.section_close_missing {
                Missing::Never => false,
                Missing::AtEnd => rest_is_blank(text, end),
                Missing::Always => true,
            };
            if !ok {
                return Outcome::Skip;
            }
        }
        _ => {}
    }
    Outcome::Block(start..with_trailing(text, end, f.trailing), calls)
}

/// Skips plain text (no special token) between a section's opener and its first call.
fn skip_noise(text: &str, pos: usize, f: &Format) -> usize {
    let limit = pos.saturating_add(f.noise).min(text.len());
    match AnyFinder::new(text, f.call_open).find(pos) {
        Some((p, _)) if p <= limit && text.get(pos..p).is_some_and(|n| !n.contains("<|")) => p,
        _ => pos,
    }
}

/// Whether another call of the block starts at `q`.
fn next_call_starts(f: &Format, text: &str, q: usize) -> bool {
    if f.call_open.is_empty() {
        // Bare calls follow each other only where the grammar reads several in one body;
        // a second body right after the first (`{..} {..}`) is read by the grammar.
        return false;
    }
    eat_any(text, q, f.call_open).is_some() || eat_any(text, q, f.bare_call).is_some()
}

/// One call at `pos` (leading whitespace allowed): its calls and the offset past it,
/// its closer included.
fn one_call(
    f: &Format,
    text: &str,
    pos: usize,
    bare_ok: bool,
    ctx: &Ctx<'_>,
    cl: &mut Closers<'_>,
) -> Option<(Vec<Call>, usize)> {
    let q = skip_ws(text, pos);
    let (body, opened) = match eat_any(text, q, f.call_open) {
        Some(after) => (after, true),
        None if f.call_open.is_empty() => (q, false),
        None if eat_any(text, q, f.bare_call).is_some() => (q, false),
        None if bare_ok => (q, false),
        None => return None,
    };
    let close = if f.call_close.is_empty() {
        // Without per-call tokens the section's closer bounds the body.
        cl.find(f.section_close, body)
    } else {
        cl.find(f.call_close, body)
    };
    let limit = close.map(|(c, _)| c);
    let (calls, body_end) = parse(&f.grammar, text, body, limit, ctx, cl)?;
    if f.call_close.is_empty() {
        return Some((calls, body_end));
    }
    let after = skip_ws(text, body_end);
    match close {
        Some((c, len)) if c == after => Some((calls, c + len)),
        _ => {
            let ok = match f.call_close_missing {
                Missing::Never => false,
                Missing::AtEnd => rest_is_blank(text, body_end),
                Missing::Always => true,
            };
            // A bare call (its opener missing) needs its orphan closer, unless it ends
            // the text: nothing else says it is markup.
            (ok && (opened || rest_is_blank(text, body_end))).then_some((calls, body_end))
        }
    }
}

/// Parses one call body with `g`.
fn parse(
    g: &Grammar,
    text: &str,
    pos: usize,
    limit: Option<usize>,
    ctx: &Ctx<'_>,
    cl: &mut Closers<'_>,
) -> Option<(Vec<Call>, usize)> {
    let scope = match limit {
        Some(l) => text.get(..l)?,
        None => text,
    };
    let bounded = |parse_body: &dyn Fn(usize) -> Option<Call>| {
        let l = limit?;
        parse_body(l).map(|c| (vec![c], l))
    };
    match g {
        Grammar::Json(j) => json::parse(scope, pos, j),
        Grammar::Named(n) => json::parse_named(scope, pos, n).map(|(c, e)| (vec![c], e)),
        Grammar::Invoke(syn) => {
            let mut close = Finder::new(text, syn.invoke_close);
            let at = skip_ws(scope, pos);
            xml::parse_invoke_run(scope, at, syn, &mut close)
        }
        Grammar::FunctionEq => {
            let l = limit?;
            let at = skip_ws(text, pos);
            let mut pclose = Finder::new(text, "</parameter>");
            let mut pnext = Finder::new(text, "<parameter=");
            let call = xml::parse_function_eq(text, at, l, &mut pclose, &mut pnext)?;
            let _ = cl;
            Some((vec![call], l))
        }
        Grammar::Kv(syn) => bounded(&|l| kv::parse(text, pos, l, syn)),
        Grammar::Brace(syn) => bounded(&|l| brace::parse(text.get(..l)?, pos, syn)),
        Grammar::PyList(opts) => python::parse_call_list(scope, skip_ws(scope, pos), *opts),
        Grammar::PyCalls => py_calls(scope, pos),
        Grammar::Either(gs) => gs.iter().find_map(|g| parse(g, text, pos, limit, ctx, cl)),
        Grammar::Custom(f) => f(text, pos, limit, ctx),
    }
}

/// Python keyword calls one after another (whitespace between), or one list of them.
fn py_calls(text: &str, pos: usize) -> Option<(Vec<Call>, usize)> {
    let mut at = skip_ws(text, pos);
    if text.as_bytes().get(at) == Some(&b'[') {
        return python::parse_call_list(text, at, PyOpts::STRICT);
    }
    let mut calls = Vec::new();
    let mut end = at;
    while let Some((c, e)) = python::parse_call(text, at, PyOpts::STRICT) {
        calls.push(c);
        end = e;
        at = skip_ws(text, e);
    }
    (!calls.is_empty()).then_some((calls, end))
}

/// Extends `end` over the control tokens that directly follow the markup.
pub fn with_trailing(text: &str, mut end: usize, own: &[&str]) -> usize {
    loop {
        let q = skip_ws(text, end);
        match eat_any(text, q, own).or_else(|| eat_any(text, q, END_OF_TURN)) {
            Some(after) => end = after,
            None => return end,
        }
    }
}

/// Pushes the blocks as leaks, merging neighbours separated only by whitespace (the
/// whitespace between calls of one block is markup).
pub fn merge(
    text: &str,
    family: Family,
    mut blocks: Vec<(Range<usize>, Vec<Call>)>,
    out: &mut Vec<Leak>,
) {
    blocks.sort_by_key(|(span, _)| span.start);
    let mut cur: Option<Leak> = None;
    for (span, calls) in blocks {
        match cur.as_mut() {
            Some(c) if span.start < c.span.end => {}
            Some(c)
                if text
                    .get(c.span.end..span.start)
                    .is_some_and(|g| g.trim().is_empty()) =>
            {
                c.span.end = span.end;
                c.calls.extend(calls);
            }
            _ => {
                out.extend(cur.take());
                cur = Some(Leak {
                    family,
                    span,
                    calls,
                    results: Vec::new(),
                });
            }
        }
    }
    out.extend(cur);
}
