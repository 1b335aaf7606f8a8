//! `json_fence`: a ```` ```json ```` fence (or one labelled as call markup, ```` ```tool_call ````,
//! or a bare ```` ``` ```` one that is the whole reply) whose only content is a tool call the agent has enabled: `{"tool": .., "parameters": ..}`, `{"name": .., "arguments": ..}`,
//! `{"reasoning": .., "tool_calls": [..]}`, or a JSON array of `{"name", "arguments"}`
//! objects (xLAM writes its calls that way).
//!
//! A fence is how a model shows an example, so the rule is narrow: the fence content is one
//! JSON value and nothing else, the object has no keys besides the call's (a tool's schema
//! with a `description`, or a `parameters` object that is a JSON schema, is not a call),
//! and every call names an enabled tool. A fence nested in another fence is an example.
//!
//! The span is the whole fence: the opening line, the content, the closing line and the
//! newline after it.
//!
//! May depend on: `crate::families::util`, `crate::grammar` (the turn's end), `crate::json5`,
//! `crate::types`, `crate::Ctx`.

use super::util::strict_call;
use super::util::{decode_arguments, find_from, is_tool_name, json_whole};
use crate::types::{Call, Family};
use crate::{json5, Ctx, Leak};
use serde_json::Value;

/// The first brace of the fence's value: a bare `{`, confirmed by [`probe`] (the fence's
/// opening line right before it). Searching the whole text for the fence cost as much as
/// the rest of the prefilter's work on texts with an object in them.
pub(crate) const TRIGGERS: &[&str] = &["{"];

/// The opening lines the fence may have.
const OPENERS: &[&[u8]] = &[b"```json", b"```JSON", b"```Json"];

/// The prefilter's look at a `{`: a fence's opening line ends right before it, past the
/// line break, spaces and a list's `[` between them (`` ```json\n[\n  {``).
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    let head = &bytes[..p];
    let (mut gap, mut newline) = (0, false);
    for &b in head.iter().rev().take(64) {
        match b {
            b' ' | b'\t' | b'\r' | b'[' => {}
            b'\n' => newline = true,
            _ => break,
        }
        gap += 1;
    }
    let head = &head[..head.len() - gap];
    // An opener ends with its info string's `n` or `N`, or with a backtick.
    gap > 0
        && match head.last() {
            Some(b'n' | b'N') if OPENERS.iter().any(|o| head.ends_with(o)) => true,
            Some(b'`') => head.ends_with(b"```") && head.trim_ascii_start().len() == 3,
            // A label's line ends before the object (the line break is in the gap).
            Some(b) if newline && b.is_ascii_alphabetic() => {
                let word = head
                    .iter()
                    .rev()
                    .take(24)
                    .take_while(|b| b.is_ascii_alphabetic() || **b == b'_')
                    .count();
                let (fence, info) = head.split_at(head.len() - word);
                fence.ends_with(b"```") && std::str::from_utf8(info).is_ok_and(call_label)
            }
            _ => false,
        }
}

/// Whether a fence's info string names call markup (`grammar::keys::labels_a_call_fence`).
fn call_label(info: &str) -> bool {
    crate::grammar::keys::labels_a_call_fence(info)
}

/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let bytes = text.as_bytes();
    let mut from = 0;
    for _ in 0..super::MAX_CANDIDATES {
        let Some(p) = find_from(text, "```", from) else {
            break;
        };
        let line_start = text
            .get(..p)
            .and_then(|b| b.rfind('\n'))
            .map_or(0, |i| i + 1);
        let ticks = bytes
            .get(p..)
            .map_or(0, |r| r.iter().take_while(|&&b| b == b'`').count());
        from = p + ticks;
        // The backticks open the line (after at most three spaces, or Command R's `Action:`
        // label, which goes with the fence).
        let indent = text.get(line_start..p).unwrap_or("x");
        let action = indent.trim() == "Action:";
        if !action && (indent.len() > 3 || !indent.bytes().all(|b| b == b' ')) {
            continue;
        }
        let open_end = text
            .get(from..)
            .and_then(|r| r.find('\n'))
            .map_or(text.len(), |i| from + i);
        let info = text.get(from..open_end).unwrap_or_default().trim();
        // The whole fence on one line (```` ```json {..} ``` ````), as a chat box that sends
        // on Enter has it written.
        if let Some(leak) = one_line(text, ctx, p, line_start, info, ticks) {
            from = leak.span.end;
            out.push(leak);
            continue;
        }
        // Find the closing fence whatever the info string, so a fence's content is never
        // taken for an opening.
        let Some((close_start, close_end)) = closing_fence(text, open_end, ticks) else {
            break;
        };
        from = close_end;
        // A fence with no info string is a call only as the whole reply: an answer that
        // is nothing but a call (elsewhere such a fence is an example).
        let whole = || text[..line_start].trim().is_empty() && text[close_end..].trim().is_empty();
        if !(info.eq_ignore_ascii_case("json") || call_label(info) || info.is_empty() && whole()) {
            continue;
        }
        // A fence inside another fence (or inline code) is an example.
        if line_start > 0 && ctx.in_code(line_start - 1) {
            continue;
        }
        let body = text.get(open_end..close_start).unwrap_or_default();
        let span_end = if bytes.get(close_end) == Some(&b'\n') {
            close_end + 1
        } else if bytes.get(close_end..close_end + 2) == Some(b"\r\n") {
            close_end + 2
        } else {
            close_end
        };
        let (family, start, calls) = match parse_body(body) {
            Some(calls) => (Family::JsonFence, with_label(text, line_start), calls),
            None => match named_fence(text, line_start, body) {
                Some(found) => found,
                None => continue,
            },
        };
        if calls.is_empty() || !calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
            continue;
        }
        out.push(Leak {
            family,
            span: start..span_end,
            calls,
            results: Vec::new(),
        });
        from = span_end;
    }
}

