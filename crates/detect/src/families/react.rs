//! `react`: the ReAct agent format (Yao et al. 2022, as LangChain's ReAct agents write it:
//! `ReActSingleInputOutputParser`, `MRKLOutputParser`): a step is
//!
//! ```text
//! Thought: I should remember this.
//! Action: save_memory
//! Action Input: {"content": "..."}
//! Observation: saved
//! ```
//!
//! where the agent's runtime, not the model, writes the `Observation`. In a chat reply these
//! lines are a call the runtime never ran, and an `Observation` after them is a result the
//! model made up. A leak is `Action:` (a word of its own: at a line's start, or glued to the
//! sentence before it) naming an **enabled** tool, the next line `Action Input:` with a JSON
//! object (the only arguments a tool of ours takes) and nothing after it on that line, and
//! the `Observation:` line after it, if any. `Thought:` lines are the model's words and
//! stay. A step numbered as some prompts write it (`Action 1:`, `Action 1 Input:`) counts
//! too, and so does the same pair of lines in other words, read by the labels' roles: a
//! label naming the tool (`Tool:`, `name:`, `Function:`, markdown bold allowed) starting
//! its line, then an input label (`Input:`, `Tool Input:`) on the next.
//!
//! May depend on: `super::util`, `crate::types`, `crate::Ctx`.

use super::util::{decode_arguments, find_from, json_value_at, merge, Block, MAX_CANDIDATES};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;

/// The object an input label holds: a bare `{`, confirmed by [`probe`] (the label's
/// `nput:` right before it), or a serialized one's `"{\"`. Searching the whole text for `nput:` cost a tenth of the
/// clean path; the label always stands right before the object's brace.
pub(crate) const TRIGGERS: &[&str] = &["{", "\"{\\\""];

/// The prefilter's look at a `{`: an input label's `nput:` (any case) ends right before it, past the
/// spaces, markdown stars and the quote of a serialized object between them
/// (`Action Input: {`, `**Action Input:** {`, `Action Input: "{\"q\": ..}"`).
pub(crate) fn probe(bytes: &[u8], p: usize) -> bool {
    let head = &bytes[..p];
    let gap = head
        .iter()
        .rev()
        .take(12)
        .take_while(|b| matches!(b, b' ' | b'\t' | b'*' | b'"'))
        .count();
    let head = &head[..head.len() - gap];
    head.len() >= 5 && head[head.len() - 5..].eq_ignore_ascii_case(b"nput:")
}
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks found in `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut blocks = Vec::new();
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        // The label in capitals too (`ACTION INPUT:`, `INPUT:`), as some prompts write it.
        let hit = [
            find_from(text, "nput:", from),
            find_from(text, "NPUT:", from),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(hit) = hit else {
            break;
        };
        from = hit + "nput:".len();
        if ctx.quoted(hit) {
            continue;
        }
        if let Some((start, end, call)) = step(text, hit, ctx) {
            if blocks.last().is_none_or(|b: &Block| b.0.end <= start) {
                blocks.push((start..end, vec![call]));
                from = end;
            }
        }
    }
    merge(text, Family::React, blocks, out);
}

/// One step whose input label's `nput:` is at `hit`: where it starts (its name label),
/// the offset past it (and past its `Observation:` line) and its call.
fn step(text: &str, hit: usize, ctx: &Ctx<'_>) -> Option<(usize, usize, Call)> {
    let line = line_start(text, hit);
    let colon = hit + "nput".len();
    let head = text.get(line..colon)?;
    // The name label ends the line before: `Action: NAME` (`Action` a word of its own,
    // glued to a sentence or not), or any other tool label starting its line. Or both
    // labels share one line (`Action: NAME Action Input: {..}`).
    let (prev_start, prev) = if is_label(head, INPUT_LABELS) {
        let prev_end = line.checked_sub(1)?;
        let prev_start = line_start(text, prev_end);
        (
            prev_start,
            text.get(prev_start..prev_end)?.trim_end_matches('\r'),
        )
    } else {
        // The input label is a few words right before its colon: only spaces near it, the
        // first that starts one (`Action Input`, not its last word alone).
        let split = head
            .match_indices(' ')
            .map(|(i, _)| i)
            .filter(|&i| head.len() - i <= 32)
            .find(|&i| is_label(&head[i + 1..], INPUT_LABELS))?;
        (line, &head[..split])
    };
    let (label_at, name) = name_label(prev)?;
    let name = name.trim().trim_matches(['*', '`']).trim();
    if !super::util::is_tool_name(name) || !ctx.tool_enabled(name) {
        return None;
    }
    let input = colon + 1 + spaces(text.get(colon + 1..)?);
    let (args, end) = json_value_at(text, input)?;
    let arguments = match decode_arguments(args) {
        v @ Value::Object(_) => v,
        _ => return None,
    };
    // The rest of the Input line must be empty: `{..} and then` is prose about a value.
    let rest_end = line_end(text, end);
    if !text.get(end..rest_end)?.trim().is_empty() {
        return None;
    }
    let call = Call {
        name: name.to_string(),
        arguments,
    };
    Some((
        prev_start + label_at,
        observation(text, rest_end).unwrap_or(end),
        call,
    ))
}

/// Labels that name the tool: ReAct's `Action` and the same role in other words.
const NAME_LABELS: &[&str] = &[
    "action",
    "tool",
    "toolname",
    "name",
    "function",
    "functionname",
    "call",
    "toolcall",
    "functioncall",
];
/// Labels of the arguments' line, each holding `nput` (the family's trigger).
const INPUT_LABELS: &[&str] = &["input", "actioninput", "toolinput", "functioninput"];

