//! Small parsing pieces several families share: strict JSON at a position, `{name,
//! arguments}` objects, XML-ish parameter values, tag search. Pure functions on `&str`.

use crate::types::Call;
use serde_json::{Map, Value};

/// How many candidate positions one family examines in one message. Each candidate is
/// parsed at most once, so a family costs at most this many parses of the text: linear,
/// whatever an adversarial message repeats.
pub const MAX_CANDIDATES: usize = 64;

/// Parses one strict JSON value starting at `pos` (leading whitespace allowed). Returns
/// the value and the byte offset just past it. Nesting is bounded by serde_json's
/// recursion limit (128), which yields an error, not a stack overflow.
pub fn json_value_at(text: &str, pos: usize) -> Option<(Value, usize)> {
    let rest = text.get(pos..)?;
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match stream.next()? {
        Ok(v) => Some((v, pos + stream.byte_offset())),
        Err(_) => None,
    }
}

/// Parses `text` as exactly one JSON value (surrounding whitespace allowed).
pub fn json_whole(text: &str) -> Option<Value> {
    serde_json::from_str(text.trim()).ok()
}

/// Reads a call off an object of the common `{"name": .., "arguments": ..}` shape
/// (`parameters` accepted for `arguments`; missing arguments are an error). A string
/// `arguments` holding a serialized JSON object or array is decoded once; any other string
/// stays a string.
pub fn call_from_object(v: &Value) -> Option<Call> {
    let obj = v.as_object()?;
    let name = obj.get("name")?.as_str()?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let args = obj.get("arguments").or_else(|| obj.get("parameters"))?;
    Some(Call {
        name: name.to_string(),
        arguments: decode_arguments(args.clone()),
    })
}

/// Decodes arguments given as a JSON string holding an object or array; leaves anything
/// else as it is.
pub fn decode_arguments(args: Value) -> Value {
    if let Value::String(s) = &args {
        if let Some(v @ (Value::Object(_) | Value::Array(_))) = json_whole(s) {
            return v;
        }
    }
    args
}

/// A plausible tool name: non-empty, at most 128 bytes, letters, digits and `_ - . :`.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Types an XML-ish parameter value: text that parses completely as JSON (a number,
/// `true`, an object, ...) becomes that value, anything else stays a string. No tool
/// schema is known, so this is the only typing possible.
pub fn typed_param(raw: &str) -> Value {
    let t = raw.trim();
    if t.is_empty() {
        return Value::String(raw.to_string());
    }
    match json_whole(t) {
        Some(Value::String(_)) | None => Value::String(raw.to_string()),
        Some(v) => v,
    }
}

/// Builds an arguments object from `(key, value)` pairs; a repeated key keeps the last.
pub fn object_from_pairs(pairs: Vec<(String, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    Value::Object(m)
}

/// Byte offset of the first `needle` at or after `from`.
pub fn find_from(text: &str, needle: &str, from: usize) -> Option<usize> {
    let hay = text.as_bytes().get(from..)?;
    memchr::memmem::find(hay, needle.as_bytes()).map(|i| from + i)
}

/// Offset of the first non-whitespace byte at or after `pos` (or the length).
pub fn skip_ws(text: &str, pos: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = pos;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The value of attribute `name` in an XML-ish start tag body such as
/// `invoke name="get_weather"` (double or single quotes).
pub fn attr<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let mut from = 0;
    while let Some(i) = find_from(tag, name, from) {
        from = i + name.len();
        let before_ok = i == 0 || tag.as_bytes()[i - 1].is_ascii_whitespace();
        let rest = tag[from..].trim_start();
        if before_ok {
            if let Some(r) = rest.strip_prefix('=') {
                let r = r.trim_start();
                let q = r.chars().next()?;
                if q == '"' || q == '\'' {
                    let body = &r[1..];
                    let end = body.find(q)?;
                    return Some(&body[..end]);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_value_at_reports_the_end() {
        let t = r#"xx {"a": [1, 2]} tail"#;
        let (v, end) = json_value_at(t, 2).unwrap();
        assert_eq!(v, json!({"a": [1, 2]}));
        assert_eq!(&t[end..], " tail");
    }

    #[test]
    fn serialized_arguments_are_decoded_once() {
        let c = call_from_object(&json!({"name": "f", "arguments": "{\"p\": 1}"})).unwrap();
        assert_eq!(c.arguments, json!({"p": 1}));
        let c = call_from_object(&json!({"name": "f", "arguments": "{hello}"})).unwrap();
        assert_eq!(c.arguments, json!("{hello}"));
    }

    #[test]
    fn params_are_typed_only_when_whole_json() {
        assert_eq!(typed_param("42"), json!(42));
        assert_eq!(typed_param("\ntrue\n"), json!(true));
        assert_eq!(typed_param("hello world"), json!("hello world"));
        assert_eq!(typed_param("007"), json!("007"));
    }

    #[test]
    fn attr_reads_quoted_values() {
        assert_eq!(
            attr(r#"invoke name="get_weather""#, "name"),
            Some("get_weather")
        );
        assert_eq!(attr("invoke name='x'", "name"), Some("x"));
        assert_eq!(attr(r#"invoke rename="x""#, "name"), None);
    }
}
