//! The JSON call grammar: a call object (`{"name", "arguments"}` and its spellings), an
//! array of them, several in a row, and a name written outside the object
//! (`NAME<sep>{...}`). Strict JSON via `serde_json`; the JSON5-ish reader is used only
//! where a format asks for it.
//!
//! A value that fails to parse is read a second time where a model's usual slip stopped
//! it (`second`).
//!
//! May depend on: `super::text`, `super::python` (a call in a code string), `super` (names and values), `crate::json5`, `crate::types`.

use super::text::{eat_any, skip_ws};
use super::{is_tool_name, plausible_name};
use crate::types::Call;
use serde_json::{Map, Value};

mod api;
mod elided;
mod second;

use api::{api_function, api_function_split, mcp_request};

/// Parses one strict JSON value starting at `pos` (leading whitespace allowed). Returns
/// the value and the byte offset just past it. Nesting is bounded by serde_json's
/// recursion limit (128), which yields an error, not a stack overflow.
pub fn value_at(text: &str, pos: usize) -> Option<(Value, usize)> {
    let rest = text.get(pos..)?;
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match stream.next()? {
        Ok(v) => Some((v, pos + stream.byte_offset())),
        Err(e) if e.is_syntax() || e.is_eof() => {
            second::read(rest, &e).map(|(v, end)| (v, pos + end))
        }
        Err(_) => None,
    }
}

/// Parses `text` as exactly one JSON value (surrounding whitespace allowed), a person's
/// elisions in it mended (`elided`).
pub fn whole(text: &str) -> Option<Value> {
    let text = text.trim();
    serde_json::from_str(text).ok().or_else(|| {
        let (v, end) = elided::read(text, true)?;
        (end == text.len()).then_some(v)
    })
}

/// Decodes arguments given as a JSON string holding an object or array (the OpenAI wire
/// spelling); leaves anything else as it is.
pub fn decode_arguments(args: Value) -> Value {
    if let Value::String(s) = &args {
        if let Some(v @ (Value::Object(_) | Value::Array(_))) = whole(s) {
            return v;
        }
    }
    args
}

/// Keys naming a call's arguments, in order of preference.
const ARG_KEYS: &[&str] = &["arguments", "parameters", "args"];
/// Keys a strict call object may carry besides its name and arguments.
const BOOKKEEPING: &[&str] = &["id", "call_id", "type"];

/// How a call object is spelled and how much else it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// `{"name", "arguments" | "parameters" | "args"}`, optionally `id`/`call_id` and
    /// `type: "function"`, nothing else; the arguments an object. Also the same call as the
    /// OpenAI API nests it (`{"type": "function", "function": {..}}`, optionally `id`), as
    /// LangChain's JSON agents write it (`{"action": NAME, "action_input": {..}}`, nothing
    /// else), as its `AgentAction` prints (`{"tool", "tool_input"}`, maybe `log`), `{"tool",
    /// "args"}`, and as Cohere's does (`{"tool_name", "parameters"}`, optionally
    /// `tool_call_id`).
    Strict,
    /// The same keys, other keys tolerated, arguments any value (Hermes: the wrapper token
    /// is the evidence, the object may carry the model's own bookkeeping).
    Loose,
    /// Cohere: `{"tool_name", "parameters"}` (plus `tool_call_id`).
    ToolName,
    /// `{"tool", "args" | "arguments" | "parameters"}` (MiniMax's bracket form).
    Tool,
}

