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
//! - the control tokens that end the model's turn right after the markup, which go with it,
//!   and an empty section (its opener, then its closer), which goes as a leak with no call;
//! - whether the calls must name tools the agent has enabled (a weak marker);
//! - tokens spelled another way (`super::rows` derives the spellings a row allows);
//! - a call whose opener was stripped, found from a token inside it (Kimi's
//!   `<|tool_call_argument_begin|>`, GLM's `<arg_key>`): the name before that token starts
//!   the call, and it needs its orphan closer (or the end of the text) like any bare call.
//!
//! A row of the table says which of these its format has; the grammar reads the calls.
//!
//! May depend on: `super::bodies`, `super::format`, `super::rows`, `super::util`,
//! `crate::grammar`, `crate::types`, `crate::Ctx`. No I/O.

use super::bodies::{parse, Closers};
// The row types keep their public path here, where the table's readers look for them.
pub use super::format::{Missing, Tools, MAX_CANDIDATES};
use super::rows::Row;
use super::util::{is_schema, lost_closer_ok, merge, with_trailing};
use crate::grammar::is_ident_char;
use crate::grammar::keys::rest_ends_turn;
use crate::grammar::text::{eat_any, find_bounded, preceded_by, skip_ws, AnyFinder};
use crate::types::Call;
use crate::{Ctx, Leak};
use std::ops::Range;

/// What one candidate came to.
enum Outcome {
    /// A block: its span and calls.
    Block(Range<usize>, Vec<Call>),
    /// Nothing here.
    Skip,
}

/// Appends the leaks of `r` found in `text`.
pub fn find(r: &Row, text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let present = r.present(text);
    let r: &Row = &present;
    let f = r.format;
    let mut entries: Vec<&'static str> = Vec::new();
    entries.extend(&r.section_open);
    if f.section_open.is_empty() || f.section_open_optional {
        entries.extend(&r.call_open);
    }
    entries.extend(&r.bare_call);
    let mut finder = AnyFinder::new(text, &entries);
    let mut closers = Closers::new(text);
    let mut blocks: Vec<(Range<usize>, Vec<Call>)> = Vec::new();
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some((pos, len)) = finder.find(from) else {
            break;
        };
        from = pos + len.max(1);
        if ctx.quoted(pos) {
            continue;
        }
        if inside_failed_section(r, text, pos) {
            ctx.declined(pos..pos + len, || {
                "a call of a section that did not parse".into()
            });
            continue;
        }
        let opener = eat_any(text, pos, &r.section_open).is_some()
            || eat_any(text, pos, &r.call_open).is_some();
        if !opener && opened_before(r, text, pos) {
            continue;
        }
        match block(r, text, pos, false, ctx, &mut closers) {
            Outcome::Block(span, calls) => {
                from = span.end.max(from);
                blocks.push((span, calls));
            }
            Outcome::Skip => ctx.declined(pos..pos + len, || {
                "no complete call follows (arguments that do not parse, a closer missing with \
                 text after it, or a tool the agent has not enabled)"
                    .into()
            }),
        }
    }
    if !r.inner.is_empty() {
        find_bare(r, text, ctx, &mut closers, &mut blocks);
    }
    merge(text, f.family, blocks, out);
}

/// Calls whose opener is missing, found from a token inside them: the name before the
/// token starts the call. A token inside a block already found is part of that block.
fn find_bare(
    r: &Row,
    text: &str,
    ctx: &Ctx<'_>,
    cl: &mut Closers<'_>,
    blocks: &mut Vec<(Range<usize>, Vec<Call>)>,
) {
    let mut finder = AnyFinder::new(text, &r.inner);
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some((pos, len)) = finder.find(from) else {
            break;
        };
        from = pos + len.max(1);
        if ctx.quoted(pos) || blocks.iter().any(|(s, _)| s.contains(&pos)) {
            continue;
        }
        let Some(start) = name_start_before(text, pos) else {
            continue;
        };
        if blocks.iter().any(|(s, _)| s.contains(&start))
            || opened_before(r, text, start)
            || !at_boundary(text, start)
        {
            continue;
        }
        if let Outcome::Block(span, calls) = block(r, text, start, true, ctx, cl) {
            from = span.end.max(from);
            blocks.push((span, calls));
        }
    }
}

