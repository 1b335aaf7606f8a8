//! `llama3_json`: Llama 3's JSON tool calls, `{"name": "f", "parameters": {...}}` (or
//! `"arguments"`), one or more separated by `;` or newlines, as the whole message or
//! embedded in prose; the API's envelopes written as text, `{"tool_calls": [..]}` and
//! `{"function_call": {..}}`, and one element of `tool_calls` (`{"id", "type": "function",
//! "function": {..}}`); LangChain's `{"action": NAME, "action_input": {..}}`.
//!
//! A bare JSON object is the weakest marker there is (a user may ask for JSON with a
//! `name` key), so an object counts only when it is exactly a call (no keys besides name,
//! arguments/parameters and call bookkeeping), its arguments are an object, and every call
//! names a tool the agent has enabled. Objects nested in other JSON are never candidates.
//!
//! May depend on: `crate::families::util`, `super::bodies` (the keyed call), `crate::grammar`,
//! `crate::json5`, `crate::types`, `crate::Ctx`.

use super::bodies::keyed_call;
use super::util::with_trailing;
use super::util::{calls_of, envelope, flat_call, is_schema, json_value_at, skip_ws, strict_call};
use crate::grammar::json::{call_of, Keys};
use crate::grammar::text::eat;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

/// Markers one of which any leak of this family contains: an object's brace, confirmed by
/// [`probe`] (a call's first key after it, whatever whitespace a model or a pretty-printer
/// put between); and the keys that make an object part of a call wherever they stand.
pub(crate) const TRIGGERS: &[&str] = &[
    "{",
    // One element of the API's `tool_calls` (`{"id", "type", "function": {..}}`, in any
    // order; its `"function": {` is the marker, so that JSON that merely starts with an
    // `id` costs no parse).
    "\"function\": {",
    "\"function\":{",
    // A call labelled as the API's field (`function_call:{"id", "call": NAME, ..}`).
    "function_call:{\"",
    "function_call: {\"",
];

/// The first keys a call object opens with (`{"name"`, `{"arguments"`, the flat
/// `{"type": "function", ..}` Llama 3.x writes, OpenAI's `{"tool_calls"` and
/// `{"function_call"` envelopes, the name under `function` or `function_name`, LangChain's `{"action"`, and every key that starts with
/// `tool`: `{"tool", "tool_input"}`, `tool_name`, `toolName`, `tool_uses`). A JSON agent's
/// `thought` before its call is read where the object opens the message (`AT_START`): as a
/// first key here it would cost a parse of every structured answer that opens with one.
const FIRST_KEYS: &[&[u8]] = &[
    b"name\"",
    b"arguments\"",
    b"parameters\"",
    b"type\"",
    b"function",
    b"action\"",
    b"recipient_name\"",
    b"tool",
];

/// The prefilter's look at a `{`: one of [`FIRST_KEYS`] in double (or Python's single)
/// quotes after it, past
/// at most 16 bytes of whitespace, or any key in typographic quotes (a word processor's or
/// a model's).
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    let rest = bytes.get(p + 1..).unwrap_or_default();
    let ws = rest
        .iter()
        .take(16)
        .take_while(|b| b.is_ascii_whitespace())
        .count();
    let rest = &rest[ws..];
    if rest.starts_with("\u{201C}".as_bytes()) {
        return true;
    }
    // Python's spelling too (`{'name': ..}`): the same keys in single quotes. Most objects'
    // first key starts with none of the keys' letters: one byte's look for them.
    if !rest.get(1).is_some_and(|b| b"naptfr".contains(b)) {
        return false;
    }
    match rest.first() {
        Some(b'"') => FIRST_KEYS.iter().any(|k| rest[1..].starts_with(k)),
        Some(b'\'') => FIRST_KEYS
            .iter()
            .any(|k| rest[1..].starts_with(&k[..k.len() - usize::from(k.ends_with(b"\""))])),
        _ => false,
    }
}
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = b"{";

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
    let mut rest = text.get(q..).unwrap_or_default();
    // Keys in typographic quotes compare as in ASCII ones.
    let ascii;
    if rest.starts_with('\u{201C}') {
        let head: String = rest.chars().take(24).collect();
        ascii = head.replace(['\u{201C}', '\u{201D}'], "\"");
        rest = &ascii;
    }
    // Keys in Python's single quotes compare as in double ones, for an object that opens
    // its line (in a sentence a Python dict is an example of data, not JSON).
    let single;
    if rest.starts_with('\'') {
        let line = text.get(..pos).unwrap_or_default();
        let line = &line[line.rfind('\n').map_or(0, |i| i + 1)..];
        if !line.trim().is_empty() {
            return false;
        }
        let head: String = rest.chars().take(24).collect();
        single = head.replace('\'', "\"");
        rest = &single;
    }
    let before = text.get(..pos).unwrap_or_default().trim_end();
    // An object that opens the message may start with any key (`{"server_idx": 0,
    // "tool_name": ..}`): it is parsed once, whatever it holds.
    // Elsewhere it opens with a call's first key, or with one an element of the API's
    // `tool_calls` may open with (its `"function": {` was the marker).
    let keyed = rest.strip_prefix('"').is_some_and(|r| {
        FIRST_KEYS
            .iter()
            .chain(&[b"id\"".as_slice(), b"function\"", b"function_name\""])
            .any(|k| r.as_bytes().starts_with(k))
    });
    if !before.is_empty() && !keyed {
        return false;
    }
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

