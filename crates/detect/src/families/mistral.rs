//! `mistral`: Mistral's `[TOOL_CALLS]` token followed by a JSON array of
//! `{"name", "arguments"}` objects (pre-v11 tokenizers), or by `name{json}` /
//! `name[ARGS]{json}` (v11+, optionally `name[CALL_ID]id[ARGS]{json}`), repeated for
//! parallel calls, or by a pythonic call or list (`NAME(k=v)`, `[NAME(k=v)]`: another
//! format's body after the token). A `name[ARGS]{json}` without the leading token counts too: `[ARGS]` is a
//! special token no prose contains.
//!
//! The tokens are strong markers, so the tool need not be enabled (recovery decides what
//! to do with a call the agent cannot make). The JSON must parse completely (only a list's
//! final `]` may be missing, at the end of the text); a lone `[TOOL_CALLS]` followed by
//! prose is left alone.
//!
//! May depend on: `crate::families::util`, `crate::grammar::python` (another format's body
//! after the token), `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::with_trailing;
use super::util::{calls_of, merge as push_merged};
use super::util::{find_from, is_tool_name, json_value_at, skip_ws};
use crate::grammar::python::{self, PyOpts};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;
use std::ops::Range;

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[TOOL_CALLS, ARGS];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

const TOOL_CALLS: &str = "[TOOL_CALLS]";
const TOOL_CALLS_END: &str = "[/TOOL_CALLS]";
const ARGS: &str = "[ARGS]";
const CALL_ID: &str = "[CALL_ID]";

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut found: Vec<(Range<usize>, Vec<Call>)> = Vec::new();
    let mut from = 0;
    let mut next_tc = find_from(text, TOOL_CALLS, 0);
    let mut next_args = find_from(text, ARGS, 0);
    for _ in 0..super::MAX_CANDIDATES {
        if next_tc.is_some_and(|p| p < from) {
            next_tc = find_from(text, TOOL_CALLS, from);
        }
        if next_args.is_some_and(|p| p < from) {
            next_args = find_from(text, ARGS, from);
        }
        let (p, is_tc) = match (next_tc, next_args) {
            (Some(a), Some(b)) if a < b => (a, true),
            (Some(a), None) => (a, true),
            (_, Some(b)) => (b, false),
            (None, None) => break,
        };
        let parsed = if is_tc {
            from = p + TOOL_CALLS.len();
            after_token(text, from).map(|(calls, end)| (p..end, calls))
        } else {
            from = p + ARGS.len();
            bare_args(text, p)
        };
        let Some((span, calls)) = parsed else {
            continue;
        };
        if ctx.in_code(span.start) {
            continue;
        }
        // Some templates close the block with `[/TOOL_CALLS]`; it goes with the calls.
        let span = span.start..with_trailing(text, span.end, &[TOOL_CALLS_END]);
        from = span.end;
        found.push((span, calls));
    }
    push_merged(text, Family::Mistral, found, out);
}

/// What follows `[TOOL_CALLS]` at `at`: a JSON array (or one object) of calls, or
/// `name[CALL_ID]id[ARGS]{json}` / `name{json}`.
fn after_token(text: &str, at: usize) -> Option<(Vec<Call>, usize)> {
    let q = skip_ws(text, at);
    match text.as_bytes().get(q)? {
        b'[' | b'{' => match json_value_at(text, q) {
            Some((v, end)) => calls_of(&v, true).map(|c| (c, end)),
            // Another format's body after the token: a pythonic list (`[NAME(k=v)]`).
            None => list_cut_at_end(text, q)
                .or_else(|| python::parse_call_list(text, q, PyOpts::STRICT)),
        },
        _ => {
            // The name follows the token directly.
            let name_end = q + name_len(text.get(q..)?);
            let name = text.get(q..name_end)?;
            if !is_tool_name(name) {
                return None;
            }
            // A pythonic call (`NAME(k=v)`), another format's body after the token.
            if text.as_bytes().get(name_end) == Some(&b'(') {
                return python::parse_call(text, q, PyOpts::STRICT).map(|(c, e)| (vec![c], e));
            }
            let mut i = name_end;
            if text.get(i..)?.starts_with(CALL_ID) {
                i += CALL_ID.len();
                i += text
                    .get(i..)?
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
                    .count();
                if !text.get(i..)?.starts_with(ARGS) {
                    return None;
                }
            }
            if text.get(i..)?.starts_with(ARGS) {
                i += ARGS.len();
            }
            // The object on the next line (`[TOOL_CALLS]NAME` then `{..}`) is the same call.
            args_object(text, name, skip_ws(text, i))
        }
    }
}

