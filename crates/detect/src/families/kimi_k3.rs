//! `kimi_k3`: Kimi K3's XTML sections.
//!
//! `<|open|>tools<|sep|><|open|>call tool="calc" index="1"<|sep|><|open|>argument key="x" type="number"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`
//!
//! Values are typed by the argument's `type` attribute (`string` verbatim, `number`,
//! `integer`, `boolean`, `object`, `array`, `null` as JSON; a value that does not fit its
//! type, or no type, falls back to `typed_param`). XML entities in the `tool` and `key`
//! attributes are unescaped. Every call must be closed; the section's own close may be
//! missing only when the output ends right after the last call.
//!
//! K3 also wraps its answer in `<|open|>response<|sep|>..<|close|>response<|sep|>`. Those
//! two tokens are markup too, but only removed when the message has a tools section (each
//! becomes a leak without calls); the answer between them stays.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::MAX_CANDIDATES;
use super::util::{attr, find_from, json_whole, skip_ws, typed_param};
use crate::grammar::text::unescape_xml;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{Map, Value};

const TOOLS_OPEN: &str = "<|open|>tools<|sep|>";
const TOOLS_CLOSE: &str = "<|close|>tools<|sep|>";
const CALL_OPEN: &str = "<|open|>call";
const CALL_CLOSE: &str = "<|close|>call<|sep|>";
const ARG_OPEN: &str = "<|open|>argument";
const ARG_CLOSE: &str = "<|close|>argument<|sep|>";
const SEP: &str = "<|sep|>";
const RESPONSE_OPEN: &str = "<|open|>response<|sep|>";
const RESPONSE_CLOSE: &str = "<|close|>response<|sep|>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[TOOLS_OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut found: Vec<Leak> = Vec::new();
    let mut budget = MAX_CANDIDATES;
    let mut from = 0;
    while budget > 0 {
        let Some(start) = find_from(text, TOOLS_OPEN, from) else {
            break;
        };
        budget -= 1;
        from = start + TOOLS_OPEN.len();
        if ctx.quoted(start) {
            continue;
        }
        match parse_tools(text, from) {
            Ok((calls, end)) => {
                found.push(leak(start, end, calls));
                from = end;
            }
            Err(Some(next)) => from = next.max(from),
            Err(None) => break,
        }
    }
    if found.is_empty() {
        return;
    }
    // The response wrapper tokens of a message that leaked a tools section.
    for token in [RESPONSE_OPEN, RESPONSE_CLOSE] {
        let mut from = 0;
        while budget > 0 {
            let Some(at) = find_from(text, token, from) else {
                break;
            };
            budget -= 1;
            let end = at + token.len();
            from = end;
            let inside = found.iter().any(|l| l.span.start < end && at < l.span.end);
            if !ctx.in_code(at) && !inside {
                out.push(leak(at, end, Vec::new()));
            }
        }
    }
    out.extend(found);
}

fn leak(start: usize, end: usize, calls: Vec<Call>) -> Leak {
    Leak {
        family: Family::KimiK3,
        span: start..end,
        calls,
        results: Vec::new(),
    }
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    text.get(pos..)?.starts_with(lit).then(|| pos + lit.len())
}

/// The calls after `<|open|>tools<|sep|>` and the end of the section. `Err(Some(next))`:
/// not a section; `Err(None)`: a closing token is missing, stop.
fn parse_tools(text: &str, pos: usize) -> Result<(Vec<Call>, usize), Option<usize>> {
    let mut p = skip_ws(text, pos);
    let mut calls = Vec::new();
    loop {
        if eat(text, p, CALL_OPEN).is_some() {
            let close = find_from(text, CALL_CLOSE, p).ok_or(None)?;
            let end = close + CALL_CLOSE.len();
            let call = text.get(p..close).and_then(parse_call).ok_or(Some(end))?;
            calls.push(call);
            p = skip_ws(text, end);
        } else if let Some(after) = eat(text, p, TOOLS_CLOSE) {
            if calls.is_empty() {
                return Err(Some(after));
            }
            return Ok((calls, after));
        } else if !calls.is_empty() && p >= text.len() {
            return Ok((calls, text.len()));
        } else {
            return Err(Some(p.max(pos)));
        }
    }
}

/// One call, from `<|open|>call` up to (not including) `<|close|>call<|sep|>`.
fn parse_call(body: &str) -> Option<Call> {
    let tag_end = find_from(body, SEP, CALL_OPEN.len())?;
    let tag = body.get(CALL_OPEN.len()..tag_end)?;
    if !tag.starts_with(char::is_whitespace) {
        return None;
    }
    let name = unescape_xml(attr(tag, "tool")?);
    if !plausible_name(&name) {
        return None;
    }
    let mut args = Map::new();
    let mut p = skip_ws(body, tag_end + SEP.len());
    while p < body.len() {
        let a = eat(body, p, ARG_OPEN)?;
        let a_end = find_from(body, SEP, a)?;
        let atag = body.get(a..a_end)?;
        if !atag.starts_with(char::is_whitespace) {
            return None;
        }
        let key = unescape_xml(attr(atag, "key")?);
        if key.is_empty() {
            return None;
        }
        let v = a_end + SEP.len();
        let v_end = find_from(body, ARG_CLOSE, v)?;
        let raw = body.get(v..v_end)?;
        args.insert(key, typed(raw, attr(atag, "type")));
        p = skip_ws(body, v_end + ARG_CLOSE.len());
    }
    Some(Call {
        name,
        arguments: Value::Object(args),
    })
}

/// A tool name as K3 writes it: any printable characters without spaces (the attribute is
/// quoted and entity-escaped, so `<`, `&`, `"` may occur), at most 128 bytes.
fn plausible_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Types a value by its `type` attribute.
fn typed(raw: &str, ty: Option<&str>) -> Value {
    let fits = |v: &Value| match ty {
        Some("number" | "float") => v.is_number(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("boolean") => v.is_boolean(),
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("null") => v.is_null(),
        _ => false,
    };
    match ty {
        Some("string") => Value::String(raw.to_string()),
        _ => match json_whole(raw) {
            Some(v) if fits(&v) => v,
            _ => typed_param(raw),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::grammar::text::unescape_xml;

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> Out {
        run_with(text, &[])
    }

    const SECTION: &str = "<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"n\" type=\"string\"<|sep|>5<|close|>argument<|sep|><|open|>argument key=\"m\" type=\"integer\"<|sep|>7<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>";

    #[test]
    fn typed_by_attribute() {
        let d = run(SECTION);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"n": "5", "m": 7}));
    }

    #[test]
    fn response_wrapper_goes_with_a_tools_section() {
        let t = format!("<|open|>response<|sep|>answer<|close|>response<|sep|>{SECTION}");
        let d = run(&t);
        assert_eq!(d.leaks.len(), 3);
        assert_eq!(d.cleaned.as_deref(), Some("answer"));
    }

    #[test]
    fn response_wrapper_alone_is_not_touched() {
        let t = "<|open|>response<|sep|>Hello<|close|>response<|sep|>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn unclosed_call_is_prose() {
        let t = "Hi<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"n\" type=\"string\"<|sep|>5";
        assert!(run(t).is_clean());
    }

    #[test]
    fn section_in_code_is_not_a_leak() {
        let t = format!("```\n{SECTION}\n```");
        assert!(run(&t).is_clean());
    }

    #[test]
    fn entities() {
        assert_eq!(
            unescape_xml("a&amp;b&quot;c&#65;&#x42;&bogus;&"),
            "a&b\"cAB&bogus;&"
        );
    }
}
