//! The call objects of an API's own shape that a model wrote as its reply: the OpenAI
//! API's `{"type": "function", "function": {..}}` (its arguments inside `function` or, as
//! some models put them, beside it), and an MCP client's `tools/call` request.
//!
//! May depend on: `super` (the arguments keys and bookkeeping keys), `serde_json`. No I/O.

use super::{ARG_KEYS, BOOKKEEPING};
use serde_json::{Map, Value};

/// The call inside the OpenAI API's `{"type": "function", "function": {..}}` (the `id` and
/// `type` only besides it).
pub(super) fn api_function(obj: &serde_json::Map<String, Value>) -> Option<&Value> {
    let inner = obj.get("function").filter(|f| f.is_object())?;
    let only = obj
        .keys()
        .all(|k| k == "function" || BOOKKEEPING.contains(&k.as_str()));
    let typed = obj.get("type").is_none_or(|t| t == "function");
    (only && typed).then_some(inner)
}

/// The OpenAI API's call with its arguments beside `function` rather than in it
/// (`{"type": "function", "function": {"name": NAME}, "parameters": {..}}`): the name and
/// the one arguments key joined as the call they are.
pub(super) fn api_function_split(obj: &serde_json::Map<String, Value>) -> Option<Value> {
    let inner = obj.get("function")?.as_object()?;
    let name = inner.get("name")?;
    let mut args = obj.iter().filter(|(k, _)| ARG_KEYS.contains(&k.as_str()));
    let (key, value) = args.next()?;
    let only = obj
        .keys()
        .all(|k| k == "function" || k == key || BOOKKEEPING.contains(&k.as_str()));
    let bare = inner
        .keys()
        .all(|k| k == "name" || BOOKKEEPING.contains(&k.as_str()));
    let typed = obj.get("type").is_none_or(|t| t == "function");
    (args.next().is_none() && only && bare && typed).then(|| {
        let mut call = Map::new();
        call.insert("name".into(), name.clone());
        call.insert(key.clone(), value.clone());
        Value::Object(call)
    })
}

/// The call inside an MCP client's request, `{"jsonrpc", "id", "method": "tools/call",
/// "params": {"name", "arguments"}}`, written as the reply.
pub(super) fn mcp_request(obj: &serde_json::Map<String, Value>) -> Option<&Value> {
    let only = obj
        .keys()
        .all(|k| matches!(k.as_str(), "jsonrpc" | "id" | "method" | "params"));
    (only && obj.get("method")? == "tools/call").then(|| obj.get("params"))?
}