/// Whether `s` (a line's text up to its label's colon, markdown marks and a step number
/// allowed: `**Action 1 Input`) is one of `labels`, folded.
fn is_label(s: &str, labels: &[&str]) -> bool {
    let s = s.trim_start_matches([' ', '\t', '*', '-', '#', '>', '_']);
    let words = s.split_whitespace().count();
    let key: String = s
        .chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    (1..=4).contains(&words)
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-'))
        && labels.contains(&key.as_str())
}

/// The tool label of a line (`Action: NAME`, `**Tool:** NAME`, `name: NAME`): where the
/// label starts and the text after it.
fn name_label(line: &str) -> Option<(usize, &str)> {
    for (colon, _) in line.match_indices(':') {
        let head = line[..colon].trim_end_matches('*');
        let after = line[colon + 1..].trim_start_matches('*');
        if is_label(head, NAME_LABELS) {
            let at = line.len() - line.trim_start().len();
            return Some((at, after));
        }
        // `..sentence.Action: NAME`, `Let me look.name: NAME`: a one-word label glued to
        // the sentence before it.
        // (A step number after the label, `Action 1`, is the label's.)
        let word = head.trim_end_matches(|c: char| c.is_ascii_digit() || c == ' ');
        let at = word
            .rfind(|c: char| c.is_whitespace() || matches!(c, '.' | '!' | '?' | '。' | '*'))
            .map_or(0, |i| {
                i + head[i..].chars().next().map_or(1, char::len_utf8)
            });
        if at > 0 && is_label(&head[at..], NAME_LABELS) {
            return Some((at, after));
        }
    }
    None
}

fn spaces(s: &str) -> usize {
    s.len() - s.trim_start_matches([' ', '\t', '*']).len()
}

fn line_start(text: &str, pos: usize) -> usize {
    text.get(..pos)
        .and_then(|b| b.rfind('\n'))
        .map_or(0, |i| i + 1)
}

/// The end of an `Observation:` line starting on the line after `pos` (a newline at `pos`),
/// if one does.
fn observation(text: &str, pos: usize) -> Option<usize> {
    let next = pos.checked_add(1)?;
    let rest = text.get(next..)?;
    let body = rest.trim_start_matches([' ', '\t']);
    body.strip_prefix("Observation")?;
    Some(line_end(text, text.len() - body.len()))
}

fn line_end(text: &str, from: usize) -> usize {
    text.get(from..)
        .and_then(|r| r.find('\n'))
        .map_or(text.len(), |i| from + i)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &["save_memory"])
    }

    #[test]
    fn an_action_with_its_input_is_a_call_and_the_made_up_observation_goes() {
        let d = run("Thought: I should remember this.\nAction: save_memory\nAction Input: {\"content\": \"likes tea\"}\nObservation: saved\nDone, I will remember.");
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "save_memory");
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"content": "likes tea"})
        );
        assert_eq!(
            d.cleaned.as_deref(),
            Some("Thought: I should remember this.\n\nDone, I will remember.")
        );
    }

    #[test]
    fn labels_in_capitals_count() {
        let d = run("ACTION: save_memory\nINPUT: {\"content\": \"x\"}");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"content": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn numbered_steps_and_a_stringified_input_count() {
        let d = run("Action 1: save_memory\nAction 1 Input: \"{\\\"content\\\": \\\"x\\\"}\"");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"content": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn the_same_pair_in_other_words_is_a_step() {
        for t in [
            "Let me look.\nname: save_memory\ninput: {\n  \"content\": \"x\"\n}",
            "**Tool:** save_memory\n**Input:** {\"content\": \"x\"}",
            "Function: `save_memory`\nTool Input: {\"content\": \"x\"}",
        ] {
            let d = run(t);
            assert_eq!(d.leaks.len(), 1, "{t}");
            assert_eq!(d.leaks[0].calls[0].arguments, json!({"content": "x"}));
        }
        assert_eq!(
            run("Let me look.\nname: save_memory\ninput: {\"content\": \"x\"}")
                .cleaned
                .as_deref(),
            Some("Let me look.")
        );
        // A label that is a sentence, a name that is no enabled tool, two lines apart: prose.
        assert!(run("The name is: save_memory\ninput: {\"content\": \"x\"}").is_clean());
        assert!(run("name: John\ninput: {\"content\": \"x\"}").is_clean());
        assert!(run("name: save_memory\n\ninput: {\"content\": \"x\"}").is_clean());
        assert!(run("Output: save_memory\nInput: {\"content\": \"x\"}").is_clean());
    }

    #[test]
    fn prose_and_other_tools_and_non_objects_stay() {
        assert!(run("Action: search\nAction Input: {\"q\": \"x\"}").is_clean());
        assert!(run("Action: save_memory\nAction Input: likes tea").is_clean());
        assert!(run("ReAction: save_memory\nAction Input: {\"content\": \"x\"}").is_clean());
        assert!(run("Action: save_memory\nAction Input: {\"content\": \"x\"} and more").is_clean());
        assert!(run("Action: save_memory\nAnd then Action Input: {\"content\": \"x\"}").is_clean());
        assert!(
            run("```\nAction: save_memory\nAction Input: {\"content\": \"x\"}\n```").is_clean()
        );
    }
}
