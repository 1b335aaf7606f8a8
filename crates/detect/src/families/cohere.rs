//! `cohere`: Cohere Command's action block.
//!
//! `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "foo", "parameters": {"q": 1}}]<|END_ACTION|>`
//!
//! A JSON array of `{tool_call_id, tool_name, parameters}` objects (a single object is
//! accepted too; `parameters` must be an object). Both tokens are required and every item must be a call, else the block
//! is prose. Thinking (`<|START_THINKING|>..<|END_THINKING|>`) and response tokens are not
//! tool-call markup and stay.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{decode_arguments, find_from, is_tool_name, json_whole};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;

const OPEN: &str = "<|START_ACTION|>";
const CLOSE: &str = "<|END_ACTION|>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[OPEN];
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
        let Some(close) = find_from(text, CLOSE, from) else {
            return;
        };
        let end = close + CLOSE.len();
        if let Some(calls) = text.get(from..close).and_then(parse_calls) {
            out.push(Leak {
                family: Family::Cohere,
                span: start..end,
                calls,
                results: Vec::new(),
            });
            from = end;
        }
    }
}

/// The calls of an action block's body.
fn parse_calls(body: &str) -> Option<Vec<Call>> {
    let items = match json_whole(body)? {
        Value::Array(a) => a,
        v @ Value::Object(_) => vec![v],
        _ => return None,
    };
    if items.is_empty() {
        return None;
    }
    items.iter().map(call_of).collect()
}

fn call_of(item: &Value) -> Option<Call> {
    let obj = item.as_object()?;
    let name = obj.get("tool_name")?.as_str()?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let arguments = decode_arguments(obj.get("parameters")?.clone());
    arguments.is_object().then(|| Call {
        name: name.to_string(),
        arguments,
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
    fn action_block_after_thinking() {
        let t = "<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"foo\", \"parameters\": {\"q\": 1}}]<|END_ACTION|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"q": 1}));
        assert_eq!(
            d.cleaned.as_deref(),
            Some("<|START_THINKING|>plan<|END_THINKING|>")
        );
    }

    #[test]
    fn unclosed_or_broken_action_is_prose() {
        assert!(run("<|START_ACTION|>[{\"tool_name\": \"foo\", \"parameters\": {}}]").is_clean());
        assert!(
            run("<|START_ACTION|>[{\"tool_name\": \"foo\", \"parameters\": {]<|END_ACTION|>")
                .is_clean()
        );
        assert!(run("<|START_ACTION|>[{\"name\": \"foo\"}]<|END_ACTION|>").is_clean());
    }

    #[test]
    fn prose_about_the_tokens_is_not_a_leak() {
        let t = "Command R wraps actions in <|START_ACTION|> and <|END_ACTION|>.";
        assert!(run(t).is_clean());
    }
}
