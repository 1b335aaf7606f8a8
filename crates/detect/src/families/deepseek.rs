//! `deepseek`: DeepSeek's special-token tool-call sections.
//!
//! - V3: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{..}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`
//! - V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{..}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`
//! - V3.2 DSML: `<｜DSML｜function_calls><｜DSML｜invoke name="f"><｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>`
//! - V4 DSML: the same with the wrapper `<｜DSML｜tool_calls>`.
//!
//! The bars are the fullwidth `｜` (U+FF5C) and the spaces `▁` (U+2581), exactly as the
//! tokenizer's special tokens are spelled. The tokens are strong (nobody types them by
//! accident), so no enabled tool is required; but a section counts only when every call in
//! it parses completely. Whitespace between the section's tokens belongs to the block. A
//! section whose closing token is missing counts only when the text ends right after its
//! last complete call (generation stopped there); a `<｜end▁of▁sentence｜>` right after a
//! section is removed with it.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{attr, decode_arguments, find_from, is_tool_name, json_whole, skip_ws};
use super::MAX_CANDIDATES;
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::{Map, Value};

const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";
const EOS: &str = "<｜end▁of▁sentence｜>";

const DSML_V32_OPEN: &str = "<｜DSML｜function_calls>";
const DSML_V32_CLOSE: &str = "</｜DSML｜function_calls>";
const DSML_V4_OPEN: &str = "<｜DSML｜tool_calls>";
const DSML_V4_CLOSE: &str = "</｜DSML｜tool_calls>";
const DSML_INVOKE: &str = "<｜DSML｜invoke";
const DSML_INVOKE_END: &str = "</｜DSML｜invoke>";
const DSML_PARAM: &str = "<｜DSML｜parameter";
const DSML_PARAM_END: &str = "</｜DSML｜parameter>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[CALLS_BEGIN, DSML_V32_OPEN, DSML_V4_OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// What one candidate came to.
enum Outcome {
    /// A complete section.
    Leak(Leak),
    /// Not a section; later candidates may start at this offset.
    Skip(usize),
    /// A closing token the section needs is missing: no later candidate can find it.
    Stop,
}

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut budget = MAX_CANDIDATES;
    let skip = |pos: usize| ctx.quoted(pos);
    scan(text, &skip, out, CALLS_BEGIN, &mut budget, parse_section);
    scan(text, &skip, out, DSML_V32_OPEN, &mut budget, |t, s| {
        parse_dsml(t, s, DSML_V32_OPEN, DSML_V32_CLOSE)
    });
    scan(text, &skip, out, DSML_V4_OPEN, &mut budget, |t, s| {
        parse_dsml(t, s, DSML_V4_OPEN, DSML_V4_CLOSE)
    });
}

/// Walks the candidates starting with `open`, within the shared budget.
fn scan(
    text: &str,
    skip: &dyn Fn(usize) -> bool,
    out: &mut Vec<Leak>,
    open: &str,
    budget: &mut usize,
    parse: impl Fn(&str, usize) -> Outcome,
) {
    let mut from = 0;
    while *budget > 0 {
        let Some(start) = find_from(text, open, from) else {
            return;
        };
        *budget -= 1;
        if skip(start) {
            from = start + open.len();
            continue;
        }
        match parse(text, start) {
            Outcome::Leak(leak) => {
                from = leak.span.end.max(start + open.len());
                out.push(leak);
            }
            Outcome::Skip(next) => from = next.max(start + open.len()),
            Outcome::Stop => return,
        }
    }
}

/// `pos + lit.len()` when `lit` occurs at `pos`.
fn eat(text: &str, pos: usize, lit: &str) -> Option<usize> {
    text.get(pos..)?.starts_with(lit).then(|| pos + lit.len())
}

/// Whether only whitespace follows `pos`.
fn at_end(text: &str, pos: usize) -> bool {
    skip_ws(text, pos) >= text.len()
}

/// Extends a section's end over a directly following end-of-sentence token.
fn with_eos(text: &str, end: usize) -> usize {
    eat(text, skip_ws(text, end), EOS).unwrap_or(end)
}