/// Reads a call off one object spelled as `keys` says.
pub fn call_of(v: &Value, keys: Keys) -> Option<Call> {
    let obj = v.as_object()?;
    if matches!(keys, Keys::Strict | Keys::Loose) {
        if let Some(inner) = api_function(obj).or_else(|| mcp_request(obj)) {
            return call_of(inner, keys);
        }
        if let Some(joined) = api_function_split(obj) {
            return call_of(&joined, keys);
        }
    }
    if matches!(keys, Keys::Strict | Keys::Loose) {
        if let Some(call) = code_member(obj) {
            return Some(call);
        }
    }
    let (name, args) = match keys {
        Keys::Strict | Keys::Loose if is_action(obj) => {
            (obj.get("action")?.as_str()?, obj.get("action_input")?)
        }
        Keys::Strict | Keys::Loose if is_tool_pair(obj) => {
            let name = obj.iter().find(|(k, _)| is_name_key(k))?.1.as_str()?;
            (name, obj.iter().find(|(k, _)| is_args_key(k))?.1)
        }
        Keys::Strict | Keys::Loose if is_cohere(obj) => {
            (obj.get("tool_name")?.as_str()?, obj.get("parameters")?)
        }
        Keys::Strict | Keys::Loose => {
            if keys == Keys::Strict {
                let extra = obj.keys().any(|k| {
                    k != "name"
                        && !ARG_KEYS.contains(&k.as_str())
                        && !BOOKKEEPING.contains(&k.as_str())
                });
                if extra {
                    return None;
                }
                let arg_keys = ARG_KEYS.iter().filter(|k| obj.contains_key(**k)).count();
                if arg_keys > 1 || obj.get("type").is_some_and(|t| t != "function") {
                    return None;
                }
            }
            let name = obj.get("name")?.as_str()?;
            (name, ARG_KEYS.iter().find_map(|k| obj.get(*k))?)
        }
        Keys::ToolName => (obj.get("tool_name")?.as_str()?, obj.get("parameters")?),
        Keys::Tool => (
            obj.get("tool")?.as_str()?,
            ARG_KEYS.iter().find_map(|k| obj.get(*k))?,
        ),
    };
    // The namespace OpenAI-style stacks write before a tool's name (`functions.exec`).
    let name = name.trim();
    let name = name.strip_prefix("functions.").unwrap_or(name);
    let ok_name = match keys {
        Keys::Loose => plausible_name(name),
        _ => is_tool_name(name),
    };
    if !ok_name {
        return None;
    }
    // A call without arguments, written as `null` or `""` (`"action_input": null`).
    let arguments = match decode_arguments(args.clone()) {
        Value::Null => Value::Object(Map::new()),
        Value::String(s) if s.trim().is_empty() => Value::Object(Map::new()),
        v => v,
    };
    if keys != Keys::Loose && !arguments.is_object() {
        return None;
    }
    Some(Call {
        name: name.to_string(),
        arguments,
    })
}

/// The call an object of one code member holds (`{"tool_code": "default_api.NAME(k='v')"}`,
/// Gemini's code fence written as JSON): the string must be that one call and nothing else.
fn code_member(obj: &serde_json::Map<String, Value>) -> Option<Call> {
    let (key, value) = obj.iter().next().filter(|_| obj.len() == 1)?;
    let call = match fold_key(key).as_str() {
        "toolcode" | "code" => super::python::call_in_code(value.as_str()?)?,
        _ => return None,
    };
    is_tool_name(&call.name).then_some(call)
}

/// Cohere's call (Command R/A, its action tokens stripped): `tool_name` and `parameters`,
/// and `tool_call_id` only besides them.
fn is_cohere(obj: &serde_json::Map<String, Value>) -> bool {
    obj.contains_key("tool_name")
        && obj.contains_key("parameters")
        && obj
            .keys()
            .all(|k| matches!(k.as_str(), "tool_name" | "parameters" | "tool_call_id"))
}

/// Whether a key names a call's tool: `name`, `tool`, `function`, `call`, or any word before
/// `name` (`tool_name`, `functionName`, `recipient_name`, a model's `file_name`), in any
/// case and with or without `_`. Beside exactly one arguments key and bookkeeping, the
/// key's role is the call's name; the formats that read bare objects still ask that it
/// names an enabled tool.
fn is_name_key(k: &str) -> bool {
    let k = fold_key(k);
    matches!(k.as_str(), "tool" | "function" | "call" | "action")
        || k.strip_suffix("name")
            .is_some_and(|p| p.len() <= 16 && p.bytes().all(|b| b.is_ascii_lowercase()))
}

