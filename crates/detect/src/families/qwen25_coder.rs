//! `qwen25_coder`: Qwen2.5-Coder's calls inside `<tools>` ... `</tools>`: one or more call objects
//! (or arrays of them). A tool *definition* (`description`, schema) inside `<tools>` is not a
//! call: only objects that are exactly calls count.
//!
//! The token is a strong marker, so the tool need not be enabled; the JSON must parse
//! completely into `{"name", "arguments"}` objects (no other keys), or it is prose.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::llama3_json::{tagged_json, Tagged};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<tools>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    tagged_json(
        text,
        ctx,
        &Tagged {
            family: Family::Qwen25Coder,
            open: "<tools>",
            close: Some("</tools>"),
            close_optional: false,
            allow_object: true,
            many: true,
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
            "Checking.\n<tools>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tools>\n<tools>\n{\"name\": \"f\", \"parameters\": {}}\n</tools>",
        );
        assert_eq!(d.cleaned.as_deref(), Some("Checking."));
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run("<tools>\n{\"name\": \"f\", \"description\": \"Gets weather\", \"parameters\": {\"type\": \"object\"}}\n</tools>").is_clean());
        assert!(
            run("<tools>\n{\"name\": \"broken\", \"arguments\": {invalid json\n</tools>")
                .is_clean()
        );
    }
}
