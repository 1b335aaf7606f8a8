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
//! too.
//!
//! May depend on: `super::util`, `crate::types`, `crate::Ctx`.

use super::util::{decode_arguments, find_from, json_value_at, merge, MAX_CANDIDATES};
use crate::types::{Call, Family};
use crate::{Ctx, Leak};
use serde_json::Value;

/// Literal markers one of which any leak of this family contains: one needle for `Action Input:`, `Action input:` and a numbered step's `Action 1 Input:`:
/// it has no anchor byte, so the prefilter searches the whole text for it (where a `{` is),
/// and one search costs less than three.
pub(crate) const TRIGGERS: &[&str] = &["nput:"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks found in `text`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let mut blocks = Vec::new();
    let mut from = 0;
    for _ in 0..MAX_CANDIDATES {
        let Some(at) = find_from(text, "Action", from) else {
            break;
        };
        from = at + "Action".len();
        if !word_start(text, at) || ctx.quoted(at) {
            continue;
        }
        if let Some((end, call)) = step(text, at, ctx) {
            blocks.push((at..end, vec![call]));
            from = end;
        }
    }
    merge(text, Family::React, blocks, out);
}

/// One `Action:` / `Action Input:` step at `at`: the offset past it (and past its
/// `Observation:` line) and its call.
fn step(text: &str, at: usize, ctx: &Ctx<'_>) -> Option<(usize, Call)> {
    let after_label = label(text, at, false)?;
    let name_end = line_end(text, after_label);
    let name = text.get(after_label..name_end)?.trim();
    if !super::util::is_tool_name(name) || !ctx.tool_enabled(name) {
        return None;
    }
    let next = (name_end + 1).min(text.len());
    let input = label(text, next, true)?;
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
    Some((
        observation(text, rest_end).unwrap_or(end),
        Call {
            name: name.to_string(),
            arguments,
        },
    ))
}

/// Past `Action[ N]:` at `at`, or `Action[ N] Input[ N]:` when `input`, and the spaces
/// after the colon.
fn label(text: &str, at: usize, input: bool) -> Option<usize> {
    let rest = text.get(at..)?.strip_prefix("Action")?;
    let rest = skip_number(rest);
    let rest = if !input {
        rest
    } else {
        let r = rest.strip_prefix(' ')?;
        let r = r
            .strip_prefix("Input")
            .or_else(|| r.strip_prefix("input"))?;
        skip_number(r)
    };
    let rest = rest.strip_prefix(':')?;
    let spaces = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    Some(text.len() - rest.len() + spaces)
}

/// Skips ` 12` (a step number) if it is there.
fn skip_number(s: &str) -> &str {
    let t = s.trim_start_matches(' ');
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        &t[digits..]
    } else {
        s
    }
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

/// Whether `Action` at `at` starts a word (`ReAction:` is not a step).
fn word_start(text: &str, at: usize) -> bool {
    !text
        .get(..at)
        .and_then(|b| b.chars().next_back())
        .is_some_and(char::is_alphanumeric)
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
    fn numbered_steps_and_a_stringified_input_count() {
        let d = run("Action 1: save_memory\nAction 1 Input: \"{\\\"content\\\": \\\"x\\\"}\"");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"content": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some(""));
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