/// Whether an opener stands right before `pos`: a bare call there is part of that opener's
/// block (which did not parse, or is read from the opener), or another format's.
fn opened_before(r: &Row, text: &str, pos: usize) -> bool {
    r.section_open
        .iter()
        .chain(&r.call_open)
        .chain(&r.foreign)
        .any(|t| preceded_by(text, pos, t).is_some())
}

/// Whether a bare call starting at `pos` starts where markup can: at the start of the text
/// or a line, or after the end of a sentence, a tag or other markup (glued to it or not).
/// A name in the middle of a sentence (`about it<arg_key>`) is a word.
fn at_boundary(text: &str, pos: usize) -> bool {
    let head = text.get(..pos).unwrap_or_default();
    match head.trim_end_matches([' ', '\t']).chars().next_back() {
        None => true,
        Some(c) => matches!(
            c,
            '\n' | '\r' | '.' | '!' | '?' | ':' | ';' | '>' | ')' | ']' | '}'
        ),
    }
}

/// How far back a call's name (with its namespace and counter) may start before the token
/// that follows it.
const MAX_NAME: usize = 160;

/// Where the call name that ends (whitespace allowed) right before `pos` starts: letters,
/// digits, `_` and `-` of any script, with Kimi's `functions.` namespace before it and its
/// `:N` counter after it.
pub fn name_start_before(text: &str, pos: usize) -> Option<usize> {
    let head = text.get(..pos)?;
    let head = head.trim_end_matches([' ', '\t', '\n', '\r']);
    let mut i = head.len();
    let digits = head.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits > 0 && head.as_bytes().get(i - digits - 1) == Some(&b':') {
        i -= digits + 1;
    }
    let name_end = i;
    let floor = name_end.saturating_sub(MAX_NAME);
    for (at, c) in head.get(..name_end)?.char_indices().rev() {
        if at < floor || !(is_ident_char(c) || c == '-') {
            break;
        }
        i = at;
    }
    if i == name_end {
        return None;
    }
    Some(match head.get(..i)?.strip_suffix("functions.") {
        Some(rest) => rest.len(),
        None => i,
    })
}

/// Whether a call opener at `pos` belongs to a section (or a run of calls) that did not
/// parse: a call of a broken section is not a leak of its own.
fn inside_failed_section(r: &Row, text: &str, pos: usize) -> bool {
    !r.section_open.is_empty()
        && eat_any(text, pos, &r.section_open).is_none()
        && r.section_open
            .iter()
            .chain(&r.call_close)
            .any(|t| preceded_by(text, pos, t).is_some())
}

