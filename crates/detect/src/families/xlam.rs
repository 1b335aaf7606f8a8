//! `xlam`: Salesforce xLAM answers with a bare JSON array of `{"name", "arguments"}`
//! objects as the whole message, optionally after a `<think>...</think>` block. Its other
//! wrappings are read by the families that own the markup: a ```` ```json ```` fence by
//! `json_fence`, `[TOOL_CALLS]` by `mistral`, `<tool_call>[...]</tool_call>` by `granite`.
//!
//! A bare JSON array is a weak marker (a user may ask for a list of objects), so it counts
//! only when it is the whole rest of the message, every element is exactly a call object
//! and every call names a tool the agent has enabled. A Python agent's print of its calls
//! (`Calling tools:` above a list of dicts) is read the same way.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::calls_of;
use super::util::{find_from, json_value_at, skip_ws};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains: after reasoning, or
/// under a label line (`Calling tools:`).
pub(crate) const TRIGGERS: &[&str] = &["</think>", ":\n["];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = b"[";

const THINK_END: &str = "</think>";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut start = skip_ws(text, 0);
    if text.get(start..).is_some_and(|r| r.starts_with("<think>")) {
        let Some(e) = find_from(text, THINK_END, start) else {
            return;
        };
        start = skip_ws(text, e + THINK_END.len());
    }
    // A label line above the list (`Calling tools:`) is the call's markup: the remnant
    // rule takes it with the list.
    if let Some(below) = label_line(text, start) {
        start = below;
    }
    if text.as_bytes().get(start) != Some(&b'[') || ctx.in_code(start) {
        return;
    }
    // The list is all there is to read: a Python list of dicts (`[{'name': ..}]`, as a
    // Python agent prints its calls) too.
    let python = || {
        text.get(start + 1..)
            .is_some_and(|r| r.trim_start().starts_with("{'"))
    };
    let read = json_value_at(text, start).or_else(|| {
        python()
            .then(|| crate::json5::parse_value_at(text, start).ok())
            .flatten()
    });
    let Some((v, end)) = read else {
        return;
    };
    if skip_ws(text, end) != text.len() {
        return;
    }
    let Some(calls) = calls_of(&v, false) else {
        return;
    };
    if calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
        out.push(Leak {
            family: Family::Xlam,
            span: start..end,
            calls,
            results: Vec::new(),
        });
    }
}

/// The start of the line below a label line at `start` (`Calling tools:`): at most three
/// words, one of them naming a call or a tool, and a colon ending the line.
fn label_line(text: &str, start: usize) -> Option<usize> {
    let rest = text.get(start..)?;
    let nl = rest.get(..rest.len().min(40))?.find('\n')?;
    let words = rest[..nl].trim_end().strip_suffix(':')?;
    let named = words.split_whitespace().any(|w| {
        let w = w.to_ascii_lowercase();
        [
            "tool",
            "tools",
            "call",
            "calls",
            "calling",
            "function",
            "functions",
        ]
        .contains(&w.as_str())
    });
    let plain = words.chars().all(|c| c.is_alphabetic() || c == ' ');
    (named && plain && words.split_whitespace().count() <= 3).then(|| skip_ws(text, start + nl + 1))
}

#[cfg(test)]
mod tests {

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn bare_array_after_think() {
        let t = r#"<think>ok</think>
[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]"#;
        let d = run(t, &["f", "g"]);
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.cleaned.as_deref(), Some("<think>ok</think>"));
    }

    #[test]
    fn a_list_under_a_call_label_as_a_python_agent_prints_it() {
        let t = "Calling tools:\n[{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': {}}}]";
        let d = run(t, &["f"]);
        assert_eq!(d.leaks[0].calls.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some(""));
        // A data list under a label, or a call of a tool not enabled, stays.
        assert!(run("Tools:\n[{'name': 'Alice', 'age': 30}]", &["f"]).is_clean());
        assert!(run(t, &["g"]).is_clean());
        assert!(run(
            "My notes on tool calls:\n[{'name': 'f', 'arguments': {}}]",
            &["f"]
        )
        .is_clean());
    }

    #[test]
    fn data_arrays_stay() {
        let tools = &["f", "Alice"];
        assert!(run("[1, 2, 3]", tools).is_clean());
        assert!(run(r#"[{"name": "Alice", "age": 30}]"#, tools).is_clean());
        assert!(run(r#"[{"name": "g", "arguments": {}}]"#, tools).is_clean());
        assert!(run(r#"[{"name": "f", "arguments": {}}] is the format"#, tools).is_clean());
        assert!(run("[]", tools).is_clean());
    }
}
