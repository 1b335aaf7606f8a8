//! The second anchor: a tool's name followed by a complete argument object or argument list,
//! standing as a line or a sentence of its own, with no wrapper around it. This is what
//! every format becomes once a server or a front end dropped its special tokens, and what
//! models write when a prompt taught them a bare form:
//!
//! - `NAME{json}`, `NAME {json}`: Mistral's `[TOOL_CALLS]NAME[ARGS]{..}` and DeepSeek V3.1's
//!   `NAME<｜tool▁sep｜>{..}` with their tokens stripped (reported as `mistral`);
//! - `functions.NAME:0{json}`: Kimi's call id with its tokens stripped (`kimi`);
//! - `NAME` on a line of its own (or after Functionary's `>>>`), then `{json}` (GLM-4-0414,
//!   Functionary) (`glm`);
//! - `NAME({json})`, one positional object, or a script's object literal at a line's start
//!   (`NAME({ key: "v" })`) (`pythonic`);
//! - `[NAME]` on a line of its own, `{json}`, `[END_TOOL_REQUEST]` (or `[/NAME]`, the
//!   bracket tag's own closer): LM Studio's request whose opener was mangled (`lmstudio`);
//! - `call:default_api:NAME{key:<ctrl46>v<ctrl46>}`: Gemini's own call syntax (`gemini`);
//! - `<function=NAME{key="v",..}`: an element opener whose name runs into its arguments,
//!   written in JSON or as members (`xml_invoke`);
//! - `commentary to=functions.NAME json{..}`: Harmony with its tokens stripped (read by
//!   `harmony::stripped`, reported as `harmony`);
//! - `NAME(key="value", ...)`: a Python call without list brackets (Granite, Llama 3.2)
//!   (`pythonic`), keyword arguments only and a plain name (`main()` and `app.run(..)` end
//!   the scripts pasted into replies). This shape holds none of the prefilter's anchor bytes,
//!   so it is looked for only where a model writes a call before or after its prose: opening
//!   the message's first line, or opening its last line (or following a sentence's end on
//!   it) and ending the message (and on the lines of calls next to those), or as the whole
//!   message (then `NAME()` too). The name
//!   may stand in the tools' namespace (`functions.NAME(..)`, `tools.NAME(..)`,
//!   `default_api.NAME(..)`), and Gemini's code style wraps that in `print(..)`. The clean
//!   path pays a few byte comparisons for it, not a scan.
//!
//! The name alone is a weak marker: the call counts only for a tool the agent has enabled.
//! The tools are consulted only once a complete candidate stands in the text (arguments
//! parsed, the markup a line or sentence of its own), so ordinary prose never makes the
//! worker fetch them.
//!
//! Here: the finder that gathers the shapes and the prefilter's probe; `shapes` reads the
//! shapes around a `{`, `lines` the bare Python lines, `after` an arguments object after the
//! prose that names its tool, `apart` says where markup stands apart from prose.
//!
//! May depend on: its own `after`, `apart`, `ends`, `shapes`, `lines`, `named_fence`; `super::util`, `super::harmony`, `super::cli`,
//! `super::labels` (trace lines),
//! `crate::grammar`, `crate::types`, `crate::Ctx`.

mod after;
mod apart;
mod ends;
mod lines;
mod named_fence;
mod shapes;
#[cfg(test)]
mod tests;

// The other families read these under `named::`, where they always stood.
pub(crate) use apart::{stands_after, stands_before};
pub(crate) use lines::{lines_probe, lone_recipient_possible};

use super::harmony;
use super::util::{merge, with_trailing, Block, MAX_CANDIDATES};
use crate::grammar::bytes as class;
use crate::types::Family;
use crate::{Ctx, Leak};
use lines::{python_lines, tool_code_fences};
use shapes::{at_brace, GEMMA4_VERB};
use std::ops::Range;