/// A ```` ```json ```` fence opened and closed on its line (`info`: what follows the
/// opening backticks) around exactly one call of an enabled tool.
fn one_line(
    text: &str,
    ctx: &Ctx<'_>,
    p: usize,
    line_start: usize,
    info: &str,
    ticks: usize,
) -> Option<Leak> {
    let label = info.get(..4).filter(|l| l.eq_ignore_ascii_case("json"))?;
    let inner = info[label.len()..].strip_suffix(&"`".repeat(ticks))?.trim();
    if !inner.starts_with('{') || (line_start > 0 && ctx.in_code(line_start - 1)) {
        return None;
    }
    let calls = parse_body(inner)?;
    if calls.is_empty() || !calls.iter().all(|c| ctx.tool_enabled(&c.name)) {
        return None;
    }
    let end = p + text.get(p..)?.find(info)? + info.len();
    Some(Leak {
        family: Family::JsonFence,
        span: p..end,
        calls,
        results: Vec::new(),
    })
}

/// A fence holding a bare arguments object under a line that ends with the tool's name:
/// DeepSeek V3's `function<｜tool▁sep｜>NAME\n```json\n{..}\n```` once its special tokens
/// are stripped (`functionNAME`, reported as `deepseek`), or the name alone on its line.
/// The name must stand apart from the text before it (a line, or glued to a sentence's end).
fn named_fence(text: &str, line_start: usize, body: &str) -> Option<(Family, usize, Vec<Call>)> {
    // The name line first (a few bytes), the body's JSON only under one.
    let before = text.get(..line_start)?.strip_suffix('\n')?;
    let before = before.strip_suffix('\r').unwrap_or(before);
    let run = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || matches!(c, '_' | '-'))
        .last()
        .map(|(i, _)| i)?;
    let word = before.get(run..)?;
    let (family, name) = match word.strip_prefix("function") {
        Some(n) if !n.is_empty() => (Family::Deepseek, n),
        _ => (Family::JsonFence, word),
    };
    if !is_tool_name(name) || !super::named::stands_before(text, run) {
        return None;
    }
    let args = json_whole(body).filter(Value::is_object)?;
    if super::util::is_schema(&args) {
        return None;
    }
    let call = Call {
        name: name.to_string(),
        arguments: args,
    };
    Some((family, run, vec![call]))
}

/// RWKV puts a `**Tool Call:**` line above each fence (vLLM's rwkv parser): the label is
/// the format's, and goes with the fence it announces.
fn with_label(text: &str, line_start: usize) -> usize {
    const LABEL: &str = "**Tool Call:**";
    let before = text.get(..line_start).unwrap_or_default();
    let trimmed = before.trim_end();
    match trimmed.strip_suffix(LABEL) {
        Some(rest) if rest.is_empty() || rest.ends_with('\n') => rest.len(),
        _ => line_start,
    }
}

/// The closing fence after the opening line ending at `open_end`: a line of at least
/// `ticks` backticks (after at most three spaces) and nothing else, or end-of-turn tokens
/// ending the text. Returns where that
/// line starts and ends (before its newline).
fn closing_fence(text: &str, open_end: usize, ticks: usize) -> Option<(usize, usize)> {
    let mut line_start = open_end + 1;
    while line_start <= text.len() {
        let rest = text.get(line_start..)?;
        let line_end = rest.find('\n').map_or(text.len(), |i| line_start + i);
        let line = text.get(line_start..line_end)?;
        let t = line.trim_start_matches(' ');
        if line.len() - t.len() <= 3 {
            let n = t.bytes().take_while(|&b| b == b'`').count();
            // The backticks end the line, or a chat template's end-of-turn tokens glued to
            // them end the text (`` ```<|im_end|> ``, `` ```</s> ``).
            let after = line_end - t.len() + n;
            let ends_turn = || crate::grammar::keys::rest_ends_turn(text, after);
            if n >= ticks && t[n..].trim().is_empty() {
                return Some((line_start, line_end));
            }
            if n >= ticks && ends_turn() {
                return Some((line_start, after));
            }
        }
        if line_end == text.len() {
            return None;
        }
        line_start = line_end + 1;
    }
    None
}

