//! Bare Python calls, `NAME(key=..)`, which hold no anchor byte: the prefilter's look at
//! the first and last lines ([`lines_probe`]), the calls on those lines and the lines of
//! calls next to them, a lone `NAME()` or Harmony recipient header as the whole message,
//! and Google's ```` ```tool_code ```` fences.
//!
//! May depend on: `super::apart`, `super::ends`, `crate::families::cli`, `crate::families::harmony`,
//! `crate::families::util`, `crate::envelope` (generic call words), `crate::grammar`, `crate::types`, `crate::Ctx`.

use super::apart::{stands_after, stands_before};
use super::ends::{bracket_closer, tool_code_ends, TOOL_CODE};
use crate::families::harmony::header_words_only;
use crate::families::util::{with_trailing, Block, END_OF_TURN, MAX_CANDIDATES};
use crate::grammar::bytes::{self as class, SPACE, WORD};
use crate::grammar::python::{self, PyOpts};
use crate::grammar::text::{eat, skip_ws};
use crate::types::{Call, Family};
use crate::Ctx;

/// How far back from the end the last line's start is looked for (messages ending in `)`).
const LAST_LINE: usize = 384;

/// Where the message's text starts and ends, without whitespace, end-of-turn tokens and
/// call closers after it: bytes only (a tag read only before a final `>`), for the prefilter.
fn core_bounds(text: &str) -> (usize, usize) {
    let bytes = text.as_bytes();
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let mut end = bytes.len();
    loop {
        while end > start && bytes[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        // Every end-of-turn token ends with `>`; a bracketed closer of call markup
        // (`[/TOOL_CALL]`) with `]`.
        if end > start && bytes[end - 1] == b']' {
            match bracket_closer(&bytes[start..end]) {
                Some(len) => {
                    end -= len;
                    continue;
                }
                None => return (start, end),
            }
        }
        if end == start || bytes[end - 1] != b'>' {
            return (start, end);
        }
        let head = text.get(..end).unwrap_or_default();
        if let Some(tok) = END_OF_TURN.iter().find(|tok| head.ends_with(**tok)) {
            end -= tok.len();
            continue;
        }
        // A closer of call markup whose opener was stripped (`NAME(..)\n</tool_call>`, any
        // format's: `</function_calls>`, `<｜tool▁calls▁end｜>`) ends the call as the turn's
        // end does; the remnant rule takes it with the call.
        let closer = head.rfind('<').filter(|&lt| {
            crate::grammar::markup::tag_at(text, lt)
                .is_some_and(|t| t.span.end == end && crate::grammar::keys::closes_a_call(&t))
        });
        match closer {
            Some(lt) => end = lt,
            None => return (start, end),
        }
    }
}

/// Whether the message (its first line starting at `line`, ending at `e`) ends with a
/// bracketed closer of call markup (`[/TOOL_CALL]`) right after a bare call's line. Out of
/// line: a citation's `[1]` ends many messages, and they must not weigh on the rest.
#[cold]
#[inline(never)]
fn bracket_closes_call(text: &str, line: usize, e: usize) -> bool {
    let b = text.as_bytes();
    if bracket_closer(&b[line..e]).is_none() {
        return false;
    }
    let (start, end) = core_bounds(text);
    last_line(b, start, end)
        .is_some_and(|l| line_opens_call(b, l).is_some() || glued_call(b, l, end).is_some())
}

/// The namespaces a prompt may put the tools in, which a bare call then writes before the
/// name: OpenAI-style `functions.`, `tools.`, Gemini's `default_api.` (a method of anything
/// else is code: `app.run(debug=True)`).
const NAMESPACES: &[&str] = &["default_api.", "functions.", "tools."];

/// Where the name of a bare call whose line starts at `start` begins, past a namespace of
/// [`NAMESPACES`], and whether the call is wrapped in `print(..)` (Gemini's code execution
/// writes `print(default_api.NAME(..))`; only with a namespace).
fn call_prefix(bytes: &[u8], start: usize) -> (usize, bool) {
    let rest = bytes.get(start..).unwrap_or_default();
    let (inner, printed) = match rest.strip_prefix(b"print(") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    match NAMESPACES
        .iter()
        .find(|ns| inner.starts_with(ns.as_bytes()))
    {
        Some(ns) => (bytes.len() - inner.len() + ns.len(), printed),
        None => (start, false),
    }
}

/// The `(` of a bare call opening the line that starts at `start` (`NAME(key=`, with a
/// namespace or in `print(` as [`call_prefix`] reads them), if one may be there.
fn line_opens_call(bytes: &[u8], start: usize) -> Option<usize> {
    let start = call_prefix(bytes, start).0;
    let name = class::run(bytes.get(start..)?, WORD, 129);
    let open = method_call(bytes, start + name);
    (name > 0 && call_shape(bytes, open)).then_some(open)
}

/// Llama 3.1's built-in tools are called as a method (`brave_search.call(query=..)`,
/// Meta's `chat_format`): where a name ends at `i`, the `(` past its `.call`, else `i`.
fn method_call(bytes: &[u8], i: usize) -> usize {
    match bytes.get(i..).is_some_and(|r| r.starts_with(b".call(")) {
        true => i + ".call".len(),
        false => i,
    }
}

/// The role word a stripped turn header leaves glued right after a call that ended the
/// turn (`..)assistant` before a line break: Llama's `<|start_header_id|>assistant`
/// with its tokens stripped): the end past it, else `end`.
fn glued_role(text: &str, end: usize) -> usize {
    let rest = text.get(end..).unwrap_or_default();
    match ["assistant", "ipython"]
        .iter()
        .find(|w| rest.starts_with(**w))
        .map(|w| end + w.len())
    {
        Some(e) if rest_or_line_ends(text, e) => e,
        _ => end,
    }
}

/// Whether the line ends at `at` (spaces before its break, or the text's end).
fn rest_or_line_ends(text: &str, at: usize) -> bool {
    let r = text.get(at..).unwrap_or_default();
    let r = r.trim_start_matches([' ', '\t', '\r']);
    r.is_empty() || r.starts_with('\n')
}

/// Where the last line starts, when the message ends with `)` (a call may end it) and the
/// line is not longer than [`LAST_LINE`].
fn last_line(bytes: &[u8], start: usize, end: usize) -> Option<usize> {
    if end <= start || bytes.get(end - 1) != Some(&b')') {
        return None;
    }
    let floor = start.max(end.saturating_sub(LAST_LINE));
    let line = match memchr::memrchr(b'\n', bytes.get(floor..end)?) {
        Some(i) => floor + i + 1,
        None if floor == start => start,
        None => return None,
    };
    let spaces = bytes
        .get(line..end)?
        .iter()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    Some(line + spaces)
}

/// The prefilter's check for bare Python calls, which hold no anchor byte: one may open the
/// message's first line (`NAME(key=` before the prose) or open its last line and end the
/// message (`NAME(key=..)` after the prose). A few byte comparisons per message, and a look
/// back over the last line only when the message ends with `)`.
pub(crate) fn lines_probe(text: &str) -> bool {
    let b = text.as_bytes();
    if lone_recipient_possible(text) {
        return true;
    }
    // The first line: a name, then `(` (byte classes from one table: every message).
    let line = class::run(b, SPACE, usize::MAX);
    let word = |i: usize| i + class::run(b.get(i..).unwrap_or_default(), WORD, 129);
    let mut start = line;
    let mut i = word(line);
    // A namespace (`functions.`) or `print(` before the name: read only when the first word
    // ends with one of their bytes, so plain prose pays nothing more.
    if i > line && matches!(b.get(i), Some(b'.' | b'(')) {
        let name = call_prefix(b, line).0;
        if name != line {
            start = name;
            i = word(name);
        }
        i = method_call(b, i);
    }
    if i > start && b.get(i) == Some(&b'(') && call_shape(b, i) {
        return true;
    }
    // `NAME()` is a call only as the whole message.
    if i > start && b.get(i) == Some(&b'(') && b.get(i + 1) == Some(&b')') {
        return core_bounds(text) == (line, i + 2);
    }
    // A command line (`NAME key=v`, `cli`) opening the first line: the word, a space.
    if i > start && b.get(i) == Some(&b' ') && super::super::cli::args_open(b, i) {
        return true;
    }
    // The same with a name of `-`, `.` or `:` in it (`get-weather city=..`): detection reads
    // such an enabled name under an alias.
    if i > start && matches!(b.get(i), Some(b'-' | b'.' | b':')) {
        let j = i + class::run(&b[i..], WORD | class::DASH | class::DOT | class::COLON, 129);
        if b.get(j) == Some(&b' ') && super::super::cli::args_open(b, j) {
            return true;
        }
    }
    let mut e = b.len();
    while e > line && class::is(b[e - 1], SPACE) {
        e -= 1;
    }
    // A command line ending the message (end-of-turn tokens aside) ends with a quoted value.
    if e > line && matches!(b[e - 1], b'"' | b'\'') {
        return super::super::cli::last_line_opens(b, line, e);
    }
    // Arguments alone after the short prose that names their tool (`after`).
    if e > line && b[e - 1] == b'}' {
        return super::after::object_line(&b[..e]).is_some();
    }
    // Most messages end with neither `)`, a token's `>`, a fence nor emphasis: no more look.
    if e == line || !matches!(b[e - 1], b')' | b'>' | b'`' | b'*') {
        return e > line && b[e - 1] == b']' && bracket_closes_call(text, line, e);
    } else if b[e - 1] == b'*' {
        return super::super::cli::aside_opens(b, line, e);
    }
    if b[e - 1] == b'`' {
        return tool_code_ends(b, line, e);
    }
    let (start, end) = core_bounds(text);
    let quoted = end > start && matches!(b[end - 1], b'"' | b'\'');
    (quoted && super::super::cli::last_line_opens(b, line, end))
        || last_line(b, start, end)
            .is_some_and(|l| line_opens_call(b, l).is_some() || glued_call(b, l, end).is_some())
        || (b[e - 1] == b')' && super::super::cli::aside_opens(b, line, e))
}

/// Where a bare call glued to the prose of the last line (the line starting at `line`,
/// the message ending at `end`) may start: right after a sentence's end, the first such
/// place where a call may open. Models that write their call after a sentence of their own
/// write it there: `Noted. NAME(key=..)`, `Noted!NAME(key=..)`. A `.` or `:` ends a
/// sentence only with a space after it (`app.run(debug=True)` is a method, `a:b(` no
/// sentence); `!` and `?` with or without.
fn glued_call(bytes: &[u8], line: usize, end: usize) -> Option<usize> {
    let seg = bytes.get(line..end)?;
    // Most last lines that end with `)` end with a link or an aside, whose `(` follows no
    // name and opens no `key=`: one SIMD look for a call's `(` before reading the line.
    if !memchr::memchr_iter(b'(', seg).any(|i| call_shape(bytes, line + i)) {
        return None;
    }
    seg.iter()
        .enumerate()
        .filter_map(|(i, b)| {
            let after = line + i + 1;
            let spaces = bytes
                .get(after..end)?
                .iter()
                .take_while(|&&c| c == b' ')
                .count();
            match b {
                b'!' | b'?' => Some(after + spaces),
                b'.' | b':' if spaces > 0 => Some(after + spaces),
                _ => None,
            }
        })
        .find(|&j| j < end && line_opens_call(bytes, j).is_some())
}

/// Whether the `(` at `p` follows a name and opens a keyword argument list (`key=`, not
/// `==` or `=>`). The callers read the name from the line's start, where a method
/// (`app.run(`) stops at its dot. An empty list (`main()`) is too little markup: it ends
/// half the scripts ever pasted into a reply.
fn call_shape(bytes: &[u8], p: usize) -> bool {
    if bytes.get(p) != Some(&b'(')
        || !p
            .checked_sub(1)
            .and_then(|i| bytes.get(i))
            .is_some_and(|&b| class::is(b, WORD))
    {
        return false;
    }
    let mut i = p + 1;
    while bytes.get(i).is_some_and(|b| *b == b' ') {
        i += 1;
    }
    let key = i;
    i += class::run(bytes.get(i..).unwrap_or_default(), WORD, 64);
    while bytes.get(i).is_some_and(|b| *b == b' ') {
        i += 1;
    }
    i > key && bytes.get(i) == Some(&b'=') && !matches!(bytes.get(i + 1), Some(b'=' | b'>'))
}

/// Bare Python calls where [`lines_probe`] looks (opening the first line or the last),
/// and on the lines of calls next to them. A message that is one bare call of an enabled
/// tool and nothing else is a call too (Granite's bare form, vLLM's `granite_pythonic`):
/// an assistant's whole reply is not an example of a call to its own tool. There, and only
/// there, an empty argument list (`list_files()`) counts as well.
pub(super) fn python_lines(text: &str, ctx: &Ctx<'_>) -> Vec<(Family, Block)> {
    let mut found = python_candidates(text, ctx);
    if found.is_empty() {
        found.extend(whole_empty_call(text, ctx));
        found.extend(whole_recipient(text, ctx));
    }
    found
        .into_iter()
        .filter(|(_, c)| c.iter().all(|c| ctx.tool_enabled(&c.name)))
        .map(|b| (Family::Pythonic, b))
        .collect()
}

/// The complete bare calls standing where [`lines_probe`] looks, and on the lines of calls
/// after the first and before the last; tools not yet asked.
fn python_candidates(text: &str, ctx: &Ctx<'_>) -> Vec<Block> {
    let bytes = text.as_bytes();
    let (start, end) = core_bounds(text);
    let mut out: Vec<Block> = Vec::new();
    // Down from a call opening the first line, while each line opens with one.
    let mut at = start;
    for _ in 0..MAX_CANDIDATES {
        let Some(b) = line_opens_call(bytes, at).and_then(|_| call_at(text, at, ctx)) else {
            break;
        };
        at = skip_ws(text, b.0.end);
        out.push(b);
    }
    // Up from a call opening the last line and ending the message, while each line above
    // opens with a call that ends it.
    let mut line = last_line(bytes, start, end);
    let mut line_end = end;
    for round in 0..MAX_CANDIDATES {
        let Some(mut l) = line else {
            break;
        };
        // On the last line the call may follow a sentence of the model's own.
        if round == 0 && line_opens_call(bytes, l).is_none() {
            match glued_call(bytes, l, end) {
                Some(g) => l = g,
                None => break,
            }
        }
        let found = line_opens_call(bytes, l)
            .and_then(|_| call_at(text, l, ctx))
            .filter(|(span, _)| span.end >= line_end);
        let Some(b) = found else {
            break;
        };
        if out
            .iter()
            .any(|(s, _)| s.start < b.0.end && b.0.start < s.end)
        {
            break;
        }
        line_end = text.get(..b.0.start).unwrap_or_default().trim_end().len();
        let above = memchr::memrchr(b'\n', bytes.get(..line_end).unwrap_or_default());
        line = above
            .map(|i| skip_ws(text, i + 1))
            .filter(|_| line_end > start);
        out.push(b);
    }
    out.sort_by_key(|(s, _)| s.start);
    out
}

/// The call written as code at `start`: `NAME(key=..)`, in a tools' namespace, maybe in
/// Gemini's `print(..)` (see [`call_prefix`]); the call and where it ends. A plain name:
/// `app.run(debug=True)` is a method of the code around it.
pub(crate) fn code_call(text: &str, start: usize) -> Option<(Call, usize)> {
    let (name_at, printed) = call_prefix(text.as_bytes(), start);
    let (mut call, mut end) = python::parse_call(text, name_at, PyOpts::STRICT)?;
    if let Some(name) = call.name.strip_suffix(".call").filter(|_| !printed) {
        call.name = name.to_string();
        end = glued_role(text, end);
    }
    if call.name.contains(['.', ':']) {
        return None;
    }
    if printed {
        end = eat(text, skip_ws(text, end), ")")?;
    }
    Some((call, end))
}

/// ```` ```tool_code ```` fences whose every line holding anything is one call written as
/// code ([`code_call`]) of an enabled tool: Gemma 3's and Gemini's way to call. A fence is
/// code, so this is the one place a code region is read; the leak is reported as
/// `json_fence` (a fence holding a call), which the driver lets stand in code.
pub(super) fn tool_code_fences(text: &str, ctx: &Ctx<'_>) -> Vec<Block> {
    let mut out = Vec::new();
    for r in ctx.code().regions().iter().take(MAX_CANDIDATES) {
        let Some(fence) = text.get(r.clone()) else {
            continue;
        };
        let indent = fence.len() - fence.trim_start_matches(' ').len();
        let Some(rest) = fence[indent..].strip_prefix(TOOL_CODE) else {
            continue;
        };
        if ctx.in_reasoning(r.start) {
            continue;
        }
        // The code on the opener's line when the model glued it to the info string
        // (```` ```tool_codeprint(..)``` ````), else on the lines below it; up to the
        // closing fence's line, or its backticks on the same line.
        let opened = r.start + indent + TOOL_CODE.len();
        let from = match rest.find('\n') {
            Some(nl) if rest[..nl].trim().is_empty() => opened + nl + 1,
            _ => opened,
        };
        let closing = text
            .get(from..r.end)
            .and_then(|b| b.rfind('\n'))
            .map(|i| from + i);
        let to = match closing {
            Some(i) => i,
            None => r.end - usize::from(fence.ends_with("```")) * 3,
        };
        let Some(calls) = code_lines(text, from, to) else {
            continue;
        };
        if calls.is_empty() || !calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
            continue;
        }
        out.push((r.start..with_trailing(text, r.end, &[]), calls));
    }
    out
}

