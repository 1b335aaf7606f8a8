//! `functiongemma`: FunctionGemma's tool-call markup.
//!
//! `<start_function_call>call:get_weather{location:<escape>London<escape>,limit:<escape>10<escape>}<end_function_call>`
//!
//! The same `call:name{key:value}` grammar as Gemma 4 (see `gemma4::find_calls`), with
//! `<escape>` as the string delimiter. FunctionGemma delimits every value, numbers too, so a
//! delimited value is typed like an XML parameter (`10` -> 10, `London` -> "London"). Commas
//! between pairs are optional (the model sometimes drops them). A call without its
//! `<end_function_call>` is prose.
//!
//! May depend on: `crate::families::util`, `crate::json5`, `crate::types`, `crate::Ctx`.

use super::gemma4::{find_calls, Spec};
use crate::types::Family;
use crate::{Ctx, Leak};

const OPEN: &str = "<start_function_call>";
const CLOSE: &str = "<end_function_call>";

/// Literal markers one of which any leak of this family contains.
pub(crate) const TRIGGERS: &[&str] = &[OPEN];
/// Bytes a leak of this family may start the message with (after whitespace).
pub(crate) const AT_START: &[u8] = &[];

/// Appends the leaks of this family found in `text` to `out`.
pub(crate) fn find(text: &str, ctx: &Ctx<'_>, out: &mut Vec<Leak>) {
    find_calls(
        text,
        ctx,
        out,
        &Spec {
            family: Family::Functiongemma,
            open: OPEN,
            close: CLOSE,
            quote: "<escape>",
            type_quoted: true,
        },
    );
}

#[cfg(test)]
mod tests {

    use super::super::testing::{run_family, Out};

    fn run_with(text: &str, tools: &[&str]) -> Out {
        run_family(super::find, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> Out {
        run_with(text, &[])
    }

    #[test]
    fn values_without_commas_are_typed() {
        let t = "Checking. <start_function_call>call:search{query:<escape>rust, fast<escape>limit:<escape>10<escape>}<end_function_call>";
        let d = run(t);
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"query": "rust, fast", "limit": 10})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Checking."));
    }

    #[test]
    fn missing_end_token_is_prose() {
        let t = "<start_function_call>call:search{query:<escape>rust<escape>}";
        assert!(run(t).is_clean());
    }

    #[test]
    fn prose_without_call_syntax_is_not_a_leak() {
        let t = "The model emits <start_function_call> then the call, then <end_function_call>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn inline_code_is_not_a_leak() {
        let t = "Format: `<start_function_call>call:f{a:<escape>1<escape>}<end_function_call>`.";
        assert!(run(t).is_clean());
    }
}