fn parse_body(body: &str) -> Option<Vec<Call>> {
    let v = json_whole(body).or_else(|| {
        let t = body.trim();
        match json5::parse_value_at(t, 0) {
            Ok((v, end)) if end == t.len() => Some(v),
            _ => None,
        }
    })?;
    match &v {
        Value::Array(items) if !items.is_empty() => items.iter().map(fence_call).collect(),
        Value::Object(obj) if obj.contains_key("tool_calls") => {
            const KEYS: &[&str] = &["reasoning", "thought", "thoughts", "tool_calls"];
            if obj.keys().any(|k| !KEYS.contains(&k.as_str())) {
                return None;
            }
            match obj.get("tool_calls")? {
                Value::Array(items) if !items.is_empty() => items.iter().map(fence_call).collect(),
                _ => None,
            }
        }
        Value::Object(_) => fence_call(&v)
            .map(|c| vec![c])
            .or_else(|| super::util::envelope(&v)),
        _ => None,
    }
}

/// One call in a fence: `{"name", "arguments"}` exactly, `{"tool", "parameters"}` (or
/// `args`, LangChain's `tool_input`, Command R's `{"tool_name", "parameters"}`), or the OpenAI shape `{"id", "type": "function",
/// "function": {"name", "arguments"}}`.
fn fence_call(v: &Value) -> Option<Call> {
    let obj = v.as_object()?;
    let call = if let Some(f) = obj.get("function") {
        const KEYS: &[&str] = &["id", "type", "function"];
        if obj.keys().any(|k| !KEYS.contains(&k.as_str())) {
            return None;
        }
        strict_call(f)?
    } else if let Some(tool) = obj.get("tool").or_else(|| obj.get("tool_name")) {
        // `tool_name` is Command R's `Action:` block spelling.
        const KEYS: &[&str] = &[
            "tool",
            "tool_name",
            "tool_call_id",
            "parameters",
            "arguments",
            "args",
            "tool_input",
            "reasoning",
            "thought",
        ];
        if obj.keys().any(|k| !KEYS.contains(&k.as_str())) {
            return None;
        }
        let name = tool.as_str()?.trim();
        if !is_tool_name(name) {
            return None;
        }
        let args = ["parameters", "arguments", "args", "tool_input"]
            .iter()
            .find_map(|k| obj.get(*k));
        let args = args.map_or(Value::Object(Default::default()), |a| {
            decode_arguments(a.clone())
        });
        if !args.is_object() {
            return None;
        }
        Call {
            name: name.to_string(),
            arguments: args,
        }
    } else {
        strict_call(v)?
    };
    (!super::util::is_schema(&call.arguments)).then_some(call)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        super::super::testing::detect_with(text, tools)
    }

    #[test]
    fn fence_with_enabled_tool() {
        let t = "Doing it:\n```json\n{\"tool\": \"write_file\", \"parameters\": {\"path\": \"a\"}}\n```\n\nDone.";
        let d = run(t, &["write_file"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"path": "a"}));
        assert_eq!(d.cleaned.as_deref(), Some("Doing it:\n\nDone."));
    }

    #[test]
    fn reasoning_and_arrays() {
        let t = "```json\n{\"reasoning\": \"r\", \"tool_calls\": [{\"name\": \"a\", \"arguments\": {}}, {\"tool\": \"b\", \"parameters\": {\"x\": 1}}]}\n```";
        let d = run(t, &["a", "b"]);
        assert_eq!(d.leaks[0].calls.len(), 2);
        let t = "```json\n[{\"name\": \"a\", \"arguments\": {\"q\": 1}}]\n```";
        assert_eq!(run(t, &["a"]).cleaned.as_deref(), Some(""));
    }

    #[test]
    fn examples_stay() {
        let t = "```json\n{\"tool\": \"write_file\", \"parameters\": {\"path\": \"a\"}}\n```";
        assert!(run(t, &["read_file"]).is_clean());
        let t = "```json\n{\"name\": \"a\", \"description\": \"d\", \"parameters\": {}}\n```";
        assert!(run(t, &["a"]).is_clean());
        let t = "```json\n{\"name\": \"a\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}\n```";
        assert!(run(t, &["a"]).is_clean());
        let t = "````markdown\n```json\n{\"name\": \"a\", \"arguments\": {}}\n```\n````";
        assert!(run(t, &["a"]).is_clean());
        let t = "```json\n{\"name\": \"a\", \"arguments\": {}}\n// and more\n```";
        assert!(run(t, &["a"]).is_clean());
        let t = "```json\n{\"name\": \"a\", \"arguments\": {}}";
        assert!(run(t, &["a"]).is_clean());
        let t = "```python\nx = 1\n```json\n{\"name\": \"a\", \"arguments\": {}}\n```";
        assert!(run(t, &["a"]).is_clean());
    }

    #[test]
    fn many_fences_are_linear() {
        let t = "```json\n{}\n```\n".repeat(5000);
        assert!(run(&t, &["a"]).is_clean());
        let t = "```json\n".repeat(5000);
        assert!(run(&t, &["a"]).is_clean());
    }
}