/// The calls at `pos` (a candidate `{`): the object, if it is exactly a call or an envelope
/// of calls of enabled tools, and the offset past it.
fn call_at(text: &str, ctx: &Ctx<'_>, pos: usize) -> Option<(Vec<Call>, usize)> {
    // The whole message: then a flat call too, and a Python dict for JSON (the reply is
    // nothing but the object, so its spelling is all there is to read).
    let whole = text[..pos].trim().is_empty();
    let dict = || {
        text.get(pos + 1..)
            .is_some_and(|r| r.trim_start().starts_with('\''))
    };
    let (v, end) = match json_value_at(text, pos) {
        Some(read) => read,
        None if whole && dict() => crate::json5::parse_value_at(text, pos).ok()?,
        None => return None,
    };
    let whole = whole && text[end..].trim().is_empty();
    let calls = match strict_call(&v) {
        Some(call) => vec![call],
        None => match envelope(&v) {
            Some(calls) => calls,
            None if whole => {
                let call = flat_call(&v, false).or_else(|| keyed_call(&v));
                vec![call.filter(|c| !is_schema(&c.arguments))?]
            }
            None => return None,
        },
    };
    calls
        .iter()
        .all(|c| ctx.tool_enabled(&c.name))
        .then_some((calls, end))
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
        if let Some(leak) = array_before(text, p).and_then(|b| array_at(text, ctx, b)) {
            from = leak.span.end;
            out.push(leak);
            continue;
        }
        if !is_candidate(text, p) {
            continue;
        }
        candidates += 1;
        if ctx.in_code(p) {
            from = skip_braces(text, p).unwrap_or(p + 1);
            continue;
        }
        // A bare object under a line that calls it an example is one (`Here is an example
        // of the format:`): the model shows the shape, it does not call.
        if crate::grammar::text::after_example(text, p) {
            from = skip_braces(text, p).unwrap_or(p + 1);
            ctx.declined(p..p + 1, || "a line above calls it an example".into());
            continue;
        }
        let Some((calls, mut end)) = call_at(text, ctx, p) else {
            if let Some(leak) = hermes_without_opener(text, ctx, p) {
                from = leak.span.end;
                out.push(leak);
                continue;
            }
            // Not a call: skip the whole object so nothing nested in it is a candidate.
            from = skip_braces(text, p).unwrap_or(p + 1);
            continue;
        };
        let mut calls = calls;
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
                    calls.extend(c);
                    end = e;
                }
                None => break,
            }
        }
        // A closer right after the object: the opener was stripped (servers drop special
        // tokens); the closer goes with the call, and the markup is its format's.
        let q = skip_ws(text, end);
        let (family, end) = match ORPHAN_CLOSERS
            .iter()
            .find_map(|(c, f)| eat(text, q, c).map(|a| (*f, a)))
        {
            Some((f, after)) => (f, after),
            None => (Family::Llama3Json, end),
        };
        out.push(Leak {
            family,
            span: p..with_trailing(text, end, &[]),
            calls,
            results: Vec::new(),
        });
        from = end;
    }
}

