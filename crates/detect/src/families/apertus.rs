//! `apertus`: Apertus's tool-call block.
//!
//! `<|tools_prefix|>[{"get_weather": {"location": "London"}}, {"get_time": {}}]<|tools_suffix|>`
//!
//! Each array item maps one tool name to its arguments object. The suffix token is
//! optional (the output may end after the array, or prose may follow it). The one repair
//! taken over from vLLM: when the output ends right after a complete arguments object (the
//! closing `}` / `]` were never generated), the calls read so far count; a cut inside the
//! arguments is prose.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::MAX_CANDIDATES;
use super::util::{decode_arguments, find_from, is_tool_name, json_value_at, skip_ws};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;

const OPEN: &str = "<|tools_prefix|>";
const CLOSE: &str = "<|tools_suffix|>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some(start) = find_from(text, OPEN, from) else {
            return;
        };
        from = start + OPEN.len();
        if ctx.quoted(start) {
            continue;
        }
        if let Some((calls, end)) = parse_block(text, from) {
            out.push(Leak {
                family: Family::Apertus,
                span: start..end,
                calls,
                results: Vec::new(),
            });
            from = end;
        }
    }
}

/// Byte at `i`, if any.
fn byte(text: &str, i: usize) -> Option<u8> {
    text.as_bytes().get(i).copied()
}

/// The array after the prefix token: the calls and the end of the block.
fn parse_block(text: &str, pos: usize) -> Option<(Vec<Call>, usize)> {
    let mut p = skip_ws(text, pos);
    if byte(text, p)? != b'[' {
        return None;
    }
    p += 1;
    let mut calls = Vec::new();
    loop {
        p = skip_ws(text, p);
        if byte(text, p)? != b'{' {
            return None;
        }
        let (name, after_key) = match json_value_at(text, p + 1)? {
            (Value::String(s), end) => (s, end),
            _ => return None,
        };
        let name = name.trim();
        if !is_tool_name(name) {
            return None;
        }
        p = skip_ws(text, after_key);
        if byte(text, p)? != b':' {
            return None;
        }
        let (args, after_args) = json_value_at(text, p + 1)?;
        let arguments = match decode_arguments(args) {
            v @ Value::Object(_) => v,
            _ => return None,
        };
        calls.push(Call {
            name: name.to_string(),
            arguments,
        });
        p = skip_ws(text, after_args);
        match byte(text, p) {
            // Output ended after the arguments: the closers were never generated.
            None => return Some((calls, text.len())),
            Some(b'}') => p = skip_ws(text, p + 1),
            Some(_) => return None,
        }
        match byte(text, p) {
            None => return Some((calls, text.len())),
            Some(b',') => p += 1,
            Some(b']') => break,
            Some(_) => return None,
        }
    }
    let end = p + 1;
    let after = skip_ws(text, end);
    match text.get(after..) {
        Some(rest) if rest.starts_with(CLOSE) => Some((calls, after + CLOSE.len())),
        _ => Some((calls, end)),
    }
}

#[cfg(test)]
mod tests {

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> Out {
        run_with(text, &[])
    }

    #[test]
    fn prose_after_an_unsuffixed_array_stays() {
        let t = "Hi <|tools_prefix|>[{\"f\": {\"a\": 1}}] and then more.";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Hi  and then more."));
    }

    #[test]
    fn cut_inside_arguments_is_prose() {
        assert!(run("<|tools_prefix|>[{\"f\": {\"a\": ").is_clean());
        assert!(run("<|tools_prefix|>[{\"f\"").is_clean());
    }

    #[test]
    fn items_with_two_keys_or_non_object_args_are_prose() {
        assert!(run("<|tools_prefix|>[{\"f\": {}, \"g\": {}}]<|tools_suffix|>").is_clean());
        assert!(run("<|tools_prefix|>[{\"f\": 3}]<|tools_suffix|>").is_clean());
    }

    #[test]
    fn prose_about_the_token_is_not_a_leak() {
        assert!(
            run("Apertus starts calls with <|tools_prefix|> followed by a JSON list.").is_clean()
        );
    }

    #[test]
    fn code_is_not_a_leak() {
        assert!(run("`<|tools_prefix|>[{\"f\": {}}]<|tools_suffix|>`").is_clean());
    }
}
