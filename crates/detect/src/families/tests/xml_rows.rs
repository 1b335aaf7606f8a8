//! The table's rows of XML-ish and key/value markup, each checked through its family's detectors alone
//! (formerly each family's own unit tests, kept when the families became rows).

use super::super::testing::run_only;
use crate::Family;

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
    fn a_call_whose_closer_was_cut_at_the_end_needs_its_tool() {
        // `</tool_call>` is a stop sequence on some stacks: the last value closed at the end
        // of the text is a whole call of an enabled tool.
        let t = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n";
        let d = run(t, &["f"]);
        assert_eq!(d.leaks[0].calls[0].arguments, json!({"a": 1}));
        assert!(run(t, &["g"]).is_clean());
        let cut = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1";
        assert!(run(cut, &["f"]).is_clean());
        let prose = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\nThen more.";
        assert!(run(prose, &["f"]).is_clean());
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
