//! `hermes`: `<tool_call>{"name": .., "arguments": ..}</tool_call>` (Hermes, Qwen2.5/3,
//! ERNIE-4.5, Granite-4 and many fine-tunes). The closing tag may be missing when the call
//! is the end of the message (generation stopped there). Several blocks in a row form one
//! leak; text before, between and after them stays.
//!
//! The marker is model-specific, so the tool need not be enabled; the JSON must parse
//! completely into a `{name, arguments}` object.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::util::{call_from_object, find_from, json_value_at, skip_ws, MAX_CANDIDATES};
use super::xml_kit::{merge_pieces, rest_is_blank, Finder, Piece};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<tool_call>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let pieces = json_blocks(text, ctx, "<tool_call>", "</tool_call>");
    merge_pieces(text, Family::Hermes, pieces, out);
}

/// `open` JSON-object `close` blocks: the object must be a `{name, arguments}` call and
/// only whitespace may stand between it and the tags. A missing `close` is accepted when
/// nothing but whitespace follows the object.
pub(super) fn json_blocks(
    text: &str,
    ctx: &Ctx<'_>,
    open: &'static str,
    close: &'static str,
) -> Vec<Piece> {
    let mut closer = Finder::new(text, close);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut seen = 0;
    while let Some(pos) = find_from(text, open, at) {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        let body = pos + open.len();
        at = body;
        if ctx.quoted(pos) {
            continue;
        }
        let j = skip_ws(text, body);
        if text.as_bytes().get(j) != Some(&b'{') {
            continue;
        }
        // Parse only up to the closing tag when there is one, so a broken object cannot
        // run on into later blocks.
        let limit = closer.find(body);
        let scope = match limit {
            Some(c) => text.get(..c).unwrap_or(text),
            None => text,
        };
        let Some((value, vend)) = json_value_at(scope, j) else {
            continue;
        };
        let Some(call) = call_from_object(&value) else {
            continue;
        };
        let after = skip_ws(text, vend);
        let end = match limit {
            Some(c) if c == after => c + close.len(),
            _ if rest_is_blank(text, vend) => vend,
            _ => continue,
        };
        pieces.push(Piece {
            span: pos..end,
            calls: vec![call],
        });
        at = end;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn call_with_prose_around() {
        let t = "Let me look.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>\nBack soon.";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"q": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some("Let me look.\n\nBack soon."));
    }

    #[test]
    fn unclosed_call_only_at_the_end() {
        let t = "<tool_call>{\"name\": \"f\", \"arguments\": {}}";
        assert_eq!(run(t).leaks.len(), 1);
        let t = "<tool_call>{\"name\": \"f\", \"arguments\": {}}\nand then I went on writing.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn prose_mentioning_the_tag_is_kept() {
        let t = "Hermes models wrap calls in <tool_call> and </tool_call> tags holding a JSON object with name and arguments.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn inline_code_example_is_kept() {
        let t = "Write `<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>` to call f.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn fenced_example_is_kept() {
        let t = "Example:\n```xml\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n```";
        assert!(run(t).is_clean());
    }

    #[test]
    fn broken_json_is_kept() {
        let t = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}\n</tool_call>";
        assert!(run(t).is_clean());
        let t = "<tool_call>{\"name\": \"f\"}</tool_call>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn broken_block_does_not_swallow_the_next() {
        let t = "<tool_call>{\"name\": \"f\", </tool_call> text <tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "g");
        assert_eq!(
            d.cleaned.as_deref(),
            Some("<tool_call>{\"name\": \"f\", </tool_call> text")
        );
    }

    #[test]
    fn call_quoted_in_closed_think_is_kept() {
        let t = "<think>maybe <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>?</think>No call needed.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn many_open_tags_stay_cheap() {
        let t = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"".repeat(20_000);
        assert!(run(&t).is_clean());
    }
}
