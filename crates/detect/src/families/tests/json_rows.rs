//! The table's rows whose calls are JSON objects, each checked through its family's detectors alone
//! (formerly each family's own unit tests, kept when the families became rows).

use super::super::testing::run_only;
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
    fn an_action_cut_at_the_end_is_a_call_a_broken_one_prose() {
        // `<|END_ACTION|>` taken by a stop sequence: the list says by itself it is whole.
        let d = run("<|START_ACTION|>[{\"tool_name\": \"foo\", \"parameters\": {}}]");
        assert_eq!(d.leaks[0].calls[0].name, "foo");
        assert!(
            run("<|START_ACTION|>[{\"tool_name\": \"foo\", \"parameters\": {}}] then").is_clean()
        );
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
        // Only the list's final `]` may be missing (at the end), not a value's end.
        assert_eq!(
            run(r#"<|tool_call|> [{"name": "f", "arguments": {}}"#).leaks[0].calls[0].name,
            "f"
        );
        assert!(run(r#"<|tool_call|> [{"name": "f", "arguments": {}},"#).is_clean());
        assert!(run(r#"<|tool_call|> [{"name": "f", "argu"#).is_clean());
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
    fn missing_end_at_end_of_text_or_before_text_for_enabled_tools() {
        let t = "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {}}";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some(""));
        // Issue #20 round 3: the closer dropped and text after the complete call: the
        // opener goes with the call (an enabled tool's), the text stays.
        let t = "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {}} more";
        assert_eq!(run(t, &["f"]).cleaned.as_deref(), Some("more"));
        assert!(run(t, &["g"]).is_clean());
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