const HERMES_CLOSE: &str = "</tool_call>";

/// Closers whose openers servers strip, and the format they say the call is in.
const ORPHAN_CLOSERS: &[(&str, Family)] = &[
    (HERMES_CLOSE, Family::Hermes),
    ("[END_TOOL_REQUEST]", Family::Lmstudio),
];

/// A Hermes call whose `<tool_call>` was stripped and whose object is not a strict call
/// (a display name, string arguments, bookkeeping keys): the orphan `</tool_call>` after it
/// says it is Hermes' markup, read as Hermes reads it, for an enabled tool.
fn hermes_without_opener(text: &str, ctx: &Ctx<'_>, p: usize) -> Option<Leak> {
    // The closer first (a brace count), the parse only where it stands.
    eat(text, skip_ws(text, skip_braces(text, p)?), HERMES_CLOSE)?;
    let (v, end) = json_value_at(text, p)?;
    let after = eat(text, skip_ws(text, end), HERMES_CLOSE)?;
    let call = call_of(&v, Keys::Loose)?;
    ctx.tool_enabled(&call.name).then(|| Leak {
        family: Family::Hermes,
        span: p..with_trailing(text, after, &[]),
        calls: vec![call],
        results: Vec::new(),
    })
}

/// The `[` right before the `{` at `p` (whitespace between), when the object starts like a
/// call (the probe's first keys): an array of calls is read from there.
fn array_before(text: &str, p: usize) -> Option<usize> {
    let before = text.get(..p)?.trim_end();
    let b = before.len().checked_sub(1)?;
    // JSON's quotes: a list of Python dicts after prose is a script's data.
    let quoted = text.get(skip_ws(text, p + 1)..)?.starts_with('"');
    (before.as_bytes().get(b) == Some(&b'[') && quoted && probe(text.as_bytes(), p)).then_some(b)
}

/// A JSON array of calls at `p` standing apart (`[{"name": .., "arguments": ..}]`), every
/// call for an enabled tool: on lines of its own, or as a sentence of its own (after a
/// sentence's end, glued or not, before a new one). Inline after a label (`Data: [..]`) or
/// inside a sentence it is data. Mistral's `[/TOOL_CALLS]` after it goes with it (its
/// `[TOOL_CALLS]` was stripped).
fn array_at(text: &str, ctx: &Ctx<'_>, p: usize) -> Option<Leak> {
    let head = text.get(..p)?.trim_end_matches([' ', '\t']);
    let apart =
        head.is_empty() || head.ends_with(['\n', '.', '!', '?', '>']) || head.trim().is_empty();
    if !apart || ctx.quoted(p) {
        return None;
    }
    let (v, end) = json_value_at(text, p)?;
    let calls = calls_of(&v, false)?;
    let end = with_trailing(text, end, &["[/TOOL_CALLS]"]);
    let line_end = text.get(end..).is_some_and(|r| {
        let r = r.trim_start_matches([' ', '\t']);
        r.starts_with('\n') || r.is_empty() || r.starts_with(char::is_uppercase)
    });
    (line_end && calls.iter().all(|c| ctx.tool_enabled(&c.name))).then(|| Leak {
        family: Family::Llama3Json,
        span: p..end,
        calls,
        results: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn envelopes_are_read_by_their_key_s_role() {
        for key in ["tool_calls", "calls", "function_calls", "toolUses"] {
            let t = format!(r#"{{"{key}": [{{"name": "search", "arguments": {{"q": "x"}}}}]}}"#);
            let d = run(&t, &["search"]);
            assert_eq!(d.leaks.len(), 1, "{key}");
            assert_eq!(d.cleaned.as_deref(), Some(""));
        }
        // A list under a key that says nothing of calls is data.
        let d = run(
            r#"{"items": [{"name": "search", "arguments": {}}]}"#,
            &["search"],
        );
        assert!(d.is_clean());
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
        assert_eq!(d.cleaned.as_deref(), Some("Results: ok"));
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
