//! `hy_v3`: Tencent Hy3's tool-call block.
//!
//! `<tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>Beijing</arg_value></tool_call></tool_calls>`
//!
//! A call is a name, `<tool_sep>`, then `<arg_key>`/`<arg_value>` pairs (none for a
//! zero-argument call); values are typed with `typed_param` (no schema is known).
//! Whitespace between the tags belongs to the block. Every call must parse completely and
//! be closed; the block's `</tool_calls>` may be missing only when the output ends right
//! after the last call.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, is_tool_name, skip_ws, typed_param};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{Map, Value};

const OPEN: &str = "<tool_calls>";
const CLOSE: &str = "</tool_calls>";
const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";
const SEP: &str = "<tool_sep>";
const KEY_OPEN: &str = "<arg_key>";
const KEY_CLOSE: &str = "</arg_key>";
const VALUE_OPEN: &str = "<arg_value>";
const VALUE_CLOSE: &str = "</arg_value>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[SEP];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some(start) = find_from(text, OPEN, from) else {
            return;
        };
        from = start + OPEN.len();
        if ctx.quoted(start) {
            continue;
        }
        match parse_block(text, from) {
            Ok((calls, end)) => {
                out.push(Leak {
                    family: Family::HyV3,
                    span: start..end,
                    calls,
                    results: Vec::new(),
                });
                from = end;
            }
            Err(Some(next)) => from = next.max(from),
            Err(None) => return,
        }
    }
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    text.get(pos..)?.starts_with(lit).then(|| pos + lit.len())
}

/// The calls after `<tool_calls>` and the end of the block. `Err(Some(next))`: not a
/// block; `Err(None)`: a closing tag is missing, no later block can be complete.
fn parse_block(text: &str, pos: usize) -> Result<(Vec<Call>, usize), Option<usize>> {
    let mut p = skip_ws(text, pos);
    let mut calls = Vec::new();
    loop {
        if let Some(after) = eat(text, p, CALL_OPEN) {
            let close = find_from(text, CALL_CLOSE, after).ok_or(None)?;
            let end = close + CALL_CLOSE.len();
            let call = text
                .get(after..close)
                .and_then(parse_call)
                .ok_or(Some(end))?;
            calls.push(call);
            p = skip_ws(text, end);
        } else if let Some(after) = eat(text, p, CLOSE) {
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

/// The body of one `<tool_call>`.
fn parse_call(body: &str) -> Option<Call> {
    let sep = body.find(SEP)?;
    let name = body.get(..sep)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut args = Map::new();
    let mut p = skip_ws(body, sep + SEP.len());
    while p < body.len() {
        let k = eat(body, p, KEY_OPEN)?;
        let k_end = find_from(body, KEY_CLOSE, k)?;
        let key = body.get(k..k_end)?.trim();
        if key.is_empty() {
            return None;
        }
        let v = eat(body, skip_ws(body, k_end + KEY_CLOSE.len()), VALUE_OPEN)?;
        let v_end = find_from(body, VALUE_CLOSE, v)?;
        args.insert(key.to_string(), typed_param(body.get(v..v_end)?));
        p = skip_ws(body, v_end + VALUE_CLOSE.len());
    }
    Some(Call {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

#[cfg(test)]
mod tests {

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> Out {
        run_with(text, &[])
    }

    #[test]
    fn typed_values_and_text_around() {
        let t = "Checking.\n<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n<arg_key>s</arg_key><arg_value>a b</arg_value>\n</tool_call>\n</tool_calls>\nDone.";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"n": 3, "s": "a b"}));
        assert_eq!(d.cleaned.as_deref(), Some("Checking.\n\nDone."));
    }

    #[test]
    fn unclosed_call_is_prose() {
        let t =
            "<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn key_without_value_is_prose() {
        let t = "<tool_calls><tool_call>f<tool_sep><arg_key>n</arg_key></tool_call></tool_calls>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn prose_mentioning_tags_is_not_a_leak() {
        let t = "Hy3 wraps calls in <tool_calls> and separates the name with <tool_sep>.";
        assert!(run(t).is_clean());
    }
}