/// The calls on the lines from `from` to `to` when every line holding anything is exactly
/// one call written as code.
fn code_lines(text: &str, from: usize, to: usize) -> Option<Vec<Call>> {
    let mut calls = Vec::new();
    let mut at = from;
    while at < to {
        let line_end = text.get(at..to)?.find('\n').map_or(to, |i| at + i);
        let line = text.get(at..line_end)?;
        if !line.trim().is_empty() {
            let start = at + (line.len() - line.trim_start().len());
            // One call, or a list of them (`[a(x=1), b(y=2)]`, the pythonic form).
            let (found, end) = match text.as_bytes().get(start) {
                Some(b'[') => python::parse_call_list(text, start, PyOpts::STRICT)?,
                _ => code_call(text, start).map(|(c, e)| (vec![c], e))?,
            };
            if !text.get(end..line_end)?.trim().is_empty() {
                return None;
            }
            calls.extend(found);
        }
        at = line_end + 1;
    }
    Some(calls)
}

/// `NAME()` as the whole message (end-of-turn tokens aside).
fn whole_empty_call(text: &str, ctx: &Ctx<'_>) -> Option<Block> {
    let bytes = text.as_bytes();
    let (start, end) = core_bounds(text);
    let open = end.checked_sub(2)?;
    let name = bytes.get(start..open)?;
    let plain = !name.is_empty()
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80)
        && bytes.get(open..end) == Some(b"()".as_slice());
    if !plain {
        return None;
    }
    call_at(text, start, ctx)
}

