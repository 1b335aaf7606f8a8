//! The grammar kit: the few call grammars every leak format is written in, shared by all
//! formats. A grammar reads the calls at a position and says where they end; it knows
//! nothing of the tokens around them (that is `crate::families`' table and engine).
//!
//! - [`json`]: call objects (`{"name", "arguments"}` and its spellings), arrays of them,
//!   `NAME<sep>{json}`;
//! - [`xml`]: `<invoke name=..><parameter name=..>` and its dialects, `<function=NAME>`;
//! - [`python`]: `name(kw=literal)` calls and `[call, ...]` lists;
//! - [`kv`]: a name followed by key/value tag pairs (`<arg_key>k</arg_key><arg_value>v`);
//! - [`brace`]: Gemma's `call:NAME{key:value}`;
//! - [`markup`]: a tolerant lexer of tags and special tokens in any spelling, and [`keys`]:
//!   what a tag's folded name says (call markup, a parameter, an end);
//! - [`text`]: the scanning helpers they share;
//! - [`bytes`]: byte classes as one table lookup, for the prefilter's probes.
//!
//! May depend on: `crate::json5`, `crate::types`, `memchr`, `serde_json`. No I/O, nothing
//! from `crate::families`.

pub mod brace;
pub mod bytes;
pub mod json;
pub mod keys;
pub mod kv;
pub mod markup;
pub mod python;
pub mod text;
pub mod xml;

use serde_json::Value;

/// A plausible tool name in a format whose markup is weak or whose names are identifiers:
/// non-empty, at most 128 bytes, letters and digits of any script and `_ - . :`
/// (`查询订单` is a name as much as `lookup_order`).
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.chars().all(is_name_char)
}

/// A character of a tool or parameter name: a letter or digit of any script, `_ - . :`.
pub fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
}

/// A character of an identifier (a Python name, a bare call's name): a letter or digit of
/// any script, or `_`.
pub fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A tool name as a model may write it inside unambiguous markup: any printable text on
/// one line without angle brackets, at most 128 bytes (a model sometimes calls a tool by
/// its display name, "Apply tags to a document"; the markup still says it is a call).
pub fn plausible_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.chars().any(|c| c.is_control() || c == '<' || c == '>')
}

/// How a value written as bare text (an XML parameter, a key/value tag) is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueMode {
    /// Always the string as written.
    Raw,
    /// [`typed_param`]: JSON when the whole trimmed value is non-string JSON.
    Typed,
}

impl ValueMode {
    /// Types `raw` by this mode.
    pub fn value(self, raw: &str) -> Value {
        match self {
            ValueMode::Raw => Value::String(raw.to_string()),
            ValueMode::Typed => typed_param(raw),
        }
    }
}

/// Types an XML-ish parameter value: text that parses completely as JSON (a number,
/// `true`, an object, a quoted string, ...) becomes that value, anything else stays the
/// string as written. No tool
/// schema is known, so this is the only typing possible.
pub fn typed_param(raw: &str) -> Value {
    let t = raw.trim();
    if t.is_empty() {
        return Value::String(raw.to_string());
    }
    match json::whole(t) {
        None => Value::String(raw.to_string()),
        // A value in JSON quotes is the string inside them (HyperCLOVAX writes every value
        // JSON-encoded; a quoted value in any other dialect means the same).
        Some(v) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_are_typed_only_when_whole_json() {
        assert_eq!(typed_param("42"), json!(42));
        assert_eq!(typed_param("\ntrue\n"), json!(true));
        assert_eq!(typed_param("hello world"), json!("hello world"));
        assert_eq!(typed_param("007"), json!("007"));
        assert_eq!(ValueMode::Raw.value("42"), json!("42"));
    }

    #[test]
    fn names() {
        assert!(is_tool_name("browser.search"));
        assert!(!is_tool_name("Apply tags"));
        assert!(is_tool_name("查询订单"));
        assert!(is_tool_name("поиск_файла"));
        assert!(plausible_name("Apply tags to a document"));
        assert!(!plausible_name("a\nb"));
    }
}