/// A bare `{`, confirmed by [`probe`].
pub(crate) const TRIGGERS: &[&str] = &["{"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks found in `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    // Command lines (`cli`) share this detector's look at the first and last lines.
    super::cli::find(text, ctx, out);
    let mut by_family: Vec<(Family, Block)> = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut seen = 0;
    while let Some(p) =
        memchr::memchr(b'{', bytes.get(from..).unwrap_or_default()).map(|i| from + i)
    {
        from = p + 1;
        if !probe(bytes, p) || ctx.quoted(p) {
            continue;
        }
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        let trace = super::labels::trace_probe(bytes, p);
        if let Some((start, end, call)) =
            trace.then(|| super::labels::trace_line(text, p)).flatten()
        {
            if ctx.tool_enabled(&call.name) {
                from = end;
                let end = with_trailing(text, end, &[]);
                by_family.push((Family::Pythonic, (start..end, vec![call])));
                continue;
            }
        }
        let prev_end = by_family.last().map_or(usize::MAX, |(_, (s, _))| s.end);
        match at_brace(text, p, prev_end, ctx) {
            Some((family, span, call)) => {
                from = span.end;
                by_family.push((family, (span, vec![call])));
            }
            None => ctx.declined(p..p + 1, || {
                "no tool's name with a complete arguments object standing apart from the text"
                    .into()
            }),
        }
    }
    for (family, block) in python_lines(text, ctx) {
        by_family.push((family, block));
    }
    if let Some((span, call)) = after::args_after_prose(text, ctx) {
        let taken = by_family
            .iter()
            .any(|(_, (s, _))| s.start < span.end && span.start < s.end);
        if !taken && !ctx.quoted(span.start) {
            by_family.push((Family::Llama3Json, (span, vec![call])));
        }
    }
    for block in tool_code_fences(text, ctx) {
        by_family.push((Family::JsonFence, block));
    }
    for block in named_fence::fences(text, ctx) {
        by_family.push((Family::JsonFence, block));
    }
    let harmony_calls: Vec<Range<usize>> = by_family
        .iter()
        .filter(|(f, _)| *f == Family::Harmony)
        .map(|(_, (span, _))| span.clone())
        .collect();
    if !harmony_calls.is_empty() {
        for r in harmony::stripped_frame_words(text, &harmony_calls) {
            if !harmony_calls
                .iter()
                .any(|c| c.start < r.end && r.start < c.end)
            {
                by_family.push((Family::Harmony, (r, Vec::new())));
            }
        }
    }
    for family in [
        Family::Llama3Json,
        Family::JsonFence,
        Family::Mistral,
        Family::Kimi,
        Family::Glm,
        Family::Pythonic,
        Family::Lmstudio,
        Family::Gemini,
        Family::Gemma4,
        Family::Harmony,
        Family::XmlInvoke,
    ] {
        let blocks: Vec<Block> = by_family
            .iter()
            .filter(|(f, _)| *f == family)
            .map(|(_, b)| b.clone())
            .collect();
        if !blocks.is_empty() {
            merge(text, family, blocks, out);
        }
    }
}

/// The prefilter's look at a `{`: what a name could end with stands right before it (after
/// at most a few spaces): a name's last character, or `(`; after a line break, a name or
/// `[NAME]`'s `]`. And after it an object's first key (`"`) or its end (`}`): LaTeX's
/// `\frac{1}{2}`, code's `if x {` and templates' `{name}` stop here. Gemini's unquoted keys
/// pass only after its `default_api:` namespace.
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    if !name_before(bytes, p) {
        return false;
    }
    let q = p + 1 + class::run(bytes.get(p + 1..).unwrap_or_default(), class::SPACE, 8);
    match bytes.get(q) {
        Some(b'"') => true,
        // An empty object only glued to its name (`get_time{}`): `{}` after a space is a
        // placeholder (`"{}".format`, `-exec rm {}`, `Foo {}`).
        Some(b'}') => (q == p + 1 && p > 0 && bytes[p - 1] != b' ') || kimi_id_before(bytes, p),
        // A script's object literal as a call's one argument (`NAME({ key: "v" })`): the
        // parenthesis says it is an argument.
        Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
            (paren_before(bytes, p) && keyed(bytes, q))
                || gemini_before(bytes, p)
                || tag_eq_before(bytes, p)
        }
        // A trace line's object printed as a Python dict (`.. with arguments: {'k': ..}`).
        Some(b'\'') => super::labels::trace_probe(bytes, p),
        _ => false,
    }
}

