//! `result_prefix` and `result_only`: the model wrote a fake tool *result* instead of
//! calling the tool, e.g. `{success: true, memory_type: "journal", content: "..."}Reply`.
//!
//! The message must start (after whitespace) with one or more objects, JSON or the
//! JSON5-ish dialect models write (unquoted keys, single quotes, trailing commas). An object
//! counts only when it looks like a tool result: a boolean `success`, an `error` key, or
//! the result shape of a tool we know (save_memory: `memory_type` + `content`; whiteboard:
//! `type: "board_*"`; web: `action: "search" | "fetch"`). Any other leading JSON is an
//! answer and stays. A result frame of the formats' own markup (`<tool_result>..</tool_result>`,
//! `<tool_response>..`), or any frame named as a tool's answer and closed as its markup
//! closes (`<tool_use_result>..</tool_use_result>`, `[TOOL_RESULT]..[END_TOOL_RESULT]`), at
//! the start is a made-up answer too, whatever it holds. Followed by
//! text, the objects are `result_prefix` and are cut; with
//! nothing after them the message is `result_only` and left for review.
//!
//! May depend on: `super::util` (the result frames), `crate::grammar`, `crate::json5`, `crate::types`,
//! `crate::Ctx`.

use crate::json5;
use crate::types::{Call, Family, Leak, ResultKind, ResultObject};
use crate::Ctx;
use serde_json::{Map, Value};

/// Leaks of this family start the reply: the message, or what follows the model's
/// reasoning when the message opens with it (a thinking model's stored reply keeps its
/// `<think>..</think>`, or only the `</think>` when the template put the opener in the
/// prompt). The markers are the reasoning's closer right before a `{`.
pub(crate) const TRIGGERS: &[&str] = &[
    "</think>{",
    "</think>\n{",
    "</think>\n\n{",
    "</think> {",
    "</thinking>{",
    "</thinking>\n{",
    "</thinking>\n\n{",
    // Result frames of the formats' own markup (`util::RESULT_FRAMES`), read where they
    // open the reply.
    "<tool_response>",
    "<tool_result>",
    "<function_results>",
    "<|observation|>",
    "<|tool_response>",
    "<start_function_response>",
    "<|START_TOOL_RESULT|>",
    // Their closers, where a frame opening the reply lost its opener.
    "</tool_response>",
    "</tool_result>",
    "</function_results>",
];
/// A leading `{`; a leading `<` or `[` of a frame named as a tool's answer ([`start`]).
pub(crate) const AT_START: &[u8] = b"{<[";

/// The reasoning tags a reply may start after.
const REASONING: &[(&str, &str)] = &[("<think>", "</think>"), ("<thinking>", "</thinking>")];

/// Where the reply starts: at the first non-whitespace byte when that is a `{`; else after
/// the leading reasoning, when the message opens with a closed `<think>` (`<thinking>`)
/// block or with reasoning whose opener is not there (its closer comes before any opener).
fn reply_start(text: &str) -> usize {
    let lead = text.len() - text.trim_start().len();
    if text.as_bytes().get(lead) == Some(&b'{') {
        return lead;
    }
    for (open, close) in REASONING {
        let Some(c) = text.find(close) else {
            continue;
        };
        let before = text.get(lead..c).unwrap_or_default();
        if before.starts_with(open) || !before.contains(open) {
            let after = c + close.len();
            let rest = text.get(after..).unwrap_or_default();
            return after + (rest.len() - rest.trim_start().len());
        }
    }
    lead
}

/// Appends the leading result objects, if any, as one leak.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let start = reply_start(text);
    let mut pos = start;
    let mut results = Vec::new();
    let mut end = start;
    // Each object is parsed once and the loop moves past it, so this is linear; the
    // candidate bound stops a message made of thousands of `{}` early.
    while results.len() < super::MAX_CANDIDATES {
        let found = match text.as_bytes().get(pos) {
            Some(b'{') => json5::parse_value_at(text, pos)
                .ok()
                .and_then(|(value, after)| {
                    let kind = value.as_object().and_then(|o| classify(o, ctx))?;
                    Some((ResultObject { value, kind }, after))
                }),
            Some(b'<' | b'[') => framed(text, pos),
            _ => None,
        }
        .or_else(|| (pos == start).then(|| lost_opener(text, pos)).flatten());
        let Some((result, after)) = found else {
            break;
        };
        results.push(result);
        end = after;
        pos = crate::grammar::text::skip_ws(text, after);
    }
    if results.is_empty() {
        return;
    }
    let only = text[end..].trim().is_empty();
    let calls = results
        .iter()
        .filter(|r| r.kind == ResultKind::SaveMemory)
        .filter_map(|r| save_memory_call(&r.value))
        .collect();
    out.push(Leak {
        family: if only {
            Family::ResultOnly
        } else {
            Family::ResultPrefix
        },
        span: start..end,
        calls,
        results,
    });
}

