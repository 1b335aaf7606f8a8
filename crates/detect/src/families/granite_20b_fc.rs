//! `granite_20b_fc`: granite-20b-functioncalling: `<function_call>` followed by one call object, repeated
//! for parallel calls (neighbouring blocks become one leak).
//!
//! The token is a strong marker, so the tool need not be enabled; the JSON must parse
//! completely into `{"name", "arguments"}` objects (no other keys), or it is prose.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::llama3_json::{tagged_json, Tagged};
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<function_call>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    tagged_json(
        text,
        ctx,
        &Tagged {
            family: Family::Granite20bFc,
            open: "<function_call>",
            close: None,
            close_optional: false,
            allow_object: true,
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
            "Let me check.\n<function_call> {\"name\": \"f\", \"arguments\": {\"a\": 1}}\n<function_call> {\"name\": \"f\", \"arguments\": {}}",
        );
        assert_eq!(d.cleaned.as_deref(), Some("Let me check."));
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run(r#"<function_call> {"name": "f", "arguments": {}"#).is_clean());
        assert!(run("The <function_call> token starts a call.").is_clean());
    }
}