/// A call list at `q` whose `]` is missing at the end of the text (a stop sequence or the
/// token limit took it). Each object says by itself that its call is whole, so the tool
/// need not be enabled, as for a closed list.
fn list_cut_at_end(text: &str, q: usize) -> Option<(Vec<Call>, usize)> {
    let (items, end) = crate::grammar::json::list_cut_at_end(text, q)?;
    calls_of(&Value::Array(items), false).map(|c| (c, end))
}

/// `name[ARGS]{json}` without a `[TOOL_CALLS]` token; `p` is where `[ARGS]` is.
fn bare_args(text: &str, p: usize) -> Option<(Range<usize>, Vec<Call>)> {
    let mut before = text.get(..p)?;
    // `NAME[CALL_ID]id[ARGS]`: the name stands before the call id.
    let id: usize = before
        .bytes()
        .rev()
        .take(64)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        .count();
    if let Some(b) = before[..before.len() - id].strip_suffix(CALL_ID) {
        before = b;
    }
    let p_name = before.len();
    let len: usize = before
        .chars()
        .rev()
        .take(129)
        .take_while(|&c| is_name_char(c))
        .map(char::len_utf8)
        .sum();
    let mut start = p_name - len;
    let mut name = text.get(start..p_name)?;
    // Glued to a sentence (`Checking.NAME[ARGS]`): the name is the word after the dot.
    if let Some((sentence, last)) = name.rsplit_once('.') {
        if !last.is_empty() {
            start += sentence.len() + 1;
            name = last;
        }
    }
    let starts_like_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_');
    if !starts_like_name || !is_tool_name(name) {
        return None;
    }
    let (calls, end) = args_object(text, name, p + ARGS.len())?;
    Some((start..end, calls))
}

fn args_object(text: &str, name: &str, at: usize) -> Option<(Vec<Call>, usize)> {
    if text.as_bytes().get(at) != Some(&b'{') {
        return None;
    }
    let (v, end) = json_value_at(text, at)?;
    v.is_object().then(|| {
        (
            vec![Call {
                name: name.to_string(),
                arguments: v,
            }],
            end,
        )
    })
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

fn name_len(s: &str) -> usize {
    s.chars()
        .take(129)
        .take_while(|&c| is_name_char(c))
        .map(char::len_utf8)
        .sum()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn array_form() {
        let d = run(r#"Hi[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}] bye"#);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Hi bye"));
    }

    #[test]
    fn v11_forms() {
        let d = run(r#"[TOOL_CALLS]add{"a": 1}[TOOL_CALLS]mul[ARGS]{"b": 2}"#);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.cleaned.as_deref(), Some(""));
        let d = run(r#"x [TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"q": "z"} y"#);
        assert_eq!(d.leaks[0].calls[0].name, "f");
        assert_eq!(d.cleaned.as_deref(), Some("x y"));
        let d = run(r#"Now: search[ARGS]{"q": "z"}"#);
        assert_eq!(d.cleaned.as_deref(), Some("Now:"));
    }

    #[test]
    fn prose_stays() {
        assert!(run("[TOOL_CALLS] not json at all").is_clean());
        assert!(run(r#"[TOOL_CALLS] [{"a": 1}]"#).is_clean());
        assert!(run(r#"[TOOL_CALLS]add{"a": 1"#).is_clean());
        assert!(run("The [ARGS] token is special").is_clean());
        assert!(run(r#"Example: `[TOOL_CALLS]add{"a": 1}`"#).is_clean());
        assert!(run(&"[TOOL_CALLS][ARGS]{".repeat(5000)).is_clean());
        assert!(run(&"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}},".repeat(5000)).is_clean());
    }

    #[test]
    fn list_whose_bracket_was_cut_at_the_end() {
        let t = "Ok.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}\n";
        let d = run(t);
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
        // Cut inside an object or after a comma, or followed by text: not a call list.
        assert!(run(r#"[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}"#).is_clean());
        assert!(run(r#"[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}},"#).is_clean());
        assert!(run(r#"[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}} and"#).is_clean());
    }
}
