//! `minicpm5`: MiniCPM-5 `<function name="f"><param name="k">v</param></function>` blocks
//! (also with a byte-level `Ġ` or no space before `name`, and `<![CDATA[..]]>` values).
//!
//! `<function>` / `<param>` are generic tags an HTML or XML answer may contain, so a block
//! is only a leak when every call names a tool the agent has enabled, and every `<param>`
//! has a name.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, skip_ws, MAX_CANDIDATES};
use super::xml_kit::{
    merge_pieces, parse_invoke, preceded_by, Finder, InvokeSyntax, Piece, ValueMode,
};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<function name=", "<functionĠname=", "<functionname="];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const SYNTAX: InvokeSyntax = InvokeSyntax {
    invoke_open: "<function",
    invoke_close: "</function>",
    param_open: "<param",
    param_close: "</param>",
    prefix: None,
    element_params: false,
    values: ValueMode::Typed,
    cdata: true,
};

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut close = Finder::new(text, SYNTAX.invoke_close);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, "<function", at) {
        let next = pos + "<function".len();
        at = next;
        // `<function=` (Qwen3-Coder), `<functions>`, `<function_calls>`: other markup.
        if !matches!(text.as_bytes().get(next), Some(b' ' | b'\t' | 0xC4 | b'n')) {
            continue;
        }
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        if ctx.quoted(pos) || preceded_by(text, pos, "</function>").is_some() {
            continue;
        }
        let Some((first, mut end)) = parse_invoke(text, pos, &SYNTAX, &mut close) else {
            continue;
        };
        let mut calls = vec![first];
        while let Some((c, e)) = parse_invoke(text, skip_ws(text, end), &SYNTAX, &mut close) {
            calls.push(c);
            end = e;
        }
        if !calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
            continue;
        }
        pieces.push(Piece {
            span: pos..end,
            calls,
        });
        at = end;
    }
    merge_pieces(text, Family::Minicpm5, pieces, out);
}

#[cfg(test)]
mod tests {

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, enabled)
    }

    #[test]
    fn html_like_function_tags_are_kept() {
        let t = "In the XML config:\n<function name=\"render\"><param name=\"size\">12</param></function>\nThat sets the size.";
        assert!(run(t, &["get_weather"]).is_clean());
    }

    #[test]
    fn enabled_tool_is_a_leak() {
        let t = "Intro\n<function name=\"get_weather\"><param name=\"city\">Paris</param></function>\nOutro";
        let d = run(t, &["get_weather"]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some("Intro\n\nOutro"));
    }

    #[test]
    fn param_without_name_invalidates() {
        let t = "<function name=\"get_weather\"><param>x</param></function>";
        assert!(run(t, &["get_weather"]).is_clean());
    }
}
