//! `dots`: dots.llm `<dots_function_call>` blocks holding `<invoke name=..><parameter
//! name=..>v</parameter></invoke>` runs or one `{"name", "arguments"}` JSON object.
//!
//! Only a block whose every call names a tool the agent has enabled is a leak (vLLM too
//! leaves a call to an unknown tool as content); an unparsable block stays as it is.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{call_from_object, find_from, json_value_at, skip_ws, MAX_CANDIDATES};
use super::xml_kit::{
    at_lit, merge_pieces, parse_invoke_run, Finder, InvokeSyntax, Piece, ValueMode,
};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<dots_function_call>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const OPEN: &str = "<dots_function_call>";
const CLOSE: &str = "</dots_function_call>";

const SYNTAX: InvokeSyntax = InvokeSyntax {
    invoke_open: "<invoke",
    invoke_close: "</invoke>",
    param_open: "<parameter",
    param_close: "</parameter>",
    prefix: None,
    element_params: false,
    values: ValueMode::Typed,
    cdata: false,
};

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut closer = Finder::new(text, CLOSE);
    let mut invoke_close = Finder::new(text, SYNTAX.invoke_close);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, OPEN, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        at = pos + OPEN.len();
        if ctx.quoted(pos) {
            continue;
        }
        let Some(close) = closer.find(at) else {
            break;
        };
        let first = skip_ws(text, at);
        let parsed = if text.as_bytes().get(first) == Some(&b'{') {
            text.get(..close)
                .and_then(|scope| json_value_at(scope, first))
                .and_then(|(v, e)| Some((vec![call_from_object(&v)?], e)))
        } else {
            parse_invoke_run(text, first, &SYNTAX, &mut invoke_close)
        };
        let Some((calls, body_end)) = parsed else {
            continue;
        };
        if skip_ws(text, body_end) != close || !at_lit(text, close, CLOSE) {
            continue;
        }
        if !calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
            continue;
        }
        let end = close + CLOSE.len();
        pieces.push(Piece {
            span: pos..end,
            calls,
        });
        at = end;
    }
    merge_pieces(text, Family::Dots, pieces, out);
}

#[cfg(test)]
mod tests {

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, enabled)
    }

    #[test]
    fn unknown_tool_is_kept_everywhere() {
        let t = "<dots_function_call><invoke name=\"ghost\"><parameter name=\"q\">x</parameter></invoke></dots_function_call>";
        assert!(run(t, &["search"]).is_clean());
        assert_eq!(run(t, &["ghost"]).leaks.len(), 1);
    }

    #[test]
    fn garbage_block_is_kept() {
        let t = "<dots_function_call>garbage</dots_function_call>";
        assert!(run(t, &["search"]).is_clean());
    }
}