/// A tool's answer in a result frame of the formats' own markup (`<tool_result>..`,
/// `<tool_response>..`, `<function_results>..`, see `util::RESULT_FRAMES`) at `pos`: the model
/// wrote the answer of a tool it never called. Its body is kept as parsed (JSON) or as
/// written.
fn framed(text: &str, pos: usize) -> Option<(ResultObject, usize)> {
    let listed = super::util::RESULT_FRAMES.iter().find(|(open, _)| {
        open.starts_with('<') && text.get(pos..).is_some_and(|r| r.starts_with(open))
    });
    let (body, c, close) = match listed {
        Some((open, close)) => {
            let body = pos + open.len();
            (body, body + text.get(body..)?.find(close)?, close.len())
        }
        None => answer_frame(text, pos)?,
    };
    let inner = text.get(body..c)?.trim();
    let value = json5::parse_value_at(inner, 0)
        .ok()
        .filter(|(_, e)| *e == inner.len())
        .map_or_else(|| Value::String(inner.to_string()), |(v, _)| v);
    Some((
        ResultObject {
            value,
            kind: ResultKind::Other { tool: None },
        },
        c + close,
    ))
}

/// The prefilter's look at the reply's first byte, `p`: an object, or a frame named as a
/// tool's answer (`<tool_use_result>`, `[TOOL_RESULT]`: [`answer_word`]).
pub(crate) fn start(bytes: &[u8], p: usize) -> bool {
    bytes.get(p) == Some(&b'{') || frame_word(bytes, p).is_some()
}

/// The word of a tag or bracket token at `p` (`<tool_use_result>`, `[TOOL_RESULT]`) when it
/// names a tool's answer, and where the token ends.
fn frame_word(bytes: &[u8], p: usize) -> Option<(&[u8], usize)> {
    let close = match bytes.get(p)? {
        b'<' => b'>',
        b'[' => b']',
        _ => return None,
    };
    let rest = bytes.get(p + 1..)?;
    let len = rest
        .iter()
        .take(48)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        .count();
    let word = &rest[..len];
    // No attributes: a frame with a call's id (`<tool_result call_id=..>`) is a transcript's.
    (rest.get(len) == Some(&close) && answer_word(word)).then_some((word, p + len + 2))
}

/// Whether a token's word names a tool's answer: a tool's or function's result, response or
/// output (`tool_use_result`, `TOOL_RESULT`, `function_response`), in any case and spelling.
fn answer_word(word: &[u8]) -> bool {
    let w: Vec<u8> = word
        .iter()
        .filter(|b| b.is_ascii_alphanumeric())
        .map(u8::to_ascii_lowercase)
        .collect();
    let w = w.strip_suffix(b"s").unwrap_or(&w);
    let about = [&b"tool"[..], b"function"]
        .iter()
        .any(|t| w.windows(t.len()).any(|x| x == *t));
    about
        && [&b"result"[..], b"response", b"output"]
            .iter()
            .any(|e| w.ends_with(e))
}

/// A frame named as a tool's answer at `pos` ([`frame_word`]) and its closer, as its own
/// markup writes one (`</NAME>`; `[/NAME]` or `[END_NAME]`): where its body starts, where
/// the closer starts, and the closer's length.
fn answer_frame(text: &str, pos: usize) -> Option<(usize, usize, usize)> {
    let (word, body) = frame_word(text.as_bytes(), pos)?;
    let word = std::str::from_utf8(word).ok()?;
    let closers = match text.as_bytes()[pos] {
        b'<' => vec![format!("</{word}>")],
        _ => vec![format!("[/{word}]"), format!("[END_{word}]")],
    };
    let rest = text.get(body..)?;
    closers
        .iter()
        .filter_map(|c| rest.find(c.as_str()).map(|i| (body, body + i, c.len())))
        .min_by_key(|f| f.1)
}

/// A result frame opening the reply whose opener was stripped (`{..}</tool_result>`,
/// `<path>..</path><action>saved</action></tool_result>`): its closer, with no opener before
/// it, right after a body of data alone, one object or elements and nothing else.
fn lost_opener(text: &str, pos: usize) -> Option<(ResultObject, usize)> {
    if !matches!(text.as_bytes().get(pos), Some(b'{' | b'<')) {
        return None;
    }
    let text = text.get(..crate::grammar::text::floor_char(text, LOST_OPENER_MAX))?;
    let (open, close, c) = super::util::RESULT_FRAMES
        .iter()
        .filter(|(_, close)| close.starts_with("</"))
        .filter_map(|(o, cl)| Some((*o, *cl, pos + text.get(pos..)?.find(cl)?)))
        .min_by_key(|f| f.2)?;
    let inner = text.get(pos..c)?.trim_end();
    if inner.contains(open) {
        return None;
    }
    let value = match json5::parse_value_at(inner, 0) {
        Ok((v, e)) if e == inner.len() => v,
        _ if elements_only(inner) => Value::String(inner.to_string()),
        _ => return None,
    };
    let kind = ResultKind::Other { tool: None };
    Some((ResultObject { value, kind }, c + close.len()))
}

