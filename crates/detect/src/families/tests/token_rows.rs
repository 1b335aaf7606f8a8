//! The table's rows of special-token sections, each checked through its family's detectors alone
//! (formerly each family's own unit tests, kept when the families became rows).

use super::super::testing::run_only;
use crate::Family;

mod deepseek {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Deepseek, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_with(text, &[])
    }

    #[test]
    fn v31_section_with_prose_around() {
        let t = "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜> Done.";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "foo");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"x": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Sure. Done."));
    }

    #[test]
    fn v3_fenced_arguments_with_newlines_inside_section() {
        let t = "<｜tool▁calls▁begin｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\"}\n```<｜tool▁call▁end｜>\n<｜tool▁calls▁end｜>";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].name, "get_weather");
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn prose_mentioning_the_token_is_not_a_leak() {
        let t = "DeepSeek starts its tool calls with <｜tool▁calls▁begin｜> and ends them with <｜tool▁calls▁end｜>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn markup_in_a_code_fence_is_not_a_leak() {
        let t = "Template:\n```text\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>\n```\n";
        assert!(run(t).is_clean());
    }

    #[test]
    fn truncated_call_is_not_a_leak() {
        let t = "Checking<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":";
        assert!(run(t).is_clean());
        let t = "Checking<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn section_cut_after_a_complete_call_is_a_leak_only_at_the_end() {
        let t = "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜>\n";
        assert_eq!(run(t).cleaned.as_deref(), Some("Hi"));
        let t = "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜> and more prose";
        assert!(run(t).is_clean());
    }

    #[test]
    fn one_bad_call_spoils_the_section() {
        let t = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>bar<｜tool▁sep｜>not json<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn dsml_string_and_json_params() {
        let t = "Ok <｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"false\">42</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "42", "b": 42}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok"));
    }

    #[test]
    fn dsml_wrappers_must_match() {
        let t = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls> trailing";
        assert!(run(t).is_clean());
    }

    #[test]
    fn a_broken_dsml_section_reports_each_of_its_calls_once() {
        // Two rows of the format read the second invoke alike; the net reads both (for an
        // enabled tool). Each call is reported once, in order, whatever spoilt the section.
        let inv = |a: &str| {
            format!("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">{a}</｜DSML｜parameter>\n</｜DSML｜invoke>\n")
        };
        let t = format!(
            "<｜DSML｜tool_calls>\n{}{}!!\n</｜DSML｜tool_calls>",
            inv("1"),
            inv("2")
        );
        let d = crate::families::testing::detect_with(&t, &["f"]);
        let calls: Vec<_> = d.calls_to_run().map(|(_, c)| c.arguments.clone()).collect();
        assert_eq!(calls, vec![json!({"a": "1"}), json!({"a": "2"})]);
    }

    #[test]
    fn dsml_unclosed_invoke_is_not_a_leak() {
        let t = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x";
        assert!(run(t).is_clean());
    }

    #[test]
    fn call_quoted_in_closed_think_is_kept() {
        let t = "<think>I could emit <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜> but no.</think>No tool needed.";
        assert!(run(t).is_clean());
        // After the reasoning block it is a leak again.
        let t = "<think>ok</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert_eq!(run(t).cleaned.as_deref(), Some("<think>ok</think>"));
    }

    #[test]
    fn a_v3_call_whose_opener_was_stripped_after_another_counts_only_for_an_enabled_tool() {
        let t = "function<｜tool▁sep｜>a\n```json\n{\"x\":1}\n```<｜tool▁call▁end｜>function<｜tool▁sep｜>b\n```json\n{\"y\":2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>Ok.";
        let names = |tools: &[&str]| -> Vec<String> {
            let d = crate::families::testing::detect_with(t, tools);
            d.calls_to_run().map(|(_, c)| c.name.clone()).collect()
        };
        assert_eq!(names(&["a", "b"]), ["a", "b"]);
        // `b` is not enabled: its stripped opener leaves it a weak marker, and it stays.
        assert_eq!(names(&["a"]), ["a"]);
    }

    #[test]
    fn many_candidates_do_not_panic() {
        let t = "<｜tool▁calls▁begin｜>x".repeat(500) + "<｜DSML｜invoke name=\"é";
        assert!(run(&t).is_clean());
    }
}

