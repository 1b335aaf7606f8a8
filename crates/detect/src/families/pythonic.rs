//! `pythonic`: the whole message is a Python list of keyword-argument calls,
//! `[get_weather(city='SF', metric='celsius'), get_time()]`, optionally wrapped in Llama 4's
//! `<|python_start|>` ... `<|python_end|>` tokens.
//!
//! A Python-looking call is a weak marker (`f(x)` is ordinary prose and code), so this
//! family only counts when every call names a tool the agent has enabled, the list is the
//! whole message (or sits between the Llama 4 tokens), every argument is a keyword argument
//! and every value a Python literal. Calls written inline in a sentence are prose, never a
//! leak.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{find_from, skip_ws};
use crate::grammar::python::{parse_call_list, PyOpts};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<|python_start|>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = b"[";

const PY_START: &str = "<|python_start|>";
const PY_END: &str = "<|python_end|>";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let all_enabled = |calls: &[Call]| calls.iter().all(|c| ctx.tool_enabled(&c.name));
    // The whole message is the list.
    let start = skip_ws(text, 0);
    if text.as_bytes().get(start) == Some(&b'[') && !ctx.in_code(start) {
        if let Some((calls, end)) = parse_call_list(text, start, PyOpts::STRICT) {
            if skip_ws(text, end) == text.len() && all_enabled(&calls) {
                out.push(leak(start..end, calls));
                return;
            }
        }
    }
    // `<|python_start|>[...]<|python_end|>` (the end token may be missing at the end).
    let mut from = 0;
    for _ in 0..super::MAX_CANDIDATES {
        let Some(p) = find_from(text, PY_START, from) else {
            break;
        };
        from = p + PY_START.len();
        if ctx.in_code(p) {
            continue;
        }
        let q = skip_ws(text, from);
        let Some((calls, end)) = parse_call_list(text, q, PyOpts::STRICT) else {
            continue;
        };
        let after = skip_ws(text, end);
        let span_end = if text.get(after..).is_some_and(|r| r.starts_with(PY_END)) {
            after + PY_END.len()
        } else if after == text.len() {
            end
        } else {
            continue;
        };
        if all_enabled(&calls) {
            out.push(leak(p..span_end, calls));
            from = span_end;
        }
    }
}

fn leak(span: std::ops::Range<usize>, calls: Vec<Call>) -> Leak {
    Leak {
        family: Family::Pythonic,
        span,
        calls,
        results: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn whole_message_list_is_a_leak() {
        let d = run(
            "[get_weather(city='LA', n=3), ping()]",
            &["get_weather", "ping"],
        );
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"city": "LA", "n": 3}));
        assert_eq!(d.leaks[0].calls[1].arguments, json!({}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn tool_must_be_enabled() {
        assert!(run("[get_weather(city='LA')]", &["other"]).is_clean());
    }

    #[test]
    fn prose_and_data_lists_stay() {
        let t = &["wikipedia", "x", "print"];
        assert!(run("Summary: wikipedia('French Revolution')", t).is_clean());
        assert!(run("[wikipedia('French Revolution')]", t).is_clean());
        assert!(run("[1, 2, 3]", t).is_clean());
        assert!(run("[x for x in range(3)]", t).is_clean());
        assert!(run("[link](https://example.com) is the docs", t).is_clean());
        assert!(run("[print(x=1)] and then more text", t).is_clean());
        assert!(run("[print(x==1)]", t).is_clean());
        assert!(run("[f(a='x 'y' 'z), g(b='p 'q' 'r)]", &["f", "g"]).is_clean());
    }

    #[test]
    fn python_tokens_wrap_the_list() {
        let d = run(
            "Sure.\n<|python_start|>[f(a=True, b=None, c={'k': (1, 2)})]<|python_end|>\nDone",
            &["f"],
        );
        assert_eq!(d.cleaned.as_deref(), Some("Sure.\n\nDone"));
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"a": true, "b": null, "c": {"k": [1, 2]}})
        );
    }

    #[test]
    fn no_panic_on_odd_input() {
        for t in [
            "[",
            "[f(",
            "[f(a='",
            "[f(a=\\",
            "[f(a={",
            "[f(a={1:",
            "[é(a=1)]",
            "[f(a='\\x')]",
        ] {
            let _ = run(t, &["f"]);
        }
        let deep = format!("[f(a={})]", "[".repeat(10_000));
        assert!(run(&deep, &["f"]).is_clean());
    }
}
