//! `granite`: Granite 3.x: `<|tool_call|>` (3.0) or the string `<tool_call>` (3.1) followed by a
//! JSON array of calls, with no closing token (a `</tool_call>` after the array is taken
//! along). A `<tool_call>` followed by an object is Hermes markup and left to `hermes`.
//!
//! The token is a strong marker, so the tool need not be enabled; the JSON must parse
//! completely into `{"name", "arguments"}` objects (no other keys), or it is prose.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::llama3_json::{tagged_json, Tagged};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<|tool_call|>", "<tool_call>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    tagged_json(
        text,
        ctx,
        &Tagged {
            family: Family::Granite,
            open: "<|tool_call|>",
            close: Some("</tool_call>"),
            close_optional: true,
            allow_object: false,
            many: false,
        },
        out,
    );
    tagged_json(
        text,
        ctx,
        &Tagged {
            family: Family::Granite,
            open: "<tool_call>",
            close: Some("</tool_call>"),
            close_optional: true,
            allow_object: false,
            many: false,
        },
        out,
    );
}

#[cfg(test)]
mod tests {

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn finds_the_block_and_keeps_prose() {
        let d = run(
            "Let me check.\n<|tool_call|> [{\"name\": \"f\", \"arguments\": {\"city\": \"Tokyo\"}}]\nI will.",
        );
        assert_eq!(
            d.cleaned.as_deref(),
            Some(
                "Let me check.

I will."
            )
        );
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run(r#"<|tool_call|> [{"name": "f", "arguments": {}}"#).is_clean());
        assert!(run("<|tool_call|> is the token Granite uses").is_clean());
    }
}