fn leak(start: usize, end: usize, calls: Vec<Call>) -> Outcome {
    Outcome::Leak(Leak {
        family: Family::Deepseek,
        span: start..end,
        calls,
        results: Vec::new(),
    })
}

/// An arguments value as a call needs it: an object (a string holding a serialized
/// object is decoded once).
fn arguments(v: Value) -> Option<Value> {
    match decode_arguments(v) {
        v @ Value::Object(_) => Some(v),
        _ => None,
    }
}

/// V3 / V3.1 section at `start` (which holds `CALLS_BEGIN`).
fn parse_section(text: &str, start: usize) -> Outcome {
    let skip = start + CALLS_BEGIN.len();
    let mut p = skip_ws(text, skip);
    let mut calls = Vec::new();
    loop {
        if let Some(after) = eat(text, p, CALL_BEGIN) {
            let Some(end) = find_from(text, CALL_END, after) else {
                return Outcome::Stop;
            };
            let Some(call) = text.get(after..end).and_then(parse_call) else {
                return Outcome::Skip(end);
            };
            calls.push(call);
            p = skip_ws(text, end + CALL_END.len());
        } else if let Some(after) = eat(text, p, CALLS_END) {
            if calls.is_empty() {
                return Outcome::Skip(after);
            }
            return leak(start, with_eos(text, after), calls);
        } else if !calls.is_empty() && at_end(text, p) {
            // The section was cut off after its last complete call.
            return leak(start, p.min(text.len()), calls);
        } else {
            return Outcome::Skip(skip);
        }
    }
}

/// The text between `<｜tool▁call▁begin｜>` and `<｜tool▁call▁end｜>`.
fn parse_call(body: &str) -> Option<Call> {
    let sep = body.find(SEP)?;
    let head = body.get(..sep)?.trim();
    let tail = body.get(sep + SEP.len()..)?;
    if tail.contains(SEP) {
        return None;
    }
    // V3: `function<｜tool▁sep｜>name\n```json\n{..}\n```` (the type before the separator).
    if let Some(call) = parse_v3(head, tail) {
        return Some(call);
    }
    // V3.1: `name<｜tool▁sep｜>{..}`.
    if !is_tool_name(head) {
        return None;
    }
    Some(Call {
        name: head.to_string(),
        arguments: arguments(json_whole(tail)?)?,
    })
}

fn parse_v3(kind: &str, tail: &str) -> Option<Call> {
    if !is_tool_name(kind) {
        return None;
    }
    let (name, rest) = tail.split_once('\n')?;
    let name = name.trim();
    if !is_tool_name(name) {
        return None;
    }
    let rest = rest.trim();
    let rest = rest.strip_prefix("```")?;
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    let inner = rest.strip_suffix("```")?;
    Some(Call {
        name: name.to_string(),
        arguments: arguments(json_whole(inner)?)?,
    })
}

/// DSML section at `start` (which holds `open`).
fn parse_dsml(text: &str, start: usize, open: &str, close: &str) -> Outcome {
    let skip = start + open.len();
    let mut p = skip_ws(text, skip);
    let mut calls = Vec::new();
    loop {
        if eat(text, p, DSML_INVOKE).is_some() {
            match parse_invoke(text, p) {
                Some(Ok((call, end))) => {
                    calls.push(call);
                    p = skip_ws(text, end);
                }
                Some(Err(next)) => return Outcome::Skip(next),
                None => return Outcome::Stop,
            }
        } else if let Some(after) = eat(text, p, close) {
            if calls.is_empty() {
                return Outcome::Skip(after);
            }
            return leak(start, with_eos(text, after), calls);
        } else if !calls.is_empty() && at_end(text, p) {
            return leak(start, p.min(text.len()), calls);
        } else {
            return Outcome::Skip(skip);
        }
    }
}

/// One `<｜DSML｜invoke name="..">..</｜DSML｜invoke>` at `pos`: the call and the offset
/// past it; `Err(next)` when it does not parse; `None` when its closing token is missing.
fn parse_invoke(text: &str, pos: usize) -> Option<Result<(Call, usize), usize>> {
    let body_start = pos + DSML_INVOKE.len();
    let end = find_from(text, DSML_INVOKE_END, body_start)?;
    let after = end + DSML_INVOKE_END.len();
    Some(
        invoke_body(text, body_start, end)
            .ok_or(after)
            .map(|c| (c, after)),
    )
}

