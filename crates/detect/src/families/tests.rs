//! The table's formats, each checked through the whole of `detect` (formerly each family's
//! own unit tests, kept when the families became rows).

use super::testing::run_only;
use crate::Family;

mod cohere {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Cohere, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_with(text, &[])
    }

    #[test]
    fn action_block_after_thinking() {
        let t = "<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"foo\", \"parameters\": {\"q\": 1}}]<|END_ACTION|>";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"q": 1}));
        assert_eq!(
            d.cleaned.as_deref(),
            Some("<|START_THINKING|>plan<|END_THINKING|>")
        );
    }

    #[test]
    fn unclosed_or_broken_action_is_prose() {
        assert!(run("<|START_ACTION|>[{\"tool_name\": \"foo\", \"parameters\": {}}]").is_clean());
        assert!(
            run("<|START_ACTION|>[{\"tool_name\": \"foo\", \"parameters\": {]<|END_ACTION|>")
                .is_clean()
        );
        assert!(run("<|START_ACTION|>[{\"name\": \"foo\"}]<|END_ACTION|>").is_clean());
    }

    #[test]
    fn prose_about_the_tokens_is_not_a_leak() {
        let t = "Command R wraps actions in <|START_ACTION|> and <|END_ACTION|>.";
        assert!(run(t).is_clean());
    }
}

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
    fn many_candidates_do_not_panic() {
        let t = "<｜tool▁calls▁begin｜>x".repeat(500) + "<｜DSML｜invoke name=\"é";
        assert!(run(&t).is_clean());
    }
}

mod dots {
    use super::{run_only, Family};

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        run_only(Family::Dots, text, enabled)
    }

    #[test]
    fn unknown_tool_is_kept_everywhere() {
        let t = "<dots_function_call><invoke name=\"ghost\"><parameter name=\"q\">x</parameter></invoke></dots_function_call>";
        assert!(run(t, &["search"]).is_clean());
        assert_eq!(run(t, &["ghost"]).leaks.len(), 1);
    }

    #[test]
    fn garbage_block_is_kept() {
        let t = "<dots_function_call>garbage</dots_function_call>";
        assert!(run(t, &["search"]).is_clean());
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

mod gigachat3 {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Gigachat3, text, tools)
    }

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        run_with(text, tools)
    }

    #[test]
    fn requires_an_enabled_tool() {
        let t = "<|function_call|>{\"name\": \"f\", \"arguments\": {}}";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some(""));
        assert!(run(t, &[]).is_clean());
    }

    #[test]
    fn header_without_function_call_is_not_a_leak() {
        let t = "<|message_sep|>\n\nassistant<|role_sep|>\n{\"name\": \"f\", \"arguments\": {}}";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn broken_json_is_not_a_leak() {
        let t = "<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"f\", \"arguments\": {";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn text_after_the_object_stays() {
        let t = "Ok.<|function_call|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</s> Bye.";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some("Ok. Bye."));
    }
}

mod glm {
    use super::{run_only, Family};
    use serde_json::json;

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        run_only(Family::Glm, text, enabled)
    }

    #[test]
    fn call_with_args_needs_no_enabled_tool() {
        let t = "Ok.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> New York </arg_value>\n</tool_call>";
        let d = run(t, &[]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"city": " New York "}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok."));
    }

    #[test]
    fn zero_arg_call_needs_the_tool() {
        let t = "Wrap the tool's name like <tool_call>name</tool_call> and you are done.";
        assert!(run(t, &["get_time"]).is_clean());
        assert_eq!(
            run("<tool_call>get_time</tool_call>", &["get_time"])
                .leaks
                .len(),
            1
        );
    }

    #[test]
    fn unclosed_call_is_kept() {
        let t = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn prose_inside_is_kept() {
        let t = "<tool_call>f\nthen I thought about it\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn fenced_example_is_kept() {
        let t = "GLM writes:\n```\n<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>\n```";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn many_open_tags_stay_cheap() {
        let t = "<tool_call>f\n<arg_key>a</arg_key><arg_value>".repeat(20_000);
        assert!(run(&t, &["f"]).is_clean());
        let t = format!("{}</tool_call>", "<tool_call>f <arg_key>a".repeat(20_000));
        assert!(run(&t, &["f"]).is_clean());
    }
}

mod granite {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Granite, text, &[])
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

mod granite_20b_fc {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Granite20bFc, text, &[])
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

mod hermes {
    use super::{run_only, Family};
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Hermes, text, &[])
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

mod hunyuan {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Hunyuan, text, &[])
    }

    #[test]
    fn finds_the_block_and_keeps_prose() {
        let d = run(
            "<tool_calls>[{\"name\": \"f\", \"arguments\": {\"city\": \"北京\"}}]</tool_calls>\nThanks",
        );
        assert_eq!(d.cleaned.as_deref(), Some("Thanks"));
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run(r#"<tool_calls>[{"name": "f", "arguments": {}}"#).is_clean());
        assert!(run("<tool_calls>[]</tool_calls>").is_clean());
    }
}

mod hy_v3 {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::HyV3, text, tools)
    }
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_with(text, &[])
    }

    #[test]
    fn typed_values_and_text_around() {
        let t = "Checking.\n<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>\n<arg_key>s</arg_key><arg_value>a b</arg_value>\n</tool_call>\n</tool_calls>\nDone.";
        let d = run(t);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"n": 3, "s": "a b"}));
        assert_eq!(d.cleaned.as_deref(), Some("Checking.\n\nDone."));
    }

    #[test]
    fn unclosed_call_is_prose() {
        let t =
            "<tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>n</arg_key>\n<arg_value>3</arg_value>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn key_without_value_is_prose() {
        let t = "<tool_calls><tool_call>f<tool_sep><arg_key>n</arg_key></tool_call></tool_calls>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn prose_mentioning_tags_is_not_a_leak() {
        let t = "Hy3 wraps calls in <tool_calls> and separates the name with <tool_sep>.";
        assert!(run(t).is_clean());
    }
}