/// The most bytes a result frame that lost its opener spans, closer included: a stream
/// holds back a reply opening with data only that long ([`lost_opener_possible`]).
const LOST_OPENER_MAX: usize = 4096;

/// Whether a reply whose first `len` bytes are `head` may still turn out to open with a
/// result frame that lost its opener (its closer not come yet): it opens with data.
pub(crate) fn lost_opener_possible(head: &str) -> bool {
    let t = head.trim_start();
    head.len() <= LOST_OPENER_MAX
        && match t.as_bytes().first() {
            Some(b'{') => true,
            // Fields as elements, one or more a line (`<?php`, `<div class=..>` are no data).
            Some(b'<') => t
                .lines()
                .filter(|l| !l.trim().is_empty())
                .all(elements_only),
            _ => false,
        }
}

/// Whether `s` is one or more elements `<name>text</name>` and whitespace, nothing else
/// (no element inside another: the fields of a result).
fn elements_only(s: &str) -> bool {
    let mut rest = s.trim();
    let mut n = 0;
    while !rest.is_empty() {
        let Some(tag) = rest.strip_prefix('<') else {
            return false;
        };
        let name_len = tag
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(tag.len());
        let (name, after) = tag.split_at(name_len);
        let Some(body) = after.strip_prefix('>').filter(|_| !name.is_empty()) else {
            return false;
        };
        let closer = format!("</{name}>");
        let Some(end) = body.find(&closer) else {
            return false;
        };
        if body[..end].contains('<') {
            return false;
        }
        rest = body[end + closer.len()..].trim_start();
        n += 1;
    }
    n > 0
}

/// What a leading object is, or `None` when it does not look like a tool result.
fn classify(obj: &Map<String, Value>, ctx: &Ctx<'_>) -> Option<ResultKind> {
    let success = obj.get("success").and_then(Value::as_bool);
    if obj.contains_key("memory_type") && obj.contains_key("content") {
        return Some(save_memory_kind(obj, success, ctx));
    }
    let board = obj
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with("board_"));
    if board {
        return Some(ResultKind::Other {
            tool: Some("whiteboard"),
        });
    }
    let web = matches!(
        obj.get("action").and_then(Value::as_str),
        Some("search" | "fetch")
    );
    if web {
        return Some(ResultKind::Other { tool: Some("web") });
    }
    (success.is_some() || obj.contains_key("error")).then_some(ResultKind::Other { tool: None })
}

fn save_memory_kind(obj: &Map<String, Value>, success: Option<bool>, ctx: &Ctx<'_>) -> ResultKind {
    let invalid = |reason| ResultKind::InvalidSaveMemory { reason };
    if success != Some(true) {
        return invalid("success is not true");
    }
    match obj.get("content").and_then(Value::as_str) {
        None => return invalid("content is not a string"),
        Some(c) if c.trim().is_empty() => return invalid("content is blank"),
        Some(_) => {}
    }
    match obj.get("memory_type").and_then(Value::as_str) {
        Some(t) if ctx.config.memory_type_allowed(t) => ResultKind::SaveMemory,
        _ => invalid("memory_type is not an allowed type"),
    }
}