/// Gemini's `default_api:NAME{key:` (or Gemma 4's verb): the namespace right before the
/// name before the `{` at `p`.
fn gemini_before(bytes: &[u8], p: usize) -> bool {
    let name = class::run_back(&bytes[..p], class::WORD | class::DASH | class::DOT, 128);
    let head = &bytes[..p - name];
    head.ends_with(b"default_api:") || head.ends_with(GEMMA4_VERB.as_bytes())
}

/// Whether a tag's `=NAME` stands right before the `{` at `p` (`<function=NAME{key=..`):
/// an element opener whose name runs into its arguments.
#[inline]
fn tag_eq_before(bytes: &[u8], p: usize) -> bool {
    let name = class::run_back(&bytes[..p], class::WORD | class::DASH, 128);
    let Some(head) = bytes[..p - name].strip_suffix(b"=") else {
        return false;
    };
    let tag = class::run_back(head, class::WORD, 32);
    name > 0 && tag > 0 && head[..head.len() - tag].ends_with(b"<")
}

/// Whether an object literal's first key and its `:` start at `q` (`key:`, `'key':`).
fn keyed(bytes: &[u8], q: usize) -> bool {
    let rest = bytes.get(q..).unwrap_or_default();
    let rest = rest.strip_prefix(b"'").unwrap_or(rest);
    let key = class::run(rest, class::WORD, 64);
    let rest = &rest[key..];
    let rest = rest.strip_prefix(b"'").unwrap_or(rest);
    key > 0 && rest.iter().find(|b| **b != b' ') == Some(&b':')
}

/// Whether `NAME(` stands right before the `{` at `p` (spaces between), the name opening
/// its line: a script's call inside code (`return jsonify({'a': ..`, `new Client({ ..`)
/// has words before it and costs no parse.
fn paren_before(bytes: &[u8], p: usize) -> bool {
    let head = bytes.get(..p).unwrap_or_default();
    let spaces = class::run_back(head, class::SPACE, 4);
    if head.len() <= spaces || head[head.len() - spaces - 1] != b'(' {
        return false;
    }
    let head = &head[..head.len() - spaces - 1];
    let name = class::run_back(head, class::WORD, 128);
    let head = &head[..head.len() - name];
    let indent = head
        .iter()
        .rev()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    name > 0
        && matches!(
            head.len().checked_sub(indent + 1).map(|i| head[i]),
            None | Some(b'\n')
        )
}

/// Whether Kimi's `NAME:N` call id stands before the `{` at `p` (spaces between).
fn kimi_id_before(bytes: &[u8], p: usize) -> bool {
    let head = bytes.get(..p).unwrap_or_default();
    let spaces = head
        .iter()
        .rev()
        .take(4)
        .take_while(|&&b| b == b' ')
        .count();
    let head = &head[..head.len() - spaces];
    let digits = head.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    digits > 0 && head.len() > digits && head[head.len() - digits - 1] == b':'
}

