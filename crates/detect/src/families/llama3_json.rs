//! `llama3_json`: Llama 3's JSON tool calls, `{"name": "f", "parameters": {...}}` (or
//! `"arguments"`), one or more separated by `;` or newlines, as the whole message or
//! embedded in prose.
//!
//! A bare JSON object is the weakest marker there is (a user may ask for JSON with a
//! `name` key), so an object counts only when it is exactly a call (no keys besides name,
//! arguments/parameters and call bookkeeping), its arguments are an object, and every call
//! names a tool the agent has enabled. Objects nested in other JSON are never candidates.
//!
//! The JSON call helpers here (`strict_call`, `calls_of`, `tagged_json`) are shared with the
//! families that wrap the same objects in their own tokens (granite, jamba, hunyuan,
//! nemotron_json, qwen25_coder, pangu, phi4mini, xlam, mistral, json_fence).
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{call_from_object, find_from, json_value_at, skip_ws};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;
use std::ops::Range;

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[
    "{\"name\"",
    "{ \"name\"",
    "{\n\"name\"",
    "{\n  \"name\"",
    "{\n    \"name\"",
    "{\"arguments\"",
    "{\"parameters\"",
];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = b"{";

/// Keys a call object may carry: its name, its arguments and call bookkeeping.
const CALL_KEYS: &[&str] = &["name", "arguments", "parameters", "id", "call_id", "type"];

/// Reads a call off an object that is exactly a call: `name` plus `arguments` or
/// `parameters` (not both), optionally `id`/`call_id` and `type: "function"`, nothing else;
/// arguments (decoded once when given as a serialized string) must be an object.
pub(crate) fn strict_call(v: &Value) -> Option<Call> {
    let obj = v.as_object()?;
    if obj.keys().any(|k| !CALL_KEYS.contains(&k.as_str())) {
        return None;
    }
    if obj.contains_key("arguments") && obj.contains_key("parameters") {
        return None;
    }
    if obj.get("type").is_some_and(|t| t != "function") {
        return None;
    }
    let call = call_from_object(v)?;
    call.arguments.is_object().then_some(call)
}

/// The calls of a JSON value that is one call object or a non-empty array of them.
pub(crate) fn calls_of(v: &Value, allow_object: bool) -> Option<Vec<Call>> {
    match v {
        Value::Array(items) if !items.is_empty() => items.iter().map(strict_call).collect(),
        Value::Object(_) if allow_object => strict_call(v).map(|c| vec![c]),
        _ => None,
    }
}

/// How a token-wrapped JSON family reads its markup.
pub(crate) struct Tagged {
    pub family: Family,
    /// The opening token.
    pub open: &'static str,
    /// The closing token, if the format has one.
    pub close: Option<&'static str>,
    /// Whether the markup still counts when the closing token is missing.
    pub close_optional: bool,
    /// Whether a bare call object (not an array) is accepted.
    pub allow_object: bool,
    /// Whether several JSON values may follow each other before the closing token.
    pub many: bool,
}

/// Finds `open` JSON `close` blocks: the JSON is strict, each value a call object or an
/// array of them; whitespace around the JSON is part of the markup. Consecutive blocks
/// separated only by whitespace become one leak.
pub(crate) fn tagged_json(text: &str, ctx: &Ctx<'_>, t: &Tagged, out: &mut Vec<Leak>) {
    let mut from = 0;
    let mut found: Vec<(Range<usize>, Vec<Call>)> = Vec::new();
    for _ in 0..super::MAX_CANDIDATES {
        let Some(p) = find_from(text, t.open, from) else {
            break;
        };
        from = p + t.open.len();
        if ctx.in_code(p) {
            continue;
        }
        let Some((calls, end)) = tagged_body(text, from, t) else {
            continue;
        };
        found.push((p..end, calls));
        from = end;
    }
    push_merged(text, t.family, found, out);
}

fn tagged_body(text: &str, from: usize, t: &Tagged) -> Option<(Vec<Call>, usize)> {
    let mut calls = Vec::new();
    let mut at = skip_ws(text, from);
    loop {
        if !matches!(text.as_bytes().get(at), Some(b'[' | b'{')) {
            return None;
        }
        let (v, end) = json_value_at(text, at)?;
        calls.extend(calls_of(&v, t.allow_object)?);
        at = end;
        let next = skip_ws(text, at);
        if t.many && matches!(text.as_bytes().get(next), Some(b'[' | b'{')) {
            at = next;
            continue;
        }
        break;
    }
    let next = skip_ws(text, at);
    match t.close {
        Some(close) if text.get(next..).is_some_and(|r| r.starts_with(close)) => {
            Some((calls, next + close.len()))
        }
        Some(_) if t.close_optional => Some((calls, at)),
        Some(_) => None,
        None => Some((calls, at)),
    }
}

