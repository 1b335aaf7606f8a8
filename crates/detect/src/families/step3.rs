//! `step3`: Step-3 calls: `<｜tool_calls_begin｜>` then, per call, `<｜tool_call_begin｜>`
//! (optionally `function<｜tool_sep｜>name`) `<steptml:invoke name=..><steptml:parameter
//! name=..>v</steptml:parameter></steptml:invoke><｜tool_call_end｜>`, calls separated by
//! `<｜tool_sep｜>`, then `<｜tool_calls_end｜>` (may be missing at the end of the message).
//!
//! String values keep their whitespace; a value that is non-string JSON as a whole becomes
//! that value. The tokens are model-specific: no enabled tool is needed.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, is_tool_name, skip_ws, MAX_CANDIDATES};
use super::xml_kit::{
    at_lit, find_bounded, merge_pieces, parse_invoke, rest_is_blank, Finder, InvokeSyntax, Piece,
    ValueMode,
};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<steptml:invoke"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const BEGIN: &str = "<｜tool_calls_begin｜>";
const END: &str = "<｜tool_calls_end｜>";
const CALL_BEGIN: &str = "<｜tool_call_begin｜>";
const CALL_END: &str = "<｜tool_call_end｜>";
const SEP: &str = "<｜tool_sep｜>";

const SYNTAX: InvokeSyntax = InvokeSyntax {
    invoke_open: "<steptml:invoke",
    invoke_close: "</steptml:invoke>",
    param_open: "<steptml:parameter",
    param_close: "</steptml:parameter>",
    prefix: None,
    element_params: false,
    values: ValueMode::Typed,
    cdata: false,
};

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut close = Finder::new(text, SYNTAX.invoke_close);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, BEGIN, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        at = pos + BEGIN.len();
        if ctx.quoted(pos) {
            continue;
        }
        if let Some(piece) = parse_block(text, pos, &mut close) {
            at = piece.span.end;
            pieces.push(piece);
        }
    }
    merge_pieces(text, Family::Step3, pieces, out);
}

fn parse_block(text: &str, pos: usize, close: &mut Finder<'_>) -> Option<Piece> {
    let mut calls = Vec::new();
    let mut i = pos + BEGIN.len();
    loop {
        i = skip_ws(text, i);
        if at_lit(text, i, END) {
            i += END.len();
            break;
        }
        if at_lit(text, i, SEP) {
            i += SEP.len();
            continue;
        }
        if !at_lit(text, i, CALL_BEGIN) {
            // Cut off after the last call: fine at the end of the message only.
            if !calls.is_empty() && rest_is_blank(text, i) {
                break;
            }
            return None;
        }
        i = skip_ws(text, i + CALL_BEGIN.len());
        // Optional `function<｜tool_sep｜>name` header before the invoke.
        if at_lit(text, i, "function") {
            let sep = i + "function".len();
            if !at_lit(text, sep, SEP) {
                return None;
            }
            let name_start = sep + SEP.len();
            let lt = find_bounded(text, "<", name_start, name_start + 256)?;
            if !is_tool_name(text.get(name_start..lt)?.trim()) {
                return None;
            }
            i = lt;
        }
        let (call, e) = parse_invoke(text, i, &SYNTAX, close)?;
        calls.push(call);
        i = skip_ws(text, e);
        if !at_lit(text, i, CALL_END) {
            return None;
        }
        i += CALL_END.len();
    }
    if calls.is_empty() {
        return None;
    }
    Some(Piece {
        span: pos..i,
        calls,
    })
}

#[cfg(test)]
mod tests {

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn truncated_block_is_kept() {
        let t = "<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"f\"><steptml:parameter name=\"a\">1</steptml:parameter>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn block_missing_end_token_at_end_is_a_leak() {
        let t = "Hi <｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"f\"></steptml:invoke><｜tool_call_end｜>";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some("Hi"));
    }
}