/// Whether what a name could end with stands right before the `{` at `p`.
fn name_before(bytes: &[u8], p: usize) -> bool {
    let mut i = p;
    let floor = p.saturating_sub(8);
    let mut newlines = 0;
    while i > floor {
        match bytes[i - 1] {
            b' ' | b'\t' | b'\r' => i -= 1,
            b'\n' if newlines < 2 => {
                newlines += 1;
                i -= 1;
            }
            _ => break,
        }
    }
    let name = |b: &u8| class::is(*b, class::WORD);
    // The run of name bytes ending at `end`, and the byte before it.
    let run_before = |end: usize| {
        let start = end - class::run_back(&bytes[..end], class::WORD, 128);
        (start, start.checked_sub(1).and_then(|j| bytes.get(j)))
    };
    match i.checked_sub(1).and_then(|j| bytes.get(j)) {
        // A name on a line of its own (`functions.NAME:0` too): only spaces before it on its
        // line (not ```json).
        Some(b) if name(b) && newlines > 0 => {
            let word = class::WORD | class::DOT | class::COLON | class::DASH;
            let mut k = i - class::run_back(&bytes[..i], word, 160);
            while k > 0 && matches!(bytes[k - 1], b' ' | b'\t') {
                k -= 1;
            }
            // Or the line is a Harmony header with its tokens stripped
            // (`assistant to=functions.NAME commentary json`, the object below it).
            let line = bytes[..k]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |n| n + 1);
            // Functionary's `>>>` before the name.
            let k = match bytes[..k].ends_with(b">>>") {
                true => k - 3,
                false => k,
            };
            // Or a bracketed call token stands before it (`[TOOL_CALL_START]NAME`).
            let token = || {
                bytes[k - 1] == b']'
                    && std::str::from_utf8(&bytes[line..k])
                        .ok()
                        .and_then(crate::remnant::bracket_token_ending)
                        .is_some_and(|(_, closes)| !closes)
            };
            // Or a special token (`<|assistant|>NAME`, GLM-4's turn before each call).
            let special = || bytes[..k].ends_with(b"|>") || bytes[..k].ends_with("｜>".as_bytes());
            k == 0
                || bytes[k - 1] == b'\n'
                || token()
                || special()
                || memchr::memmem::find(
                    &bytes[line.max(k.saturating_sub(160))..k],
                    b"to=functions.",
                )
                .is_some()
        }
        Some(b) if name(b) => true,
        // `NAME({`: a plain name, not a method (`x.find({`).
        Some(b'(') if newlines == 0 => {
            let (start, before) = run_before(i - 1);
            start < i - 1 && before != Some(&b'.')
        }
        Some(b']') => newlines > 0,
        // A trace line's connective (`Calling NAME with input: {`), or a name closed by a
        // colon right after a call wrapper's opener (`<tool_call>NAME:{`).
        Some(b':') if newlines == 0 => {
            super::labels::trace_probe(bytes, p) || name_then_mark(bytes, i - 1)
        }
        // A name closed like a tag (`NAME>{`, `<tool_call>NAME>{`).
        Some(b'>') if newlines == 0 => name_then_mark(bytes, i - 1),
        // An element's `=NAME` with one more `=` (`<function=NAME={`), or a call's fields
        // as pairs, the arguments last (`name=NAME args={`).
        Some(b'=') if i == p && i >= 2 => {
            (bytes[i - 2] == b's'
                && [&b" args"[..], b" arguments", b" parameters"]
                    .iter()
                    .any(|k| bytes[..i - 1].ends_with(k)))
                || (name_then_mark(bytes, i - 1) && tag_eq_before(bytes, i - 1))
        }
        _ => false,
    }
}

/// Whether a name ends right before the `>` or `:` at `sep` (`NAME>{`, `NAME:{`): the mark
/// a model put between a name and its object.
fn name_then_mark(bytes: &[u8], sep: usize) -> bool {
    sep > 0 && class::is(bytes[sep - 1], class::WORD)
}

/// Whether the `>` or `:` at `sep` closes a name that a tag's `>` opens
/// (`<tool_call>NAME>{`): the name written as if it were a tag of its own.
pub(super) fn name_closed_in_wrapper(bytes: &[u8], sep: usize) -> bool {
    let name = class::run_back(&bytes[..sep], class::WORD | class::DASH | class::DOT, 128);
    let start = sep - name;
    name > 0 && start > 0 && bytes[start - 1] == b'>'
}