/// Whether a key holds a call's arguments: `arguments`, `parameters`, `args`, `params`,
/// `input`, `inputs`, `properties`, `kwargs`, or any of them after the tool's word
/// (`tool_input`, `toolArgs`), in any case and with or without `_`.
fn is_args_key(k: &str) -> bool {
    let k = fold_key(k);
    let k = k
        .strip_prefix("tool")
        .or_else(|| k.strip_prefix("function"))
        .unwrap_or(&k);
    matches!(
        k,
        "arguments"
            | "parameters"
            | "args"
            | "params"
            | "input"
            | "inputs"
            | "properties"
            | "kwargs"
    )
}

/// A key as its role is compared: ASCII lower case, without `_` and `-`.
fn fold_key(k: &str) -> String {
    k.chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A call spelled by its keys' roles rather than their exact words: one key that names the
/// tool (a string), one that holds its arguments (an object, or one serialized as a
/// string), besides them only bookkeeping (identifiers such as `id`, `call_id`,
/// `server_idx`, `type`, LangChain's `log`; a `type` only of a call: `function`,
/// Anthropic's `tool_use`, `tool_call`) and the model's thought ([`is_thought`]).
/// `{"tool", "tool_input"}` (LangChain's AgentAction as it prints), `{"tool_name",
/// "tool_args"}`, `{"function_name", "parameters"}` are all this shape.
fn is_tool_pair(obj: &serde_json::Map<String, Value>) -> bool {
    let names = obj.keys().filter(|k| is_name_key(k)).count();
    let args = obj.keys().filter(|k| is_args_key(k)).count();
    let named = obj.iter().any(|(k, v)| is_name_key(k) && v.is_string());
    let rest_is_bookkeeping = obj.iter().all(|(k, v)| {
        is_name_key(k)
            || is_args_key(k)
            || matches!(k.as_str(), "type" | "log")
            || is_identifier(k, v)
            || is_thought(k, v)
    });
    names == 1
        && args == 1
        && named
        && rest_is_bookkeeping
        && obj
            .get("type")
            .is_none_or(|t| t == "function" || t == "tool_use" || t == "tool_call")
}

/// Whether a key and its value are a bookkeeping identifier beside a call: a key ending in
/// `id`, `idx` or `index` (`call_id`, `server_idx`, `toolCallId`) holding a number or a
/// short string.
fn is_identifier(k: &str, v: &Value) -> bool {
    let k = fold_key(k);
    let named = ["id", "idx", "index"].iter().any(|s| k.ends_with(s));
    let small = match v {
        Value::Number(_) => true,
        Value::String(s) => s.len() <= 64,
        _ => false,
    };
    named && small
}

/// Whether a key and its value are the model's own words beside a call, as ReAct-style
/// JSON agents ask for them (`{"thought": "..", "action": .., "action_input": ..}`): a
/// `thought` or `reasoning` string.
pub fn is_thought(k: &str, v: &Value) -> bool {
    v.is_string()
        && ["thought", "thoughts", "reasoning"]
            .iter()
            .any(|w| k.eq_ignore_ascii_case(w))
}

/// LangChain's JSON agent action: exactly `action` and `action_input`, and maybe the
/// model's thoughts beside them.
fn is_action(obj: &serde_json::Map<String, Value>) -> bool {
    obj.contains_key("action")
        && obj.contains_key("action_input")
        && obj.len() == 2 + obj.iter().filter(|(k, v)| is_thought(k, v)).count()
}

/// What shape the JSON after a format's opener has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One call object.
    Object,
    /// A non-empty array of call objects.
    Array,
    /// Either of the two.
    Either,
    /// One or more objects or arrays in a row (whitespace between).
    Many,
}

/// The JSON call grammar of one format.
#[derive(Debug, Clone, Copy)]
pub struct JsonCalls {
    /// The outer shape.
    pub shape: Shape,
    /// How each call object is spelled.
    pub keys: Keys,
    /// Whether single-quoted, JSON5-ish objects are read too (legacy RWKV/Hermes output).
    pub lenient: bool,
}

/// The calls of one value that is a call object or a non-empty array of them.
fn calls_in(v: &Value, g: &JsonCalls, allow_object: bool, allow_array: bool) -> Option<Vec<Call>> {
    match v {
        Value::Array(items) if allow_array && !items.is_empty() => {
            items.iter().map(|i| call_of(i, g.keys)).collect()
        }
        Value::Object(_) if allow_object => call_of(v, g.keys).map(|c| vec![c]),
        _ => None,
    }
}

