//! `plamo3`: PLaMo 3's tool-request tokens.
//!
//! `<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{"city": "Tokyo"}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|><|plamo:tag|>`
//!
//! The `<|plamo:constrain|>json<|plamo:msg|>` part is optional; the arguments are one JSON
//! object. An end-of-turn `<|plamo:tag|>` right after the block goes with it. Every request
//! must be complete; the closing `end_tool_requests` token may be missing only when the
//! output ends right after the last request.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{decode_arguments, find_from, is_tool_name, json_value_at, skip_ws};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;

const OPEN: &str = "<|plamo:begin_tool_requests:plamo|>";
const CLOSE: &str = "<|plamo:end_tool_requests:plamo|>";
const REQ_OPEN: &str = "<|plamo:begin_tool_request:plamo|>";
const REQ_CLOSE: &str = "<|plamo:end_tool_request:plamo|>";
const NAME_OPEN: &str = "<|plamo:begin_tool_name:plamo|>";
const NAME_CLOSE: &str = "<|plamo:end_tool_name:plamo|>";
const ARGS_OPEN: &str = "<|plamo:begin_tool_arguments:plamo|>";
const ARGS_CLOSE: &str = "<|plamo:end_tool_arguments:plamo|>";
const CONSTRAIN: &str = "<|plamo:constrain|>";
const MSG: &str = "<|plamo:msg|>";
const END_OF_TURN: &str = "<|plamo:tag|>";

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
        match parse_block(text, from) {
            Ok((calls, end)) => {
                out.push(Leak {
                    family: Family::Plamo3,
                    span: start..end,
                    calls,
                    results: Vec::new(),
                });
                from = end;
            }
            Err(Some(next)) => from = next.max(from),
            Err(None) => return,
        }
    }
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    text.get(pos..)?.starts_with(lit).then(|| pos + lit.len())
}

/// The requests after the opening token and the end of the block.
fn parse_block(text: &str, pos: usize) -> Result<(Vec<Call>, usize), Option<usize>> {
    let mut p = skip_ws(text, pos);
    let mut calls = Vec::new();
    loop {
        if let Some(after) = eat(text, p, REQ_OPEN) {
            let close = find_from(text, REQ_CLOSE, after).ok_or(None)?;
            let end = close + REQ_CLOSE.len();
            let call = text
                .get(after..close)
                .and_then(parse_request)
                .ok_or(Some(end))?;
            calls.push(call);
            p = skip_ws(text, end);
        } else if let Some(after) = eat(text, p, CLOSE) {
            if calls.is_empty() {
                return Err(Some(after));
            }
            let end = eat(text, skip_ws(text, after), END_OF_TURN).unwrap_or(after);
            return Ok((calls, end));
        } else if !calls.is_empty() && p >= text.len() {
            return Ok((calls, text.len()));
        } else {
            return Err(Some(p.max(pos)));
        }
    }
}

/// The body of one request.
fn parse_request(body: &str) -> Option<Call> {
    let n = eat(body, skip_ws(body, 0), NAME_OPEN)?;
    let n_end = find_from(body, NAME_CLOSE, n)?;
    let name = body.get(n..n_end)?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut p = eat(body, skip_ws(body, n_end + NAME_CLOSE.len()), ARGS_OPEN)?;
    p = skip_ws(body, p);
    if let Some(c) = eat(body, p, CONSTRAIN) {
        let m = find_from(body, MSG, c)?;
        if body.get(c..m)?.trim() != "json" {
            return None;
        }
        p = m + MSG.len();
    }
    let (value, after) = json_value_at(body, p)?;
    let arguments = match decode_arguments(value) {
        v @ Value::Object(_) => v,
        _ => return None,
    };
    let after = eat(body, skip_ws(body, after), ARGS_CLOSE)?;
    (skip_ws(body, after) == body.len()).then(|| Call {
        name: name.to_string(),
        arguments,
    })
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

    const CALL: &str = "<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>f<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>{\"a\": 1}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>";

    #[test]
    fn without_constrain_prefix() {
        let d = run(&format!("Hi {CALL} bye"));
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Hi  bye"));
    }

    #[test]
    fn truncated_request_is_prose() {
        let cut = &CALL[..CALL.find("<|plamo:end_tool_arguments").unwrap()];
        assert!(run(cut).is_clean());
    }

    #[test]
    fn prose_about_the_token_is_not_a_leak() {
        assert!(
            run("PLaMo opens with <|plamo:begin_tool_requests:plamo|> and lists requests.")
                .is_clean()
        );
    }
}
