//! `jamba`: Jamba's JSON array of calls inside `<tool_calls>` ... `</tool_calls>` (the same
//! markup as Hunyuan-A13B's; both families parse it and the driver keeps one).
//!
//! The token is a strong marker, so the tool need not be enabled; the JSON must parse
//! completely into `{"name", "arguments"}` objects (no other keys), or it is prose.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::llama3_json::{tagged_json, Tagged};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<tool_calls>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    tagged_json(
        text,
        ctx,
        &Tagged {
            family: Family::Jamba,
            open: "<tool_calls>",
            close: Some("</tool_calls>"),
            close_optional: false,
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
        let d =
            run(r#"Sure. <tool_calls>[{"name": "f", "arguments": {"a": 1}}]</tool_calls> Done"#);
        assert_eq!(d.cleaned.as_deref(), Some("Sure.  Done"));
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run(r#"<tool_calls>[{"name": "f", "arguments": {}}]"#).is_clean());
        assert!(run(r#"<tool_calls>[{"city": "x"}]</tool_calls>"#).is_clean());
        assert!(run("<tool_calls> are described here</tool_calls>").is_clean());
        assert!(run(r#"`<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>`"#).is_clean());
    }
}
