//! XML helpers shared by the XML-style families (`xml_invoke`, `minimax`, `dots`, `step3`,
//! `minicpm5`, `glm`, `hermes`, `longcat`): tag and attribute reading, the `<invoke>` parser,
//! a forward-only closer search, merging adjacent blocks into one leak.
//!
//! May depend on: `super::util`, `crate::types`. No I/O.

use super::util::{attr, find_from, is_tool_name, typed_param};
use crate::types::Family;
use crate::{Call, Leak};
use serde_json::{Map, Value};
use std::ops::Range;

/// How far back over whitespace a wrapper tag is looked for.
const WS_LOOKBACK: usize = 256;
/// Longest start tag (`<invoke name="...">`) accepted.
const MAX_TAG: usize = 512;

/// One parsed block before adjacent blocks are merged.
pub(in crate::families) struct Piece {
    pub span: Range<usize>,
    pub calls: Vec<Call>,
}

/// Finds the next `needle` at or after a position, remembering the last answer so a
/// sequence of searches from increasing positions costs one pass over the text.
pub(in crate::families) struct Finder<'t> {
    text: &'t str,
    needle: &'static str,
    /// `(from, answer)` of the last search.
    last: Option<(usize, Option<usize>)>,
}

impl<'t> Finder<'t> {
    pub fn new(text: &'t str, needle: &'static str) -> Finder<'t> {
        Finder {
            text,
            needle,
            last: None,
        }
    }

    pub fn find(&mut self, from: usize) -> Option<usize> {
        if let Some((f, ans)) = self.last {
            if from >= f {
                match ans {
                    None => return None,
                    Some(p) if p >= from => return Some(p),
                    Some(_) => {}
                }
            }
        }
        let ans = find_from(self.text, self.needle, from);
        self.last = Some((from, ans));
        ans
    }
}

/// First `needle` in `text[from..limit]`.
pub(in crate::families) fn find_bounded(
    text: &str,
    needle: &str,
    from: usize,
    limit: usize,
) -> Option<usize> {
    let hay = text.as_bytes().get(from..limit.min(text.len()))?;
    memchr::memmem::find(hay, needle.as_bytes()).map(|i| from + i)
}

/// Offset of the first non-whitespace byte at or after `pos`.
pub(in crate::families) fn skip_ws_bounded(text: &str, pos: usize) -> usize {
    super::util::skip_ws(text, pos)
}

/// Whether only whitespace follows `pos`.
pub(in crate::families) fn rest_is_blank(text: &str, pos: usize) -> bool {
    text.get(pos..).is_some_and(|r| r.trim().is_empty())
}

/// When `tag` ends right before `pos` (whitespace between allowed), its start.
pub(in crate::families) fn preceded_by(text: &str, pos: usize, tag: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = pos.min(bytes.len());
    let floor = pos.saturating_sub(WS_LOOKBACK);
    while i > floor && bytes[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    let start = i.checked_sub(tag.len())?;
    (bytes.get(start..i)? == tag.as_bytes()).then_some(start)
}

/// Whether `text` has `lit` at `pos`.
pub(in crate::families) fn at_lit(text: &str, pos: usize, lit: &str) -> bool {
    text.as_bytes()
        .get(pos..)
        .is_some_and(|r| r.starts_with(lit.as_bytes()))
}

/// Orders the pieces, drops overlapping ones and merges pieces separated only by
/// whitespace into one leak (the whitespace between calls of one block is markup).
pub(in crate::families) fn merge_pieces(
    text: &str,
    family: Family,
    mut pieces: Vec<Piece>,
    out: &mut Vec<Leak>,
) {
    pieces.sort_by_key(|p| p.span.start);
    let mut cur: Option<Leak> = None;
    for p in pieces {
        match cur.as_mut() {
            Some(c) if p.span.start < c.span.end => {}
            Some(c)
                if text
                    .get(c.span.end..p.span.start)
                    .is_some_and(|g| g.trim().is_empty()) =>
            {
                c.span.end = p.span.end;
                c.calls.extend(p.calls);
            }
            _ => {
                if let Some(done) = cur.take() {
                    out.push(done);
                }
                cur = Some(Leak {
                    family,
                    span: p.span,
                    calls: p.calls,
                    results: Vec::new(),
                });
            }
        }
    }
    if let Some(done) = cur {
        out.push(done);
    }
}

/// How parameter values are typed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::families) enum ValueMode {
    /// Always the string as written.
    Raw,
    /// [`typed_param`]: JSON when the whole trimmed value is non-string JSON.
    Typed,
}

/// The tag names of one `<invoke>`-like syntax.
pub(in crate::families) struct InvokeSyntax {
    pub invoke_open: &'static str,
    pub invoke_close: &'static str,
    pub param_open: &'static str,
    pub param_close: &'static str,
    /// A marker that may precede every tag (MiniMax-M3's `]<]minimax[>[`).
    pub prefix: Option<&'static str>,
    /// Parameters may also be written as `<key>value</key>` elements.
    pub element_params: bool,
    pub values: ValueMode,
    /// A value that is one `<![CDATA[...]]>` section is its inner text.
    pub cdata: bool,
}