/// The save_memory call a valid result object stands for.
fn save_memory_call(obj: &Value) -> Option<Call> {
    let mut args = Map::new();
    for key in ["content", "memory_type"] {
        args.insert(key.to_string(), obj.get(key)?.clone());
    }
    if let Some(e @ Value::String(_)) = obj.get("expires_around") {
        args.insert("expires_around".to_string(), e.clone());
    }
    Some(Call {
        name: "save_memory".to_string(),
        arguments: Value::Object(args),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn made_up_result_frames_opening_the_reply_go() {
        let t = "<tool_result>\n{\"results\":[]}\n</tool_result>\n<tool_result>ok</tool_result>Waiting for you.";
        let d = super::super::testing::detect_with(t, &[]);
        assert_eq!(d.cleaned.as_deref(), Some("Waiting for you."));
        assert!(d.leaks.iter().all(|l| l.calls.is_empty()));
        // Inside the reply, or an unclosed frame, stays.
        for t in ["See <tool_result>x</tool_result> here.", "<tool_result>cut"] {
            assert!(super::super::testing::detect_with(t, &[]).is_clean(), "{t}");
        }
    }

    #[test]
    fn a_result_after_the_leading_reasoning_starts_the_reply() {
        let tools = &["save_memory"];
        let r = |t: &str| crate::families::testing::detect_with(t, tools);
        let d = r("<think>\nThe user saw it.\n</think>\n{success: true, memory_type: \"journal\", content: \"x\"}You saw right through me.");
        assert_eq!(d.leaks[0].family, crate::Family::ResultPrefix);
        assert_eq!(
            d.cleaned.as_deref(),
            Some("<think>\nThe user saw it.\n</think>\nYou saw right through me.")
        );
        // The template's opener in the prompt: only the closer is in the reply.
        let d = r(
            "The user saw it.</think>{success: true, memory_type: \"journal\", content: \"x\"}Yes.",
        );
        assert_eq!(d.cleaned.as_deref(), Some("The user saw it.</think>Yes."));
        // A result after prose that follows the reasoning is not where the reply starts.
        assert!(r(
            "<think>a</think>Sure. {success: true, memory_type: \"journal\", content: \"x\"}"
        )
        .is_clean());
        // Reasoning that is not at the start does not move it.
        assert!(r(
            "Hello <think>a</think>{success: true, memory_type: \"journal\", content: \"x\"}Yes."
        )
        .is_clean());
    }

    use crate::{detect, Config, Family, Input, ResultKind};
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        detect(
            &Input {
                content: text,
                tools_used: &[],
                enabled_tools: &["save_memory".to_string()],
            },
            &Config::default(),
        )
    }

    #[test]
    fn unquoted_result_prefix_is_recovered() {
        let d = run("{success: true, memory_type: \"journal\", content: \"I lost track\"}You saw right through me.");
        assert_eq!(d.cleaned.as_deref(), Some("You saw right through me."));
        assert_eq!(d.leaks[0].family, Family::ResultPrefix);
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"content": "I lost track", "memory_type": "journal"})
        );
    }

    #[test]
    fn several_objects_back_to_back() {
        let d = run("{\"success\": true}\n{'error': 'x',}  Done.");
        assert_eq!(d.cleaned.as_deref(), Some("Done."));
        assert_eq!(d.leaks[0].results.len(), 2);
    }

    #[test]
    fn expires_around_is_carried() {
        let d = run("{success: true, memory_type: 'goal', content: 'Run a 10k', expires_around: '2026-12-01'}Go!");
        assert_eq!(
            d.leaks[0].calls[0].arguments["expires_around"],
            json!("2026-12-01")
        );
    }

    #[test]
    fn blank_content_is_invalid_args() {
        let d = run("{success: true, memory_type: 'journal', content: '  '}Hi");
        assert!(d.leaks[0].calls.is_empty());
        assert!(matches!(
            d.leaks[0].results[0].kind,
            ResultKind::InvalidSaveMemory { .. }
        ));
        assert_eq!(d.cleaned.as_deref(), Some("Hi"));
    }

    #[test]
    fn whiteboard_and_web_results_are_stripped_without_a_call() {
        let d = run("{type: \"board_update\", id: 3}Drawn.");
        assert_eq!(d.cleaned.as_deref(), Some("Drawn."));
        let d = run("{\"action\": \"search\", \"results\": []}Nothing found.");
        assert_eq!(d.cleaned.as_deref(), Some("Nothing found."));
        assert!(d.leaks[0].calls.is_empty());
    }

    #[test]
    fn result_only_is_left_alone() {
        let d = run("  {\"success\": true, \"memory_type\": \"fact\", \"content\": \"x\"}  ");
        assert_eq!(d.leaks[0].family, Family::ResultOnly);
        assert_eq!(d.cleaned, None);
    }

    #[test]
    fn json_answers_are_not_results() {
        for t in [
            "{\"name\": \"Alice\", \"age\": 30}\nHere is the JSON you asked for.",
            "{\"type\": \"one\"}{\"type\": \"two\"}Actual content",
            "{name}, welcome to the team!",
            "{x | x > 0} is the set of positive numbers.",
            "{\"success\": \"yes\"} is how the API answers.",
            "{success: true",
        ] {
            assert!(run(t).is_clean(), "{t}");
        }
    }

    #[test]
    fn a_non_result_object_ends_the_prefix() {
        let d = run("{\"success\": true}{\"name\": \"Alice\"} is the record.");
        assert_eq!(
            d.cleaned.as_deref(),
            Some("{\"name\": \"Alice\"} is the record.")
        );
    }
}