mod kimi {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Kimi, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_with(text, &[])
    }

    #[test]
    fn named_call_needs_no_enabled_tool() {
        let t = "Ok. <|tool_calls_section_begin|><|tool_call_begin|>functions.search:0 <|tool_call_argument_begin|>{\"q\": \"x\"}<|tool_call_end|><|tool_calls_section_end|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].name, "search");
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"q": "x"}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
    }

    #[test]
    fn bare_counter_needs_exactly_one_enabled_tool() {
        let t = "<|tool_calls_section_begin|><|tool_call_begin|>0 <|tool_call_argument_begin|>{\"q\": 1}<|tool_call_end|><|tool_calls_section_end|>";
        assert_eq!(run_with(t, &["only"]).leaks[0].calls[0].name, "only");
        assert!(run_with(t, &["a", "b"]).is_clean());
        assert!(run(t).is_clean());
    }

    #[test]
    fn prose_quoting_the_tokens_is_not_a_leak() {
        let t = "Kimi wraps calls in <|tool_calls_section_begin|> ... <|tool_calls_section_end|>, each call in <|tool_call_begin|> and <|tool_call_end|>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn inline_code_is_not_a_leak() {
        let t = "Use `<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>` as the format.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn truncated_arguments_are_not_a_leak() {
        let t = "Let me see. <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{\"a\": ";
        assert!(run(t).is_clean());
    }

    #[test]
    fn missing_section_end_only_at_end_of_text() {
        let t = "Hi <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|>  ";
        assert_eq!(run(t).cleaned.as_deref(), Some("Hi"));
        let t = "Hi <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|> more words";
        assert!(run(t).is_clean());
    }

    #[test]
    fn call_quoted_in_closed_think_is_kept() {
        let t = "<think>format: <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|></think>Plain answer.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn singular_section_spelling() {
        let t = "<|tool_call_section_begin|><|tool_call_begin|>functions.f:3<|tool_call_argument_begin|>{\"x\": [1]}<|tool_call_end|><|tool_call_section_end|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].name, "f");
        assert_eq!(d.cleaned.as_deref(), Some(""));
    }

    #[test]
    fn non_object_arguments_are_not_a_call() {
        let t = "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0 <|tool_call_argument_begin|>42<|tool_call_end|><|tool_calls_section_end|>";
        assert!(run(t).is_clean());
    }
}

mod plamo3 {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Plamo3, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_with(text, &[])
    }

    const CALL: &str = "<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>f<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>{\"a\": 1}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>";

    #[test]
    fn without_constrain_prefix() {
        let d = run(&format!("Hi {CALL} bye"));
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Hi  bye"));
    }

    #[test]
    fn truncated_request_is_prose() {
        let cut = &CALL[..CALL.find("<|plamo:end_tool_arguments").unwrap()];
        assert!(run(cut).is_clean());
    }

    #[test]
    fn prose_about_the_token_is_not_a_leak() {
        assert!(
            run("PLaMo opens with <|plamo:begin_tool_requests:plamo|> and lists requests.")
                .is_clean()
        );
    }
}

mod functiongemma {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Functiongemma, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
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
    fn a_missing_end_token_at_the_end_is_a_call_of_an_enabled_tool_only() {
        let t = "<start_function_call>call:search{query:<escape>rust<escape>}";
        assert!(run(t).is_clean());
        let d = run_only(Family::Functiongemma, t, &["search"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"query": "rust"}));
        let cut = "<start_function_call>call:search{query:<escape>ru";
        assert!(run_only(Family::Functiongemma, cut, &["search"]).is_clean());
        let prose_after = "<start_function_call>call:search{query:<escape>rust<escape>} and more";
        assert!(run_only(Family::Functiongemma, prose_after, &["search"]).is_clean());
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

mod gemma4 {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Gemma4, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_with(text, &[])
    }

    #[test]
    fn nested_and_typed_values() {
        let t = "Sure. <|tool_call>call:f{a:<|\"|>x, y<|\"|>,b:{c:[1,2,<|\"|>z<|\"|>]},d:false,e:-2.5}<tool_call|> Done.";
        let d = run(t);
        assert_eq!(
            d.leaks[0].calls[0].arguments,
            json!({"a": "x, y", "b": {"c": [1, 2, "z"]}, "d": false, "e": -2.5})
        );
        assert_eq!(d.cleaned.as_deref(), Some("Sure.  Done."));
    }

    #[test]
    fn delimited_numbers_stay_strings() {
        let t = "<|tool_call>call:f{zip:<|\"|>007<|\"|>,n:<|\"|>5<|\"|>}<tool_call|>";
        assert_eq!(
            run(t).leaks[0].calls[0].arguments,
            json!({"zip": "007", "n": "5"})
        );
    }

    #[test]
    fn unterminated_call_is_prose() {
        assert!(run("<|tool_call>call:f{a:1}").is_clean());
        assert!(run("<|tool_call>call:f{a:<|\"|>x}<tool_call|>").is_clean());
        assert!(run_with("<|tool_call>call:f{a:<|\"|>x", &["f"]).is_clean());
    }

    #[test]
    fn a_closer_cut_at_the_end_is_a_call_of_an_enabled_tool() {
        let d = run_with("Sure.\n<|tool_call>call:f{a:1}\n", &["f"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert_eq!(d.cleaned.as_deref(), Some("Sure."));
    }

    #[test]
    fn prose_about_the_token_is_not_a_leak() {
        let t = "Gemma 4 opens a call with <|tool_call> and closes it with <tool_call|>.";
        assert!(run(t).is_clean());
    }

    #[test]
    fn code_fence_is_not_a_leak() {
        let t = "```\n<|tool_call>call:f{a:1}<tool_call|>\n```";
        assert!(run(t).is_clean());
    }

    #[test]
    fn deep_nesting_is_rejected_without_overflow() {
        let t = format!(
            "<|tool_call>call:f{{a:{}1{}}}<tool_call|>",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(run(&t).is_clean());
    }
}