fn value_at_lenient(text: &str, pos: usize, lenient: bool) -> Option<(Value, usize)> {
    value_at(text, pos).or_else(|| {
        lenient
            .then(|| crate::json5::parse_value_at(text, pos).ok())
            .flatten()
    })
}

/// A list at `at` whose final `]` is missing at the end of `text`: complete values
/// separated by `,`, the last followed by nothing but whitespace. The values and the offset
/// past the last. A list cut inside a value or after a `,` is a cut, not a list.
pub fn list_cut_at_end(text: &str, at: usize) -> Option<(Vec<Value>, usize)> {
    if text.as_bytes().get(at) != Some(&b'[') {
        return None;
    }
    let mut items = Vec::new();
    let mut from = at + 1;
    loop {
        let (v, end) = value_at(text, from)?;
        items.push(v);
        let after = skip_ws(text, end);
        match text.as_bytes().get(after) {
            None => return Some((items, end)),
            Some(b',') => from = after + 1,
            Some(_) => return None,
        }
    }
}

/// Parses the JSON calls at `pos` (leading whitespace allowed): the calls and the offset
/// past the last value.
pub fn parse(text: &str, pos: usize, g: &JsonCalls) -> Option<(Vec<Call>, usize)> {
    let mut at = skip_ws(text, pos);
    let mut calls = Vec::new();
    loop {
        if !matches!(text.as_bytes().get(at), Some(b'[' | b'{')) {
            return None;
        }
        let (v, end) = match value_at_lenient(text, at, g.lenient) {
            Some(found) => found,
            // A list whose `]` a stop sequence or the token limit took: the last of the
            // text (of the wrapper's body, where its closer bounds it).
            None if g.shape != Shape::Object => {
                let (items, end) = list_cut_at_end(text, at)?;
                (Value::Array(items), end)
            }
            None => return None,
        };
        let (obj, arr) = match g.shape {
            Shape::Object => (true, false),
            Shape::Array => (false, true),
            Shape::Either | Shape::Many => (true, true),
        };
        calls.extend(calls_in(&v, g, obj, arr)?);
        let next = skip_ws(text, end);
        if g.shape == Shape::Many && matches!(text.as_bytes().get(next), Some(b'[' | b'{')) {
            at = next;
            continue;
        }
        return Some((calls, end));
    }
}

/// `NAME<sep>{arguments}`: a name written before the arguments object.
#[derive(Debug, Clone, Copy)]
pub struct NamedJson {
    /// A token that must open the name (PLaMo's `<|plamo:begin_tool_name:plamo|>`).
    pub name_open: Option<&'static str>,
    /// What ends the name (`>`, `<｜tool▁sep｜>`, a newline, ...).
    pub name_end: &'static [&'static str],
    /// Tokens that may stand between the name's end and the object, skipped.
    pub before_args: &'static [&'static str],
    /// A token that must close the arguments.
    pub args_close: Option<&'static str>,
}

