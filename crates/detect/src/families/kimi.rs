//! `kimi`: Kimi-K2's tool-call section.
//!
//! `<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0 <|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|>...<|tool_calls_section_end|>`
//!
//! The call id is `functions.<name>:<n>` or `<name>:<n>`; a bare counter `<n>` carries no
//! name, and then the call is read as the agent's only enabled tool (with none or several
//! enabled the section is not taken: nothing would say which tool it is). The singular
//! spelling `<|tool_call_section_begin|>` (which some K2 checkpoints emit) is accepted too.
//!
//! The tokens are strong, so no enabled tool is required for named calls. Text inside the
//! section that is not a call (noise before the first call, whitespace between calls)
//! belongs to the block; it must not contain other special tokens. A section whose closing
//! token is missing counts only when the text ends right after its last complete call.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{decode_arguments, find_from, is_tool_name, json_value_at, skip_ws};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;

const SECTION_BEGIN: &str = "<|tool_calls_section_begin|>";
const SECTION_BEGIN_ALT: &str = "<|tool_call_section_begin|>";
const SECTION_END: &str = "<|tool_calls_section_end|>";
const SECTION_END_ALT: &str = "<|tool_call_section_end|>";
const CALL_BEGIN: &str = "<|tool_call_begin|>";
const ARG_BEGIN: &str = "<|tool_call_argument_begin|>";
const CALL_END: &str = "<|tool_call_end|>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[SECTION_BEGIN, SECTION_BEGIN_ALT];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Longest noise (bytes) accepted between the section's start and its first call.
const MAX_NOISE: usize = 256;

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut budget = MAX_CANDIDATES;
    for (open, close) in [
        (SECTION_BEGIN, SECTION_END),
        (SECTION_BEGIN_ALT, SECTION_END_ALT),
    ] {
        let mut from = 0;
        while budget > 0 {
            let Some(start) = find_from(text, open, from) else {
                break;
            };
            budget -= 1;
            from = start + open.len();
            if ctx.quoted(start) {
                continue;
            }
            match parse_section(text, start, open, close, ctx) {
                Ok(leak) => {
                    from = leak.span.end.max(from);
                    out.push(leak);
                }
                Err(Some(next)) => from = next.max(from),
                Err(None) => break,
            }
        }
    }
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    text.get(pos..)?.starts_with(lit).then(|| pos + lit.len())
}

/// The section at `start`. `Err(Some(next))`: not a section, go on at `next`;
/// `Err(None)`: a closing token is missing, stop.
fn parse_section(
    text: &str,
    start: usize,
    open: &str,
    close: &str,
    ctx: &Ctx<'_>,
) -> Result<Leak, Option<usize>> {
    let body = start + open.len();
    // Noise before the first call: plain text, no other special token.
    let first = find_from(text, CALL_BEGIN, body).ok_or(None)?;
    let noise = text.get(body..first).ok_or(Some(body))?;
    if noise.len() > MAX_NOISE || noise.contains("<|") {
        return Err(Some(body));
    }
    let mut p = first;
    let mut calls = Vec::new();
    loop {
        if let Some(after) = eat(text, p, CALL_BEGIN) {
            let (call, end) = parse_call(text, after, ctx)?;
            calls.push(call);
            p = skip_ws(text, end);
        } else if let Some(after) = eat(text, p, close) {
            return Ok(leak(start, after, calls));
        } else if !calls.is_empty() && p >= text.len() {
            // Cut off after the last complete call.
            return Ok(leak(start, text.len(), calls));
        } else {
            return Err(Some(p.max(body)));
        }
    }
}

fn leak(start: usize, end: usize, calls: Vec<Call>) -> Leak {
    Leak {
        family: Family::Kimi,
        span: start..end,
        calls,
        results: Vec::new(),
    }
}

/// One call after `<|tool_call_begin|>` (at `pos`): the call and the offset past its
/// `<|tool_call_end|>`.
fn parse_call(text: &str, pos: usize, ctx: &Ctx<'_>) -> Result<(Call, usize), Option<usize>> {
    let arg = find_from(text, ARG_BEGIN, pos).ok_or(None)?;
    let id = text.get(pos..arg).ok_or(Some(pos))?;
    if id.contains("<|") {
        return Err(Some(pos));
    }
    let name = name_of(id, ctx).ok_or(Some(arg))?;
    let args_at = arg + ARG_BEGIN.len();
    let (value, after) = json_value_at(text, args_at).ok_or(Some(args_at))?;
    let arguments = match decode_arguments(value) {
        v @ Value::Object(_) => v,
        _ => return Err(Some(after)),
    };
    let end = eat(text, skip_ws(text, after), CALL_END).ok_or(Some(after))?;
    Ok((Call { name, arguments }, end))
}

/// The tool name in a call id: `functions.name:0`, `name:0`, or a bare counter `0` (the
/// only enabled tool).
fn name_of(id: &str, ctx: &Ctx<'_>) -> Option<String> {
    let id = id.trim();
    let is_counter = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if is_counter(id) {
        return match ctx.enabled_tools() {
            [only] => Some(only.clone()),
            _ => None,
        };
    }
    let (name, counter) = id.rsplit_once(':')?;
    if !is_counter(counter) {
        return None;
    }
    let name = name.strip_prefix("functions.").unwrap_or(name);
    is_tool_name(name).then(|| name.to_string())
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
    fn named_call_needs_no_enabled_tool() {
        let t = "Ok. <|tool_calls_section_begin|><|tool_call_begin|>functions.search:0 <|tool_call_argument_begin|>{\"q\": \"x\"}<|tool_call_end|><|tool_calls_section_end|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].name, "search");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"q": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
    }

    #[test]
    fn bare_counter_needs_exactly_one_enabled_tool() {
        let t = "<|tool_calls_section_begin|><|tool_call_begin|>0 <|tool_call_argument_begin|>{\"q\": 1}<|tool_call_end|><|tool_calls_section_end|>";
        assert_eq!(run_with(t, &["only"]).leaks[0].calls[0].name, "only");
        assert!(run_with(t, &["a", "b"]).is_clean());
        assert!(run(t).is_clean());
    }

    #[test]
    fn prose_quoting_the_tokens_is_not_a_leak() {
        let t = "Kimi wraps calls in <|tool_calls_section_begin|> ... <|tool_calls_section_end|>, each call in <|tool_call_begin|> and <|tool_call_end|>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn inline_code_is_not_a_leak() {
        let t = "Use `<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>` as the format.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn truncated_arguments_are_not_a_leak() {
        let t = "Let me see. <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{\"a\": ";
        assert!(run(t).is_clean());
    }

    #[test]
    fn missing_section_end_only_at_end_of_text() {
        let t = "Hi <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|>  ";
        assert_eq!(run(t).cleaned.as_deref(), Some("Hi"));
        let t = "Hi <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|> more words";
        assert!(run(t).is_clean());
    }

    #[test]
    fn call_quoted_in_closed_think_is_kept() {
        let t = "<think>format: <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|></think>Plain answer.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn singular_section_spelling() {
        let t = "<|tool_call_section_begin|><|tool_call_begin|>functions.f:3<|tool_call_argument_begin|>{\"x\": [1]}<|tool_call_end|><|tool_call_section_end|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].name, "f");
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn non_object_arguments_are_not_a_call() {
        let t = "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>42<|tool_call_end|><|tool_calls_section_end|>";
        assert!(run(t).is_clean());
    }
}