mod internlm {

    use super::{run_only, Family};

    fn run_with(text: &str, tools: &[&str]) -> crate::Detection {
        run_only(Family::Internlm, text, tools)
    }

    fn run(text: &str, tools: &[&str]) -> crate::Detection {
        run_with(text, tools)
    }

    #[test]
    fn enabled_tool_is_a_leak_unknown_is_not() {
        let t = "Ok <|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}<|action_end|> done";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some("Ok  done"));
        assert!(run(t, &["g"]).is_clean());
    }

    #[test]
    fn interpreter_action_is_not_a_call() {
        let t = "<|action_start|><|interpreter|>print(1)<|action_end|>";
        assert!(run(t, &["f"]).is_clean());
    }

    #[test]
    fn missing_end_only_at_end_of_text() {
        let t = "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {}}";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some(""));
        let t = "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {}} more";
        assert!(run(t, &["f"]).is_clean());
    }
}

mod jamba {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Jamba, text, &[])
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

mod longcat {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Longcat, text, &[])
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

mod minicpm5 {
    use super::{run_only, Family};

    fn run(text: &str, enabled: &[&str]) -> crate::Detection {
        run_only(Family::Minicpm5, text, enabled)
    }

    #[test]
    fn html_like_function_tags_are_kept() {
        let t = "In the XML config:\n<function name=\"render\"><param name=\"size\">12</param></function>\nThat sets the size.";
        assert!(run(t, &["get_weather"]).is_clean());
    }

    #[test]
    fn enabled_tool_is_a_leak() {
        let t = "Intro\n<function name=\"get_weather\"><param name=\"city\">Paris</param></function>\nOutro";
        let d = run(t, &["get_weather"]);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some("Intro\n\nOutro"));
    }

    #[test]
    fn param_without_name_invalidates() {
        let t = "<function name=\"get_weather\"><param>x</param></function>";
        assert!(run(t, &["get_weather"]).is_clean());
    }
}

mod nemotron_json {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::NemotronJson, text, &[])
    }

    #[test]
    fn finds_the_block_and_keeps_prose() {
        let d =
            run(r#"Let me check.<TOOLCALL>[{"name": "f", "arguments": "{\"q\": 1}"}]</TOOLCALL>"#);
        assert_eq!(d.cleaned.as_deref(), Some("Let me check."));
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run(r#"<TOOLCALL>[{"name": "broken", "arguments": {}</TOOLCALL>"#).is_clean());
        assert!(run(r#"<TOOLCALL>{"name": "f"}</TOOLCALL>"#).is_clean());
    }
}

mod olmo3 {
    use super::{run_only, Family};
    use serde_json::json;

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Olmo3, text, &[])
    }

    #[test]
    fn calls_one_per_line() {
        let d = run("Ok.\n<function_calls>f(a='x', b=null)\ng()</function_calls>\nBye");
        assert_eq!(d.leaks[0].calls.len(), 2);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": "x", "b": null}));
        assert_eq!(d.cleaned.as_deref(), Some("Ok.\n\nBye"));
    }

    #[test]
    fn broken_blocks_stay() {
        assert!(run("<function_calls>foo(x=1])</function_calls>").is_clean());
        assert!(run("<function_calls>f(a=1)").is_clean());
        assert!(run("<function_calls></function_calls>").is_clean());
        assert!(run("<function_calls>f('positional')</function_calls>").is_clean());
    }
}

mod pangu {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Pangu, text, &[])
    }

    #[test]
    fn finds_the_block_and_keeps_prose() {
        let d = run(
            "some content\n<|tool_call_start|>\n[{\"name\": \"f\", \"arguments\": {}}]\n<|tool_call_end|>",
        );
        assert_eq!(d.cleaned.as_deref(), Some("some content"));
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run(r#"<|tool_call_start|>[{"name": "f", "arguments": {}}]"#).is_clean());
        assert!(run("<|tool_call_start|>[{\"a\": 1}]<|tool_call_end|>x").is_clean());
    }
}

mod phi4mini {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Phi4mini, text, &[])
    }

    #[test]
    fn finds_the_block_and_keeps_prose() {
        let d = run(
            "Let me check.\nfunctools[{\"name\": \"f\", \"arguments\": {\"city\": \"Tokyo\"}}]\nMore?",
        );
        assert_eq!(
            d.cleaned.as_deref(),
            Some(
                "Let me check.

More?"
            )
        );
        assert_eq!(d.leaks[0].calls[0].name, "f");
    }

    #[test]
    fn unparsable_or_non_call_json_stays() {
        assert!(run("Use functools[0] carefully").is_clean());
        assert!(run("import functools\nfunctools.reduce(f, [1, 2])").is_clean());
        assert!(run(r#"functools[{"name": "f"}]"#).is_clean());
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

mod qwen25_coder {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Qwen25Coder, text, &[])
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

mod step3 {
    use super::{run_only, Family};

    fn run(text: &str) -> crate::Detection {
        run_only(Family::Step3, text, &[])
    }

    #[test]
    fn truncated_block_is_kept() {
        let t = "<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"f\"><steptml:parameter name=\"a\">1</steptml:parameter>";
        assert!(run(t).is_clean());
    }

    #[test]
    fn block_missing_end_token_at_end_is_a_leak() {
        let t = "Hi <｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name=\"f\"></steptml:invoke><｜tool_call_end｜>";
        let d = run(t);
        assert_eq!(d.leaks.len(), 1);
        assert_eq!(d.cleaned.as_deref(), Some("Hi"));
    }
}