/// Reads a start tag `open` at `pos`: `open` must be followed by whitespace, `Ġ` (a
/// byte-level BPE space), `>` or directly `name=` (a lost space). Returns the attribute
/// text and the offset past `>`.
pub(in crate::families) fn start_tag<'t>(
    text: &'t str,
    pos: usize,
    open: &str,
) -> Option<(&'t str, usize)> {
    if !at_lit(text, pos, open) {
        return None;
    }
    let after = pos + open.len();
    let rest = text.get(after..)?;
    let ok = rest.starts_with(|c: char| c.is_ascii_whitespace() || c == '>' || c == 'Ġ')
        || rest.starts_with("name=");
    if !ok {
        return None;
    }
    let limit = after.saturating_add(MAX_TAG);
    let gt = find_bounded(text, ">", after, limit)?;
    let body = text.get(after..gt)?;
    if body.contains('<') {
        return None;
    }
    Some((body, gt + 1))
}

/// The `name` attribute of a start tag's attribute text, as a tool or parameter name.
pub(in crate::families) fn name_attr(body: &str) -> Option<String> {
    let norm;
    let body = if body.contains('Ġ') {
        norm = body.replace('Ġ', " ");
        norm.as_str()
    } else {
        body
    };
    let name = attr(body, "name")?.trim();
    (!name.is_empty() && name.len() <= 256 && !name.contains(['<', '>', '\n']))
        .then(|| name.to_string())
}

fn skip_prefix(text: &str, pos: usize, prefix: Option<&str>) -> usize {
    match prefix {
        Some(p) if at_lit(text, pos, p) => pos + p.len(),
        _ => pos,
    }
}

/// A value holding another invoke or parameter start tag: an earlier block was left
/// unclosed, and its "value" runs into the next one.
fn nested(raw: &str, syn: &InvokeSyntax) -> bool {
    [syn.invoke_open, syn.param_open].iter().any(|open| {
        let mut from = 0;
        while let Some(i) = find_from(raw, open, from) {
            from = i + open.len();
            let next = raw.get(from..).and_then(|r| r.chars().next());
            if matches!(next, Some(c) if c.is_ascii_whitespace() || c == '>' || c == 'Ġ')
                || raw.get(from..).is_some_and(|r| r.starts_with("name="))
            {
                return true;
            }
        }
        false
    })
}

fn value_of(raw: &str, syn: &InvokeSyntax) -> Value {
    let raw = match syn.prefix {
        Some(p) => raw.strip_suffix(p).unwrap_or(raw),
        None => raw,
    };
    if syn.cdata {
        let t = raw.trim();
        if let Some(inner) = t
            .strip_prefix("<![CDATA[")
            .and_then(|r| r.strip_suffix("]]>"))
        {
            return Value::String(inner.to_string());
        }
    }
    match syn.values {
        ValueMode::Raw => Value::String(raw.to_string()),
        ValueMode::Typed => typed_param(raw),
    }
}

/// Parses one invoke at `pos` (an optional prefix first). `close` finds the invoke's
/// closing tag. Returns the call and the offset past the closing tag.
pub(in crate::families) fn parse_invoke(
    text: &str,
    pos: usize,
    syn: &InvokeSyntax,
    close: &mut Finder<'_>,
) -> Option<(Call, usize)> {
    let pos = skip_prefix(text, pos, syn.prefix);
    let (tag, body_start) = start_tag(text, pos, syn.invoke_open)?;
    let name = name_attr(tag)?;
    if !is_tool_name(&name) {
        return None;
    }
    let end_tag = close.find(body_start)?;
    let mut args = Map::new();
    let mut i = body_start;
    loop {
        i = skip_ws_bounded(text, i);
        let j = skip_prefix(text, i, syn.prefix);
        if j >= end_tag {
            // Only whitespace (and a prefix before the closing tag) is left.
            if j > end_tag {
                return None;
            }
            break;
        }
        i = j;
        if let Some((ptag, vstart)) = start_tag(text, i, syn.param_open) {
            let key = name_attr(ptag)?;
            let vend = find_bounded(text, syn.param_close, vstart, end_tag)?;
            let raw = text.get(vstart..vend)?;
            if nested(raw, syn) {
                return None;
            }
            args.insert(key, value_of(raw, syn));
            i = vend + syn.param_close.len();
        } else if syn.element_params {
            let key_start = i + 1;
            let rest = text.as_bytes().get(key_start..end_tag)?;
            if text.as_bytes().get(i) != Some(&b'<') {
                return None;
            }
            let klen = rest
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
                .count();
            if klen == 0 || rest.get(klen) != Some(&b'>') {
                return None;
            }
            let key = text.get(key_start..key_start + klen)?;
            let closer = format!("</{key}>");
            let vstart = key_start + klen + 1;
            let vend = find_bounded(text, &closer, vstart, end_tag)?;
            let raw = text.get(vstart..vend)?;
            if nested(raw, syn) {
                return None;
            }
            args.insert(key.to_string(), value_of(raw, syn));
            i = vend + closer.len();
        } else {
            return None;
        }
    }
    Some((
        Call {
            name,
            arguments: Value::Object(args),
        },
        end_tag + syn.invoke_close.len(),
    ))
}

/// Parses invokes following each other (whitespace between) from `pos`.
pub(in crate::families) fn parse_invoke_run(
    text: &str,
    pos: usize,
    syn: &InvokeSyntax,
    close: &mut Finder<'_>,
) -> Option<(Vec<Call>, usize)> {
    let (first, mut end) = parse_invoke(text, pos, syn, close)?;
    let mut calls = vec![first];
    loop {
        let next = skip_ws_bounded(text, end);
        match parse_invoke(text, next, syn, close) {
            Some((c, e)) => {
                calls.push(c);
                end = e;
            }
            None => break,
        }
    }
    Some((calls, end))
}
