//! `longcat`: LongCat-Flash `<longcat_tool_call>{"name": .., "arguments": ..}
//! </longcat_tool_call>`, parsed like `hermes` (closing tag may be missing at the end of
//! the message). The marker is model-specific: no enabled tool is needed.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::xml_kit::merge_pieces;
use crate::types::Family;
use crate::{Ctx, Leak};

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &["<longcat_tool_call>"];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    let pieces =
        super::hermes::json_blocks(text, ctx, "<longcat_tool_call>", "</longcat_tool_call>");
    merge_pieces(text, Family::Longcat, pieces, out);
}

#[cfg(test)]
mod tests {

    fn run(text: &str) -> crate::Detection {
        super::super::testing::detect_with(text, &[])
    }

    #[test]
    fn block_between_prose() {
        let t = "A\n<longcat_tool_call>{\"name\": \"f\", \"arguments\": {}}</longcat_tool_call>\nB";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some("A\n\nB"));
    }

    #[test]
    fn broken_block_is_kept() {
        let t = "<longcat_tool_call>{\"name\": \"f\"</longcat_tool_call>";
        assert!(run(t).is_clean());
    }
}
