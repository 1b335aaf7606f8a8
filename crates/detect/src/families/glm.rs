//! `glm`: GLM-4.5 / GLM-4.7 (and Poolside v1) calls:
//! `<tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`.
//!
//! The closing tag is required (vLLM's parser leaves an unclosed call as content). Values
//! keep their inner whitespace; one that is non-string JSON as a whole becomes that value.
//! A call without arguments (`<tool_call>get_time</tool_call>`) is only a leak when the
//! agent has that tool: `<tool_call>word</tool_call>` is too little markup to rewrite a
//! message for otherwise.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, is_tool_name, skip_ws, typed_param, MAX_CANDIDATES};
use super::xml_kit::{at_lit, find_bounded, merge_pieces, Finder, Piece};
use crate::types::Family;
use crate::{Call, Ctx, Leak};
use serde_json::{Map, Value};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<tool_call>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut closer = Finder::new(text, CLOSE);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, OPEN, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        let body = pos + OPEN.len();
        at = body;
        if ctx.quoted(pos) {
            continue;
        }
        let Some(close) = closer.find(body) else {
            break;
        };
        let Some(call) = parse_body(text, body, close) else {
            continue;
        };
        let has_args = call.arguments.as_object().is_some_and(|m| !m.is_empty());
        if !has_args && !ctx.tool_enabled(&call.name) {
            continue;
        }
        let end = close + CLOSE.len();
        pieces.push(Piece {
            span: pos..end,
            calls: vec![call],
        });
        at = end;
    }
    merge_pieces(text, Family::Glm, pieces, out);
}

/// Parses `name (<arg_key>k</arg_key> <arg_value>v</arg_value>)*` in `text[body..close]`.
fn parse_body(text: &str, body: usize, close: usize) -> Option<Call> {
    let start = skip_ws(text, body);
    let line = text.get(start..close)?;
    let name_len = line.find(['<', '\n', '\r']).unwrap_or(line.len());
    let name = line.get(..name_len)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut args = Map::new();
    let mut i = start + name_len;
    loop {
        i = skip_ws(text, i);
        if i >= close {
            break;
        }
        if !at_lit(text, i, "<arg_key>") {
            return None;
        }
        let kstart = i + "<arg_key>".len();
        let kend = find_bounded(text, "</arg_key>", kstart, close)?;
        let key = text.get(kstart..kend)?.trim();
        if key.is_empty() || key.len() > 256 || key.contains('<') {
            return None;
        }
        let v = skip_ws(text, kend + "</arg_key>".len());
        if !at_lit(text, v, "<arg_value>") {
            return None;
        }
        let vstart = v + "<arg_value>".len();
        let vend = find_bounded(text, "</arg_value>", vstart, close)?;
        let raw = text.get(vstart..vend)?;
        args.insert(key.to_string(), typed_param(raw));
        i = vend + "</arg_value>".len();
    }
    Some(Call {
        name: name.to_string(),
        arguments: Value::Object(args),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, enabled)
    }

    #[test]
    fn call_with_args_needs_no_enabled_tool() {
        let t = "Ok.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> New York </arg_value>\n</tool_call>";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"city": " New York "}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
    }

    #[test]
    fn zero_arg_call_needs_the_tool() {
        let t = "Wrap the tool's name like <tool_call>name</tool_call> and you are done.";
        assert!(run(t, &["get_time"]).is_clean());
        assert_eq!(
            run("<tool_call>get_time</tool_call>", &["get_time"])
                .leaks
                .len(),
            1
        );
    }

    #[test]
    fn unclosed_call_is_kept() {
        let t = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn prose_inside_is_kept() {
        let t = "<tool_call>f\nthen I thought about it\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn fenced_example_is_kept() {
        let t = "GLM writes:\n```\n<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>\n```";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn many_open_tags_stay_cheap() {
        let t = "<tool_call>f\n<arg_key>a</arg_key><arg_value>".repeat(20_000);
        assert!(run(&t, &["f"]).is_clean());
        let t = format!("{}</tool_call>", "<tool_call>f <arg_key>a".repeat(20_000));
        assert!(run(&t, &["f"]).is_clean());
    }
}
