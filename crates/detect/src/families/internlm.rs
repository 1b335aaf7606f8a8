//! `internlm`: InternLM2's plugin action.
//!
//! `<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}<|action_end|>`
//!
//! One JSON object with `name` and `parameters` (or `arguments`). InternLM also uses
//! `<|action_start|><|interpreter|>` for code, which is not a tool call. As in vLLM, a name
//! the agent does not have enabled is not a call, and then the markup stays. The closing
//! `<|action_end|>` may be missing only when the output ends right after the object.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{call_from_object, find_from, json_value_at, skip_ws};
use super::MAX_CANDIDATES;
use crate::types::Family;
use crate::{Ctx, Leak};

const START: &str = "<|action_start|>";
const PLUGIN: &str = "<|plugin|>";
const END: &str = "<|action_end|>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[PLUGIN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some(start) = find_from(text, START, from) else {
            return;
        };
        from = start + START.len();
        if ctx.quoted(start) {
            continue;
        }
        let Some(p) = text
            .get(skip_ws(text, from)..)
            .filter(|r| r.starts_with(PLUGIN))
            .map(|_| skip_ws(text, from) + PLUGIN.len())
        else {
            continue;
        };
        let Some((value, after)) = json_value_at(text, p) else {
            continue;
        };
        let Some(call) = call_from_object(&value).filter(|c| c.arguments.is_object()) else {
            continue;
        };
        if !ctx.tool_enabled(&call.name) {
            continue;
        }
        let q = skip_ws(text, after);
        let end = if text.get(q..).is_some_and(|r| r.starts_with(END)) {
            q + END.len()
        } else if q >= text.len() {
            text.len()
        } else {
            continue;
        };
        out.push(Leak {
            family: Family::Internlm,
            span: start..end,
            calls: vec![call],
            results: Vec::new(),
        });
        from = end;
    }
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
    fn enabled_tool_is_a_leak_unknown_is_not() {
        let t = "Ok <|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}<|action_end|> done";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some("Ok  done"));
        assert!(run(t, &["g"]).is_clean());
    }

    #[test]
    fn interpreter_action_is_not_a_call() {
        let t = "<|action_start|><|interpreter|>print(1)<|action_end|>";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn missing_end_only_at_end_of_text() {
        let t = "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {}}";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some(""));
        let t = "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {}} more";
        assert!(run(t, &["f"]).is_clean());
    }
}