/// Parses the block starting at `start`, where one of the format's entry literals is (or,
/// `bare`, the name of a call whose opener is missing: then only for enabled tools).
fn block(
    r: &Row,
    text: &str,
    start: usize,
    bare: bool,
    ctx: &Ctx<'_>,
    cl: &mut Closers<'_>,
) -> Outcome {
    let f = r.format;
    let mut pos = start;
    let in_section = match eat_any(text, pos, &r.section_open) {
        Some(after) => {
            pos = after;
            true
        }
        None => false,
    };
    // An empty section (`<|tool_calls_section_begin|><|tool_calls_section_end|>`): the
    // wrapper a server left after the calls in it were taken out, or emitted with none. Its
    // tokens are the format's own and show the user nothing: they go.
    if in_section {
        if let Some(after) = eat_any(text, skip_ws(text, pos), &r.section_close) {
            return Outcome::Block(start..with_trailing(text, after, &r.trailing), Vec::new());
        }
    }
    if in_section && f.noise > 0 && !r.call_open.is_empty() {
        pos = skip_noise(text, pos, r);
    }
    let mut calls = Vec::new();
    let mut end = pos;
    // A call may start without its opener as the first of a section whose opener stands
    // for both, or right after a separator (`{..};{..}` after one `<|python_tag|>`).
    let mut bare_ok = bare || (in_section && f.section_open_optional);
    // The call about to be read was found from its inner token, its opener missing.
    let mut weak = bare;
    while let Some((mut cs, call_end)) = one_call(r, text, end, bare_ok, ctx, cl) {
        // A call found from its inner token lost the opener that made it unambiguous: like
        // every weak marker it counts only for the agent's own tools.
        let allowed = match f.tools {
            _ if weak => all_enabled(&cs, ctx),
            Tools::Any => true,
            Tools::Enabled => all_enabled(&cs, ctx),
            Tools::ArgsOrEnabled => cs.iter().all(|c| {
                c.arguments.as_object().is_some_and(|m| !m.is_empty()) || ctx.tool_enabled(&c.name)
            }),
        };
        // A tool's definition (its parameters a JSON schema) in a wrapper is the tool
        // described, not called (`<tools>{"name": .., "parameters": {"type": "object", ..}}`).
        if !allowed || cs.iter().any(|c| is_schema(&c.arguments)) {
            break;
        }
        calls.append(&mut cs);
        end = call_end;
        let q = skip_ws(text, end);
        match eat_any(text, q, &r.sep) {
            Some(after) => {
                // The separator belongs to the block only if a call follows it.
                match one_call(r, text, after, true, ctx, cl) {
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
        weak = bare;
        let q = skip_ws(text, end);
        if !next_call_starts(r, text, q) {
            // The next call lost its opener as this one may have (a server that strips
            // every special token but the ones it missed): its name runs into its inner
            // token (`<｜tool▁call▁end｜>function<｜tool▁sep｜>NAME`).
            if !bare_call_at(r, text, q) {
                break;
            }
            bare_ok = true;
            weak = true;
        }
    }
    // A call of the section that does not parse spoils the section.
    if calls.is_empty() || (in_section && next_call_starts(r, text, skip_ws(text, end))) {
        return Outcome::Skip;
    }
    let q = skip_ws(text, end);
    // A reporter's elision (`...`, `…`) on its own line after the last call stands for
    // calls that are gone: it is the section's, whatever follows it (its closer, the end,
    // prose after a lost closer), and a bare run's where the section's closer follows it.
    let elided = (in_section || f.section_open_optional)
        .then(|| skip_elision(text, q))
        .flatten()
        .filter(|&e| in_section || eat_any(text, skip_ws(text, e), &r.section_close).is_some());
    if let Some(e) = elided {
        end = e;
    }
    let q = skip_ws(text, end);
    match eat_any(text, q, &r.section_close) {
        Some(after) if in_section || f.section_open_optional => end = after,
        _ if in_section => {
            let ok = match f.section_close_missing {
                Missing::Never => false,
                Missing::AtEnd => {
                    rest_ends_turn(text, end) || lost_closer_ok(text, start, end, &calls, ctx)
                }
                Missing::AtEndEnabled => rest_ends_turn(text, end) && all_enabled(&calls, ctx),
                Missing::Always => true,
            };
            if !ok {
                return Outcome::Skip;
            }
        }
        _ => {}
    }
    Outcome::Block(start..with_trailing(text, end, &r.trailing), calls)
}

/// Past an elision at `pos` (`...` or `…`, alone on its line), if one stands there.
fn skip_elision(text: &str, pos: usize) -> Option<usize> {
    let rest = text.get(pos..)?;
    let dots = rest.len() - rest.trim_start_matches(['.', '…']).len();
    let after = pos + dots;
    let tail = text.get(after..)?.trim_start_matches([' ', '\t']);
    let line_ends = tail.is_empty() || tail.starts_with(['\n', '\r']);
    (rest.starts_with("...") || rest.starts_with('…'))
        .then_some(after)
        .filter(|_| line_ends)
}

/// Skips plain text (no special token) between a section's opener and its first call.
fn skip_noise(text: &str, pos: usize, r: &Row) -> usize {
    let limit = pos.saturating_add(r.format.noise).min(text.len());
    match AnyFinder::new(text, &r.call_open).find(pos) {
        Some((p, _)) if p <= limit && text.get(pos..p).is_some_and(|n| !n.contains("<|")) => p,
        _ => pos,
    }
}

/// Whether every call names a tool the agent has enabled.
fn all_enabled(calls: &[Call], ctx: &Ctx<'_>) -> bool {
    calls.iter().all(|c| ctx.tool_enabled(&c.name))
}

/// Whether another call of the block starts at `q`.
fn next_call_starts(r: &Row, text: &str, q: usize) -> bool {
    if r.call_open.is_empty() {
        // Bare calls follow each other only where the grammar reads several in one body;
        // a second body right after the first (`{..} {..}`) is read by the grammar.
        return false;
    }
    eat_any(text, q, &r.call_open).is_some() || eat_any(text, q, &r.bare_call).is_some()
}

/// Whether a call whose opener is missing starts at `q`: a name there runs into one of the
/// format's inner tokens.
fn bare_call_at(r: &Row, text: &str, q: usize) -> bool {
    let near = q.saturating_add(MAX_NAME + 8).min(text.len());
    r.inner
        .iter()
        .filter_map(|t| find_bounded(text, t, q, near))
        .min()
        .is_some_and(|p| name_start_before(text, p) == Some(q))
}

/// One call at `pos` (leading whitespace allowed): its calls and the offset past it,
/// its closer included.
fn one_call(
    r: &Row,
    text: &str,
    pos: usize,
    bare_ok: bool,
    ctx: &Ctx<'_>,
    cl: &mut Closers<'_>,
) -> Option<(Vec<Call>, usize)> {
    let f = r.format;
    let q = skip_ws(text, pos);
    let (body, opened) = match eat_any(text, q, &r.call_open) {
        Some(after) => (after, true),
        None if r.call_open.is_empty() => (q, false),
        None if eat_any(text, q, &r.bare_call).is_some() => (q, false),
        None if bare_ok => (q, false),
        None => return None,
    };
    let close = if r.call_close.is_empty() {
        // Without per-call tokens the section's closer bounds the body.
        cl.find(&r.section_close, body)
    } else {
        cl.find(&r.call_close, body)
    };
    // No closer anywhere after it: where the call's closer may be missing, the next
    // opener bounds the body (`<tool_call>` written again where `</tool_call>` belongs),
    // so a grammar that fills its body stops there.
    let limit = match close {
        Some((c, _)) => Some(c),
        None if f.call_close_missing != Missing::Never => {
            cl.find(&r.call_open, body).map(|(c, _)| c)
        }
        None => None,
    };
    let (calls, body_end) = parse(r.grammar, text, body, limit, ctx)?;
    if r.call_close.is_empty() {
        return Some((calls, body_end));
    }
    // One stray quote a model left right after the body (`{..}"</function>`, or at the
    // end of its line when the closer is gone) is the call's.
    let q = skip_ws(text, body_end);
    let past = q + 1;
    let stray = matches!(text.as_bytes().get(q), Some(b'"' | b'\'' | b'`'))
        && (close.is_some_and(|(c, _)| c == skip_ws(text, past))
            || text.get(past..).is_some_and(|r| {
                r.trim_start_matches([' ', '\t']).is_empty()
                    || r.trim_start_matches([' ', '\t']).starts_with(['\n', '\r'])
            }));
    let body_end = if stray { past } else { body_end };
    let after = skip_ws(text, body_end);
    match close {
        Some((c, len)) if c == after => Some((calls, c + len)),
        _ => {
            // The text ends there as a turn, or with a lone opener: the closer written
            // without its slash.
            let ends = |at: usize| {
                rest_ends_turn(text, at)
                    || crate::grammar::keys::closers_end_line(text, at)
                    || eat_any(text, skip_ws(text, at), &r.call_open)
                        .is_some_and(|e| rest_ends_turn(text, e))
            };
            let ok = match f.call_close_missing {
                Missing::Never => false,
                // A call whose closer is missing may also be followed by the next call of
                // the same format (a model that drops every closer): the next opener bounds
                // it as its closer would have.
                Missing::AtEnd => {
                    rest_ends_turn(text, body_end)
                        || (opened && next_call_starts(r, text, skip_ws(text, body_end)))
                        || (opened && lost_closer_ok(text, q, body_end, &calls, ctx))
                }
                // The next opener bounds it too (`<tool_call>` written again where its
                // closer belongs), as for `AtEnd`, for an enabled tool.
                Missing::AtEndEnabled => {
                    (ends(body_end)
                        || (opened && next_call_starts(r, text, skip_ws(text, body_end))))
                        && all_enabled(&calls, ctx)
                }
                Missing::Always => true,
            };
            // A bare call (its opener missing) needs its orphan closer, unless it ends
            // the text: nothing else says it is markup.
            (ok && (opened || ends(body_end))).then_some((calls, body_end))
        }
    }
}