/// Pushes the found blocks, merging neighbours separated only by whitespace.
pub(crate) fn push_merged(
    text: &str,
    family: Family,
    found: Vec<(Range<usize>, Vec<Call>)>,
    out: &mut Vec<Leak>,
) {
    let mut cur: Option<Leak> = None;
    for (span, calls) in found {
        match cur.as_mut() {
            Some(l)
                if l.span.end <= span.start
                    && text
                        .get(l.span.end..span.start)
                        .is_some_and(|g| g.trim().is_empty()) =>
            {
                l.span.end = span.end;
                l.calls.extend(calls);
            }
            _ => {
                if let Some(l) = cur.take() {
                    out.push(l);
                }
                cur = Some(Leak {
                    family,
                    span,
                    calls,
                    results: Vec::new(),
                });
            }
        }
    }
    if let Some(l) = cur {
        out.push(l);
    }
}

/// Offset just past the `}` matching the `{` at `pos`, reading double-quoted strings;
/// `None` when it never closes.
fn skip_braces(text: &str, pos: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = pos;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// Whether a `{` at `pos` may start a call: the next token is one of the call keys, and it
/// is not nested in other JSON (the previous non-blank byte is not `[ , { :` or a quote,
/// except `:` ending prose such as "Here is the result:").
fn is_candidate(text: &str, pos: usize) -> bool {
    let q = skip_ws(text, pos + 1);
    let rest = text.get(q..).unwrap_or_default();
    if !(rest.starts_with("\"name\"")
        || rest.starts_with("\"arguments\"")
        || rest.starts_with("\"parameters\""))
    {
        return false;
    }
    let before = text.get(..pos).unwrap_or_default().trim_end();
    match before.as_bytes().last() {
        None => true,
        Some(b'[' | b',' | b'{' | b'"' | b'\'' | b'=' | b'(') => false,
        Some(b':') => {
            // `"key": {` is nested JSON; `word: {` is prose.
            let b2 = before[..before.len() - 1].trim_end();
            !b2.ends_with('"')
        }
        Some(_) => true,
    }
}

/// One call at `pos` (a candidate `{`): the object, if it is exactly a call of an enabled
/// tool, and the offset past it.
fn call_at(text: &str, ctx: &Ctx<'_>, pos: usize) -> Option<(Call, usize)> {
    let (v, end) = json_value_at(text, pos)?;
    let call = strict_call(&v)?;
    ctx.tool_enabled(&call.name).then_some((call, end))
}

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let bytes = text.as_bytes();
    let mut from = 0;
    let mut candidates = 0;
    while candidates < super::MAX_CANDIDATES {
        let Some(rel) = bytes.get(from..).and_then(|r| memchr::memchr(b'{', r)) else {
            break;
        };
        let p = from + rel;
        from = p + 1;
        if !is_candidate(text, p) {
            continue;
        }
        candidates += 1;
        if ctx.in_code(p) {
            from = skip_braces(text, p).unwrap_or(p + 1);
            continue;
        }
        let Some((call, mut end)) = call_at(text, ctx, p) else {
            // Not a call: skip the whole object so nothing nested in it is a candidate.
            from = skip_braces(text, p).unwrap_or(p + 1);
            continue;
        };
        let mut calls = vec![call];
        // Further calls separated by `;` and/or whitespace belong to the same block.
        while candidates < super::MAX_CANDIDATES {
            let mut q = skip_ws(text, end);
            if bytes.get(q) == Some(&b';') {
                q = skip_ws(text, q + 1);
            }
            if q == end || bytes.get(q) != Some(&b'{') {
                break;
            }
            candidates += 1;
            match call_at(text, ctx, q) {
                Some((c, e)) => {
                    calls.push(c);
                    end = e;
                }
                None => break,
            }
        }
        out.push(Leak {
            family: Family::Llama3Json,
            span: p..end,
            calls,
            results: Vec::new(),
        });
        from = end;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn whole_message_call() {
        let d = run(
            r#"{"name": "search", "arguments": {"q": "x"}}"#,
            &["search"],
        );
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"q": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn embedded_and_separated() {
        let d = run(
            r#"Results: {"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}} ok"#,
            &["a", "b"],
        );
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.cleaned.as_deref(), Some("Results:  ok"));
    }

    #[test]
    fn json_answers_stay() {
        let t = &["search", "Alice"];
        assert!(run(r#"{"name": "Alice", "age": 30}"#, t).is_clean());
        assert!(run(r#"{"name": "other", "arguments": {}}"#, t).is_clean());
        assert!(run(
            r#"{"name": "search", "arguments": {}, "description": "x"}"#,
            t
        )
        .is_clean());
        assert!(run(r#"{"name": "search", "arguments": "plain"}"#, t).is_clean());
        assert!(run(r#"Data: [{"name": "search", "arguments": {}}]"#, t).is_clean());
        assert!(run(r#"{"user": {"name": "search", "arguments": {}}}"#, t).is_clean());
        assert!(run(
            r#"{"name": "x", "arguments": {"name": "search", "arguments": {}}}"#,
            t
        )
        .is_clean());
        assert!(run("{name}, welcome", t).is_clean());
        assert!(run(r#"Use `{"name": "search", "arguments": {}}` to call it"#, t).is_clean());
        assert!(run(r#"{"name": "search", "parameters": {invalid json}"#, t).is_clean());
    }

    #[test]
    fn bounded_on_repetition() {
        let t = r#"{"name": "nope", "arguments": {}} "#.repeat(10_000);
        assert!(run(&t, &["search"]).is_clean());
        let t = "{\"name\" ".repeat(10_000);
        assert!(run(&t, &["search"]).is_clean());
    }
}