/// Parses `NAME<sep>{json}` at `pos`: the call and the offset past the object.
pub fn parse_named(text: &str, pos: usize, g: &NamedJson) -> Option<(Call, usize)> {
    let mut start = skip_ws(text, pos);
    if let Some(open) = g.name_open {
        start = super::text::eat(text, start, open)?;
    }
    let rest = text.get(start..)?;
    let (name_len, sep_end) = g
        .name_end
        .iter()
        .filter_map(|sep| rest.find(sep).map(|i| (i, i + sep.len())))
        .min()?;
    if name_len > 256 {
        return None;
    }
    let name = rest.get(..name_len)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut at = skip_ws(text, start + sep_end);
    while let Some(p) = eat_any(text, at, g.before_args) {
        at = skip_ws(text, p);
    }
    if text.as_bytes().get(at) != Some(&b'{') {
        return None;
    }
    let (args, mut end) = value_at(text, at)?;
    if let Some(close) = g.args_close {
        end = super::text::eat(text, skip_ws(text, end), close)?;
    }
    let arguments = decode_arguments(args);
    arguments.is_object().then(|| {
        (
            Call {
                name: name.to_string(),
                arguments,
            },
            end,
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_list_cut_at_the_end_is_whole_values_up_to_the_end() {
        let t = r#"[{"a": 1}, {"b": 2} "#;
        let (items, end) = super::list_cut_at_end(t, 0).unwrap();
        assert_eq!(items, vec![json!({"a": 1}), json!({"b": 2})]);
        assert_eq!(&t[end..], " ");
        assert!(super::list_cut_at_end(r#"[{"a": 1},"#, 0).is_none());
        assert!(super::list_cut_at_end(r#"[{"a": 1"#, 0).is_none());
        assert!(super::list_cut_at_end(r#"[{"a": 1}] x"#, 0).is_none());
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn value_at_reports_the_end() {
        let t = r#"xx {"a": [1, 2]} tail"#;
        let (v, end) = value_at(t, 2).unwrap();
        assert_eq!(v, json!({"a": [1, 2]}));
        assert_eq!(&t[end..], " tail");
    }

    #[test]
    fn serialized_arguments_are_decoded_once() {
        let c = call_of(
            &json!({"name": "f", "arguments": "{\"p\": 1}"}),
            Keys::Loose,
        )
        .unwrap();
        assert_eq!(c.arguments, json!({"p": 1}));
        let c = call_of(&json!({"name": "f", "arguments": "{hello}"}), Keys::Loose).unwrap();
        assert_eq!(c.arguments, json!("{hello}"));
        assert!(call_of(&json!({"name": "f", "arguments": "{hello}"}), Keys::Strict).is_none());
    }

    #[test]
    fn the_api_nesting_and_langchain_actions_are_strict_calls() {
        let strict = |v| call_of(&v, Keys::Strict).map(|c| (c.name, c.arguments));
        let nested = json!({"id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": "{\"a\": 1}"}});
        assert_eq!(strict(nested), Some(("f".into(), json!({"a": 1}))));
        let action = json!({"action": "f", "action_input": {"a": 1}});
        assert_eq!(strict(action), Some(("f".into(), json!({"a": 1}))));
        let cohere = json!({"tool_call_id": "0", "tool_name": "f", "parameters": {"a": 1}});
        assert_eq!(strict(cohere), Some(("f".into(), json!({"a": 1}))));
        assert!(strict(json!({"tool_name": "f", "parameters": {}, "note": "x"})).is_none());
        // Anything else beside them is some other object.
        assert!(strict(
            json!({"type": "function", "function": {"name": "f", "arguments": {}}, "x": 1})
        )
        .is_none());
        assert!(
            strict(json!({"type": "tool", "function": {"name": "f", "arguments": {}}})).is_none()
        );
        assert!(strict(json!({"action": "f", "action_input": {"a": 1}, "why": "x"})).is_none());
        assert!(strict(json!({"action": "f", "action_input": "text"})).is_none());
    }

    #[test]
    fn spellings_of_a_call() {
        let strict = |v| call_of(&v, Keys::Strict).map(|c| c.name);
        assert_eq!(strict(json!({"name": "f", "args": {}})), Some("f".into()));
        assert_eq!(
            strict(json!({"type": "function", "name": "f", "parameters": {}})),
            Some("f".into())
        );
        assert_eq!(strict(json!({"name": "f", "arguments": {}, "x": 1})), None);
        assert_eq!(
            strict(json!({"name": "f", "arguments": {}, "args": {}})),
            None
        );
        assert_eq!(
            call_of(&json!({"tool": "w", "args": {"a": 1}}), Keys::Tool).map(|c| c.name),
            Some("w".into())
        );
    }

    #[test]
    fn named_json() {
        let g = NamedJson {
            name_open: None,
            name_end: &[">"],
            before_args: &[],
            args_close: None,
        };
        let t = r#"get>{"a": 1}</x>"#;
        let (c, end) = parse_named(t, 0, &g).unwrap();
        assert_eq!((c.name.as_str(), &t[end..]), ("get", "</x>"));
        assert!(parse_named("get>[1]", 0, &g).is_none());
    }
}