fn invoke_body(text: &str, body_start: usize, end: usize) -> Option<Call> {
    let tag_end = find_from(text, ">", body_start).filter(|&i| i < end)?;
    let tag = text.get(body_start..tag_end)?;
    if !tag.starts_with(char::is_whitespace) {
        return None;
    }
    let name = attr(tag, "name")?.trim();
    if !is_tool_name(name) {
        return None;
    }
    let mut args = Map::new();
    let mut p = skip_ws(text, tag_end + 1);
    while p < end {
        let ptag_start = eat(text, p, DSML_PARAM)?;
        let ptag_end = find_from(text, ">", ptag_start).filter(|&i| i < end)?;
        let ptag = text.get(ptag_start..ptag_end)?;
        if !ptag.starts_with(char::is_whitespace) {
            return None;
        }
        let key = attr(ptag, "name")?;
        let vstart = ptag_end + 1;
        let vend = find_from(text, DSML_PARAM_END, vstart).filter(|&i| i < end)?;
        let raw = text.get(vstart..vend)?;
        let value = match attr(ptag, "string") {
            Some("true") => Value::String(raw.to_string()),
            Some("false") => json_whole(raw).unwrap_or_else(|| Value::String(raw.to_string())),
            _ => super::util::typed_param(raw),
        };
        args.insert(key.to_string(), value);
        p = skip_ws(text, vend + DSML_PARAM_END.len());
    }
    Some(Call {
        name: name.to_string(),
        arguments: Value::Object(args),
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

    #[test]
    fn v31_section_with_prose_around() {
        let t = "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜> Done.";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "foo");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"x": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Sure. Done."));
    }

    #[test]
    fn v3_fenced_arguments_with_newlines_inside_section() {
        let t = "<｜tool▁calls▁begin｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\"}\n```<｜tool▁call▁end｜>\n<｜tool▁calls▁end｜>";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "get_weather");
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn prose_mentioning_the_token_is_not_a_leak() {
        let t = "DeepSeek starts its tool calls with <｜tool▁calls▁begin｜> and ends them with <｜tool▁calls▁end｜>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn markup_in_a_code_fence_is_not_a_leak() {
        let t = "Template:\n```text\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n```\n";
        assert!(run(t).is_clean());
    }

    #[test]
    fn truncated_call_is_not_a_leak() {
        let t = "Checking<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":";
        assert!(run(t).is_clean());
        let t = "Checking<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn section_cut_after_a_complete_call_is_a_leak_only_at_the_end() {
        let t = "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜>\n";
        assert_eq!(run(t).cleaned.as_deref(), Some("Hi"));
        let t = "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜> and more prose";
        assert!(run(t).is_clean());
    }

    #[test]
    fn one_bad_call_spoils_the_section() {
        let t = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>bar<｜tool▁sep｜>not json<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn dsml_string_and_json_params() {
        let t = "Ok <｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"false\">42</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "42", "b": 42}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok"));
    }

    #[test]
    fn dsml_wrappers_must_match() {
        let t = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls> trailing";
        assert!(run(t).is_clean());
    }

    #[test]
    fn dsml_unclosed_invoke_is_not_a_leak() {
        let t = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x";
        assert!(run(t).is_clean());
    }

    #[test]
    fn call_quoted_in_closed_think_is_kept() {
        let t = "<think>I could emit <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜> but no.</think>No tool needed.";
        assert!(run(t).is_clean());
        // After the reasoning block it is a leak again.
        let t = "<think>ok</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert_eq!(run(t).cleaned.as_deref(), Some("<think>ok</think>"));
    }

    #[test]
    fn many_candidates_do_not_panic() {
        let t = "<｜tool▁calls▁begin｜>x".repeat(500) + "<｜DSML｜invoke name=\"é";
        assert!(run(&t).is_clean());
    }
}
