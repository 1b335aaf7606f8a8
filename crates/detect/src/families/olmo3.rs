//! `olmo3`: Olmo 3 writes Python-style keyword calls, one per line, inside
//! `<function_calls>` ... `</function_calls>` (a bracketed list `[f(), g()]` is accepted
//! too). Values are Python literals; JSON's `true`/`false`/`null` are accepted as well.
//!
//! The wrapper is a strong marker, so the tool need not be enabled; every call must parse
//! completely and the closing tag must be there, or the block is prose. (`xml_invoke` reads
//! the same wrapper around `<invoke>` blocks; the two never both parse one block.)
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::llama3_json::push_merged;
use super::pythonic::{parse_call, parse_call_list, PyOpts};
use super::util::{find_from, skip_ws};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const OPEN: &str = "<function_calls>";
const CLOSE: &str = "</function_calls>";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut found = Vec::new();
    let mut from = 0;
    for _ in 0..super::MAX_CANDIDATES {
        let Some(p) = find_from(text, OPEN, from) else {
            break;
        };
        from = p + OPEN.len();
        if ctx.in_code(p) {
            continue;
        }
        if let Some((calls, end)) = body(text, from) {
            found.push((p..end, calls));
            from = end;
        }
    }
    push_merged(text, Family::Olmo3, found, out);
}

/// The calls after the opening tag and the offset past the closing tag.
fn body(text: &str, from: usize) -> Option<(Vec<Call>, usize)> {
    let mut at = skip_ws(text, from);
    let mut calls = Vec::new();
    if text.as_bytes().get(at) == Some(&b'[') {
        let (c, end) = parse_call_list(text, at, PyOpts::STRICT)?;
        calls = c;
        at = skip_ws(text, end);
    } else {
        while !text.get(at..)?.starts_with(CLOSE) {
            let (c, end) = parse_call(text, at, PyOpts::STRICT)?;
            calls.push(c);
            at = skip_ws(text, end);
        }
    }
    if calls.is_empty() || !text.get(at..)?.starts_with(CLOSE) {
        return None;
    }
    Some((calls, at + CLOSE.len()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn calls_one_per_line() {
        let d = run("Ok.\n<function_calls>f(a='x', b=null)\ng()</function_calls>\nBye");
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "x", "b": null}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok.\n\nBye"));
    }

    #[test]
    fn broken_blocks_stay() {
        assert!(run("<function_calls>foo(x=1])</function_calls>").is_clean());
        assert!(run("<function_calls>f(a=1)").is_clean());
        assert!(run("<function_calls></function_calls>").is_clean());
        assert!(run("<function_calls>f('positional')</function_calls>").is_clean());
    }
}
