//! `lfm2`: Liquid LFM2 writes a Python list of keyword calls between
//! `<|tool_call_start|>` and `<|tool_call_end|>`, usually followed by its prose. openPangu
//! uses the same tokens around a JSON array; `pangu` reads that.
//!
//! The tokens are strong markers, so the tool need not be enabled. The literals are read
//! leniently, as vLLM's LFM2 parser does: raw newlines in quoted strings, unescaped quotes
//! of the string's own kind inside it (a quote only closes a string before a delimiter),
//! set literals (read as lists), zero-padded integers. A body the model echoes right after
//! the end token, capped by a second end token, is part of the markup.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::merge as push_merged;
use super::util::{find_from, skip_ws};
use crate::grammar::python::{parse_call_list, PyOpts};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[START];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const START: &str = "<|tool_call_start|>";
const END: &str = "<|tool_call_end|>";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut found = Vec::new();
    let mut from = 0;
    for _ in 0..super::MAX_CANDIDATES {
        let Some(p) = find_from(text, START, from) else {
            break;
        };
        from = p + START.len();
        if ctx.in_code(p) {
            continue;
        }
        let q = skip_ws(text, from);
        let Some((calls, list_end)) = parse_call_list(text, q, PyOpts::LENIENT) else {
            continue;
        };
        let e = skip_ws(text, list_end);
        if !text.get(e..).is_some_and(|r| r.starts_with(END)) {
            continue;
        }
        let mut end = e + END.len();
        // An echo of the same body, capped by a second end token.
        if let Some(body) = text.get(q..e) {
            if text.get(end..).is_some_and(|r| {
                r.starts_with(body) && r.get(body.len()..).is_some_and(|t| t.starts_with(END))
            }) {
                end += body.len() + END.len();
            }
        }
        found.push((p..end, calls));
        from = end;
    }
    push_merged(text, Family::Lfm2, found, out);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn lenient_literals() {
        let d = run(
            "<|tool_call_start|>[label(tags={'a', 'b'}, n=07, c='x\ny')]<|tool_call_end|>\nDone.",
        );
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"tags": ["a", "b"], "n": 7, "c": "x\ny"})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Done."));
    }

    #[test]
    fn echo_is_markup() {
        let t = "<|tool_call_start|>[f(a=1)]<|tool_call_end|>[f(a=1)]<|tool_call_end|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn broken_blocks_stay() {
        assert!(run("<|tool_call_start|>[f(a=1)]").is_clean());
        assert!(run("<|tool_call_start|>[f(a='x)]<|tool_call_end|>").is_clean());
        assert!(run("<|tool_call_start|>[1, 2]<|tool_call_end|>").is_clean());
    }
}
