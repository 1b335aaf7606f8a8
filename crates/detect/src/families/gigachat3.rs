//! `gigachat3`: GigaChat 3's function-call turn header.
//!
//! - GigaChat 3: `<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "f", "arguments": {..}}`
//! - GigaChat 3.1: `<|function_call|>{"name": "f", "arguments": {..}}`
//!
//! then one JSON object. The separators are generic chat-template tokens, so the call
//! counts only for a tool the agent has enabled. A `</s>` right after the object is the end
//! of the turn and goes with the markup; text after it stays.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{call_from_object, find_from, json_value_at, skip_ws};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

const MESSAGE_SEP: &str = "<|message_sep|>";
const ROLE_SEP: &str = "<|role_sep|>";
const FUNCTION_CALL: &str = "<|function_call|>";
const EOS: &str = "</s>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[ROLE_SEP, FUNCTION_CALL];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut budget = MAX_CANDIDATES;
    for header in [MESSAGE_SEP, FUNCTION_CALL] {
        let mut from = 0;
        while budget > 0 {
            let Some(start) = find_from(text, header, from) else {
                break;
            };
            budget -= 1;
            from = start + header.len();
            if ctx.quoted(start) {
                continue;
            }
            let body = if header == MESSAGE_SEP {
                match after_role_header(text, from) {
                    Some(p) => p,
                    None => continue,
                }
            } else {
                from
            };
            if let Some((call, end)) = parse_call(text, body, ctx) {
                out.push(Leak {
                    family: Family::Gigachat3,
                    span: start..end,
                    calls: vec![call],
                    results: Vec::new(),
                });
                from = end;
            }
        }
    }
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    text.get(pos..)?.starts_with(lit).then(|| pos + lit.len())
}

/// After `<|message_sep|>`: whitespace, `function call`, `<|role_sep|>`.
fn after_role_header(text: &str, pos: usize) -> Option<usize> {
    let p = eat(text, skip_ws(text, pos), "function call")?;
    eat(text, skip_ws(text, p), ROLE_SEP)
}

/// The JSON object at `pos` and the end of the markup.
fn parse_call(text: &str, pos: usize, ctx: &Ctx<'_>) -> Option<(Call, usize)> {
    let p = skip_ws(text, pos);
    if text.as_bytes().get(p) != Some(&b'{') {
        return None;
    }
    let (value, after) = json_value_at(text, p)?;
    let call = call_from_object(&value)?;
    if !call.arguments.is_object() || !ctx.tool_enabled(&call.name) {
        return None;
    }
    let end = eat(text, skip_ws(text, after), EOS).unwrap_or(after);
    Some((call, end))
}

#[cfg(test)]
mod tests {

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }

    fn run(text: &str, tools: &[&str]) -> Out {
        run_with(text, tools)
    }

    #[test]
    fn requires_an_enabled_tool() {
        let t = "<|function_call|>{\"name\": \"f\", \"arguments\": {}}";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some(""));
        assert!(run(t, &[]).is_clean());
    }

    #[test]
    fn header_without_function_call_is_not_a_leak() {
        let t = "<|message_sep|>\n\nassistant<|role_sep|>\n{\"name\": \"f\", \"arguments\": {}}";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn broken_json_is_not_a_leak() {
        let t = "<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"f\", \"arguments\": {";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn text_after_the_object_stays() {
        let t = "Ok.<|function_call|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</s> Bye.";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some("Ok. Bye."));
    }
}
