//! A call read under a generic call word whose arguments name the real one: Gemma 4
//! writing `call:tool_call{args:{query:..},id:<|"|>memory_search<|"|>}`, a model wrapping
//! its call in a pseudo-function it was never given. The name the agent enabled stands as
//! a value among the arguments; the call is that tool's, with the object beside it.
//!
//! Anchored on the agent's tools: the outer name must be a generic call word (`tool_call`,
//! `function_call`, `invoke`, ...) that is not itself enabled, exactly one string member
//! must be an enabled tool's name, and at most one other member may stand beside it: the
//! arguments object. Anything else is left as the format read it.
//!
//! May depend on: `crate::types`. No I/O.

use crate::types::Call;
use serde_json::{Map, Value};

/// Generic call words, folded (ASCII lower case, no `_` or `-`).
const CALL_WORDS: &[&str] = &[
    "toolcall",
    "functioncall",
    "call",
    "calltool",
    "usetool",
    "runtool",
    "executetool",
    "invoke",
    "invoketool",
];

/// Whether `name` is a generic call word (`tool_call`, `function_call`, `invoke`, ...).
pub(crate) fn is_call_word(name: &str) -> bool {
    let folded: String = name
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    CALL_WORDS.contains(&folded.as_str())
}

/// Replaces `call` by the call it wraps, when it is such an envelope. Returns whether the
/// enabled tools were consulted.
pub(crate) fn unwrap(call: &mut Call, enabled: &[String]) -> bool {
    if !is_call_word(&call.name) {
        return false;
    }
    let is_enabled = |n: &str| enabled.iter().any(|t| t == n);
    if is_enabled(&call.name) {
        return true;
    }
    let Some(members) = call.arguments.as_object() else {
        return true;
    };
    let mut names = members
        .iter()
        .filter(|(_, v)| v.as_str().is_some_and(is_enabled));
    let (Some((name_key, name)), None) = (names.next(), names.next()) else {
        return true;
    };
    let rest: Vec<&Value> = members
        .iter()
        .filter(|(k, _)| *k != name_key)
        .map(|(_, v)| v)
        .collect();
    let arguments = match rest.as_slice() {
        [] => Value::Object(Map::new()),
        [v @ Value::Object(_)] => (*v).clone(),
        _ => return true,
    };
    let name = name.as_str().unwrap_or_default().to_string();
    *call = Call { name, arguments };
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unwrapped(name: &str, arguments: Value) -> (String, Value) {
        let mut call = Call {
            name: name.into(),
            arguments,
        };
        unwrap(&mut call, &["memory_search".into(), "call".into()]);
        (call.name, call.arguments)
    }

    #[test]
    fn a_generic_call_naming_an_enabled_tool_is_that_tools_call() {
        let args = json!({"args": {"query": "legs"}, "id": "memory_search"});
        assert_eq!(
            unwrapped("tool_call", args),
            ("memory_search".into(), json!({"query": "legs"}))
        );
        assert_eq!(
            unwrapped("function_call", json!({"name": "memory_search"})),
            ("memory_search".into(), json!({}))
        );
    }

    #[test]
    fn anything_else_stays_as_read() {
        for (name, args) in [
            // Not a generic word, or enabled itself.
            ("search", json!({"id": "memory_search", "args": {}})),
            ("call", json!({"id": "memory_search", "args": {}})),
            // No enabled name, two of them, or more beside it than one object.
            ("tool_call", json!({"id": "web", "args": {}})),
            (
                "tool_call",
                json!({"a": "memory_search", "b": "memory_search"}),
            ),
            (
                "tool_call",
                json!({"id": "memory_search", "q": "x", "r": "y"}),
            ),
            ("tool_call", json!({"id": "memory_search", "q": "x"})),
        ] {
            assert_eq!(unwrapped(name, args.clone()), (name.into(), args));
        }
    }
}