/// Where invisible characters count as spaces: no-break and zero-width spaces a front end
/// pasted around a header.
fn invisible(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{FEFF}')
}

/// Longest message read as a lone Harmony recipient header.
const HEADER_ONLY: usize = 256;

/// Whether `text` may be (or, streamed, still become) a lone Harmony recipient header
/// (`to=functions.NAME`): short messages only.
#[inline(always)]
pub(crate) fn lone_recipient_possible(text: &str) -> bool {
    // Such a reply is short and opens with `to=`, a header word (`assistant`,
    // `commentary`, `analysis`, `final`) or an invisible space: its length and one byte's
    // look for most replies, then one byte search, no substring searcher to build.
    text.len() <= HEADER_ONLY && recipient_opens(text.as_bytes())
}

#[inline(never)]
fn recipient_opens(b: &[u8]) -> bool {
    let first = b.iter().find(|c| !c.is_ascii_whitespace());
    matches!(first, Some(b't' | b'a' | b'c' | b'f' | 0xC2 | 0xE2 | 0xEF))
        && memchr::memchr_iter(b'=', b)
            .any(|i| i >= 2 && &b[i - 2..i] == b"to" && b[i + 1..].starts_with(b"functions."))
}

/// A message that is only a Harmony recipient header with its tokens stripped
/// (`to=functions.NAME`, maybe with its role, channel and content-type words) for an
/// enabled tool: a call with no arguments, as `NAME()` is as the whole message.
fn whole_recipient(text: &str, ctx: &Ctx<'_>) -> Option<Block> {
    if text.len() > HEADER_ONLY {
        return None;
    }
    let core = text.trim_matches(invisible);
    let to = core.find("to=functions.")?;
    let rest = &core[to + "to=functions.".len()..];
    let name_len = rest.find(invisible).unwrap_or(rest.len());
    let name = &rest[..name_len];
    let words_ok = |s: &str| {
        s.split(invisible)
            .all(|w| w.is_empty() || header_words_only(w))
    };
    if !words_ok(&core[..to]) || !words_ok(&rest[name_len..]) || !ctx.tool_enabled(name) {
        return None;
    }
    let start = text.len() - text.trim_start_matches(invisible).len();
    let call = Call {
        name: name.to_string(),
        arguments: serde_json::Value::Object(serde_json::Map::new()),
    };
    Some((start..text.len(), vec![call]))
}

/// The bare call opening the line at `start`: complete, a plain name (maybe in a tools'
/// namespace, maybe in `print(..)`), standing apart.
fn call_at(text: &str, start: usize, ctx: &Ctx<'_>) -> Option<Block> {
    if ctx.quoted(start) {
        return None;
    }
    let (call, end) = code_call(text, start)?;
    if !stands_before(text, start) || !stands_after(text, end) {
        return None;
    }
    Some((start..with_trailing(text, end, &[]), vec![call]))
}
