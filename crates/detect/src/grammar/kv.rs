//! The key/value tag grammar: a tool name, then `key`/`value` pairs each in tags of their
//! own, as GLM writes `get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>` and
//! Hunyuan, K2 Horizon and Solar Open spell with other tokens.
//!
//! May depend on: `super::text`, `super` (names and values), `crate::types`.

use super::text::{at_lit, find_bounded, skip_ws};
use super::{is_tool_name, ValueMode};
use crate::types::Call;
use serde_json::{Map, Value};

/// One dialect's tags.
#[derive(Debug)]
pub struct KvSyntax {
    /// A token that must end the name (`<tool_sep>`); `None`: the name ends at the first
    /// `<` or line break.
    pub name_end: Option<&'static str>,
    /// Tags around a key.
    pub key: (&'static str, &'static str),
    /// Tags around a declared type (`<ifm|arg_type>integer</ifm|arg_type>`), if the dialect
    /// has them; the type then decides the value's JSON type.
    pub type_tags: Option<(&'static str, &'static str)>,
    /// Tags around a value; an empty opener means the value follows the key's closer.
    pub value: (&'static str, &'static str),
    /// The value's closer may be missing when the call ends (or the next key starts) right
    /// after it (Solar Open drops `<|tool_arg:end|>`).
    pub value_close_optional: bool,
    /// How an undeclared value is typed.
    pub values: ValueMode,
    /// A repeated key keeps its first value (else the last).
    pub first_wins: bool,
}

/// Parses `NAME (key value)*` in `text[body..close]`: the call, or `None` when anything
/// but the pairs (and whitespace) stands there. `name_len`, when given, is where the name
/// ends: a name glued to its first key, whose opener was lost (`read_filepath</arg_key>`),
/// split where the caller knows a tool's name ends.
pub fn parse(
    text: &str,
    body: usize,
    close: usize,
    syn: &KvSyntax,
    name_len: Option<usize>,
) -> Option<Call> {
    let start = skip_ws(text, body);
    let line = text.get(start..close)?;
    let (name_len, after_name) = match (name_len, syn.name_end) {
        (Some(n), _) => (n, n),
        (None, Some(sep)) => {
            let i = line.find(sep)?;
            (i, i + sep.len())
        }
        (None, None) => {
            let i = line.find(['<', '\n', '\r']).unwrap_or(line.len());
            (i, i)
        }
    };
    let name = line.get(..name_len)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut args = Map::new();
    let mut i = start + after_name;
    loop {
        i = skip_ws(text, i);
        if i >= close {
            break;
        }
        // A key whose opener was lost still ends at its closer: a few characters of one
        // line before it, no tag among them.
        let kstart = match at_lit(text, i, syn.key.0) {
            true => i + syn.key.0.len(),
            false => i,
        };
        let kend = find_bounded(text, syn.key.1, kstart, close)?;
        if kstart == i && (kend - i > 64 || text.get(i..kend)?.contains(['\n', '<'])) {
            return None;
        }
        let key = text.get(kstart..kend)?.trim();
        if key.is_empty() || key.len() > 256 || key.contains('<') {
            return None;
        }
        let mut v = kend + syn.key.1.len();
        let mut declared = None;
        if let Some((open, end)) = syn.type_tags {
            let t = skip_ws(text, v);
            if at_lit(text, t, open) {
                let tstart = t + open.len();
                let tend = find_bounded(text, end, tstart, close)?;
                declared = Some(text.get(tstart..tend)?.trim());
                v = tend + end.len();
            }
        }
        if !syn.value.0.is_empty() {
            let q = skip_ws(text, v);
            if at_lit(text, q, syn.value.0) {
                v = q + syn.value.0.len();
            } else {
                // The value's opener was lost: the value runs from the key's line to its
                // own closer, which must come before any other tag of the pairs.
                let end = find_bounded(text, syn.value.1, v, close)?;
                let next_key = find_bounded(text, syn.key.0, v, end).is_some();
                let next_close = find_bounded(text, syn.key.1, v, end).is_some();
                if next_key || next_close {
                    return None;
                }
                v += usize::from(text.get(v..)?.starts_with('\n'));
            }
        }
        let (vend, next) = match find_bounded(text, syn.value.1, v, close) {
            Some(e) if !(syn.value_close_optional && at_key_before(text, v, e, syn)) => {
                (e, e + syn.value.1.len())
            }
            _ if syn.value_close_optional => {
                let e = find_bounded(text, syn.key.0, v, close).unwrap_or(close);
                (e, e)
            }
            _ => return None,
        };
        let raw = text.get(v..vend)?;
        let value = typed(raw, declared, syn.values);
        if !(syn.first_wins && args.contains_key(key)) {
            args.insert(key.to_string(), value);
        }
        i = next;
    }
    Some(Call {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

/// Whether the next key starts before the value's closer at `close_at` (the closer was
/// dropped and the one found belongs to a later pair).
fn at_key_before(text: &str, v: usize, close_at: usize, syn: &KvSyntax) -> bool {
    find_bounded(text, syn.key.0, v, close_at).is_some()
}

/// Types a value by its declared type when it fits, else by the dialect's rule.
fn typed(raw: &str, declared: Option<&str>, mode: ValueMode) -> Value {
    let parsed = || super::json::whole(raw);
    match declared {
        Some("string" | "str") => Value::String(raw.to_string()),
        Some("integer" | "int") => parsed()
            .filter(|v| v.is_i64() || v.is_u64())
            .unwrap_or_else(|| mode.value(raw)),
        Some("number" | "float") => parsed()
            .filter(Value::is_number)
            .unwrap_or_else(|| mode.value(raw)),
        Some("boolean" | "bool") => parsed()
            .filter(Value::is_boolean)
            .unwrap_or_else(|| mode.value(raw)),
        Some("object" | "array" | "null") => parsed().unwrap_or_else(|| mode.value(raw)),
        _ => mode.value(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GLM: KvSyntax = KvSyntax {
        name_end: None,
        key: ("<arg_key>", "</arg_key>"),
        type_tags: None,
        value: ("<arg_value>", "</arg_value>"),
        value_close_optional: false,
        values: ValueMode::Typed,
        first_wins: false,
    };

    #[test]
    fn name_then_pairs() {
        let t = "get\n<arg_key>a</arg_key>\n<arg_value> x </arg_value><arg_key>n</arg_key><arg_value>2</arg_value>\n";
        let c = parse(t, 0, t.len(), &GLM, None).unwrap();
        assert_eq!(c.name, "get");
        assert_eq!(c.arguments, json!({"a": " x ", "n": 2}));
        assert!(parse("get\nsome prose", 0, 13, &GLM, None).is_none());
    }
}
