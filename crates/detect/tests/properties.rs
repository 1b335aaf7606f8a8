//! Properties of `detect` over generated inputs: it never panics, text without any leak
//! marker is never touched, a leak in front of ordinary text cleans to that text, a leak
//! of any format between lines of text cleans to exactly those lines with none of its
//! control tokens left, switching families off only ever removes their own leaks, and a
//! verdict that did not ask for the tools holds whatever the tools are.

use proptest::prelude::*;
use toolcall_detect::{detect, Config, Family, Input};

fn run(text: &str, enabled: &[String]) -> toolcall_detect::Detection {
    detect(
        &Input {
            content: text,
            tools_used: &[],
            enabled_tools: enabled,
        },
        &Config::default(),
    )
}

fn enabled() -> Vec<String> {
    [
        "save_memory",
        "get_weather",
        "search",
        "read_file",
        "查询订单",
    ]
    .map(String::from)
    .to_vec()
}

/// Fragments of every family's markup, so random concatenations reach deep into parsers.
const FRAGMENTS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "\\",
    ":",
    ",",
    "\n",
    "```",
    "```json\n",
    "`",
    "[TOOL_CALLS]",
    "<invoke name=\"search\">",
    "<parameter name=\"q\">",
    "</parameter>",
    "</invoke>",
    "<minimax:tool_call>",
    "]<]minimax[>[",
    "<function=get_weather>",
    "<parameter=city>",
    "</function>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "success: true",
    "memory_type: 'journal'",
    "content: \"x\"",
    "get_weather(city='x')",
    "<|python_start|>",
    "<|python_tag|>",
    "<|eom_id|>",
    "<|eot_id|>",
    ".call(",
    "<function=search>",
    "<|start|>",
    "<|channel|>",
    "commentary to=functions.search",
    "<|constrain|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|tool_call:start|>",
    "<|tool_arg:start|>",
    "<|tool_arg:value|>",
    "<|tool_call:end|>",
    "<ifm|tool_call>",
    "<｜GCML｜tool_calls>",
    "<｜tool▁calls｜>",
    "é",
    "日本",
    "🎉",
    " ",
    "text",
    // Issue #20: stripped and respelled tokens, bare forms, named elements.
    "functions.get_weather:0",
    "get_weather",
    "search",
    "(",
    ")",
    "=",
    "\"Paris\"",
    "default_api:",
    "call:",
    "<ctrl46>",
    "<ctrl45>",
    "<read_file>",
    "<path>",
    "</path>",
    "</read_file>",
    "[TOOL_REQUEST]",
    "[END_TOOL_REQUEST]",
    "[tool_call: ",
    " for ",
    "to=functions.search",
    "json",
    "assistant",
    "commentary",
    "analysis",
    "{tool => \"search\", args => {",
    "--q \"v\"",
    "[TOOL_CALL]",
    "[/TOOL_CALL]",
    "查询订单",
    "<|tool▁sep|>",
    "<｜tool_calls_begin｜>",
    "<｜DSML｜invoke name=\"search\">",
    "</｜DSML｜invoke>",
    "<tool_response>",
    "</tool_response>",
    "function",
    "```json\n",
];

fn markup_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40).prop_map(|v| v.concat())
}

/// Prose that cannot contain a marker: no brackets, braces, angle brackets or backticks.
fn plain_prose() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 .,;:!?'\"()\\-\n\t éü日本🎉]{0,400}"
}

/// A leak whose removal must leave exactly the text after it.
fn leading_leak() -> impl Strategy<Value = String> {
    let content = "[A-Za-z ]{1,40}";
    prop_oneof![
        (
            content,
            prop::sample::select(vec!["journal", "fact", "goal"])
        )
            .prop_map(|(c, t)| {
                format!("{{success: true, memory_type: \"{t}\", content: \"{c}\"}}")
            }),
        content.prop_map(|c| format!(
            "{{\"success\": true, \"memory_type\": \"core\", \"content\": {}}}",
            serde_json::json!(c)
        )),
        Just("{\"success\": false, \"error\": \"quota\"}".to_string()),
        marked_leak(),
    ]
}

/// A leak with its own markers, which may stand anywhere in a message.
fn marked_leak() -> impl Strategy<Value = String> {
    let content = "[A-Za-z ]{1,40}";
    prop_oneof![
        content.prop_map(|c| format!(
            "<tool_call>{{\"name\": \"get_weather\", \"arguments\": {{\"city\": {}}}}}</tool_call>",
            serde_json::json!(c)
        )),
        content.prop_map(|c| format!(
            "[TOOL_CALLS][{{\"name\": \"search\", \"arguments\": {{\"q\": {}}}}}]",
            serde_json::json!(c)
        )),
        content.prop_map(|c| format!(
            "<minimax:tool_call><invoke name=\"search\"><parameter name=\"q\">{c}</parameter></invoke></minimax:tool_call>"
        )),
        content.prop_map(|c| format!(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{{\"q\": {}}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            serde_json::json!(c)
        )),
        content.prop_map(|c| format!(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0 <|tool_call_argument_begin|>{{\"q\": {}}}<|tool_call_end|><|tool_calls_section_end|>",
            serde_json::json!(c)
        )),
        content.prop_map(|c| format!(
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>{c}</arg_value></tool_call>"
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_markup_soup(text in markup_soup()) {
        let d = run(&text, &enabled());
        for leak in &d.leaks {
            prop_assert!(leak.span.end <= text.len());
        }
    }

    #[test]
    fn never_panics_on_any_string(text in any::<String>()) {
        let _ = run(&text, &enabled());
    }

    #[test]
    fn text_without_markers_is_untouched(text in plain_prose()) {
        let d = run(&text, &enabled());
        prop_assert!(d.is_clean());
        prop_assert_eq!(d.cleaned, None);
    }

    #[test]
    fn leak_then_text_cleans_to_text(leak in leading_leak(), text in "[A-Za-z][A-Za-z0-9 .,!?]{0,200}") {
        let message = format!("{leak}{text}");
        let d = run(&message, &enabled());
        prop_assert!(!d.is_clean(), "not detected: {}", message);
        prop_assert_eq!(d.cleaned.as_deref(), Some(text.trim()));
        // Exactly the leak's bytes are what the ledger would keep.
        prop_assert_eq!(&message[d.leaks[0].span.clone()], leak.as_str());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn text_then_leak_then_text_keeps_both_texts(
        before in "[A-Za-z][A-Za-z0-9 .,!?]{0,100}[.!?]",
        leak in marked_leak(),
        after in "( [A-Za-z][A-Za-z0-9 .,!?]{0,100})?",
    ) {
        let message = format!("{before}{leak}{after}");
        let d = run(&message, &enabled());
        prop_assert!(!d.is_clean(), "not detected: {}", message);
        let want = format!("{before}{after}");
        prop_assert_eq!(d.cleaned.as_deref(), Some(want.trim()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The worker calls a message clean from the event alone when detection with no tools is
    /// clean and says it did not ask for them: then no tool list may find a leak in it (a
    /// name-anchored format must ask for the tools wherever a candidate stands).
    #[test]
    fn a_verdict_that_did_not_ask_for_tools_holds_with_them(text in markup_soup()) {
        let none = run(&text, &[]);
        if none.is_clean() && !none.depends_on_tools {
            prop_assert!(run(&text, &enabled()).is_clean(), "{:?}", text);
        }
    }
}

/// A message mixing leaks of several families with markup soup between them.
fn mixed_message() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![marked_leak(), leading_leak(), markup_soup()],
        1..5,
    )
    .prop_map(|v| v.join(" and "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The operator's switch must be safe to flip: with any set of families disabled the
    /// result is the full result minus those families' leaks, never a different reading
    /// of the same markup by another family.
    #[test]
    fn disabling_families_only_subtracts_their_leaks(
        text in mixed_message(),
        off in prop::collection::vec(prop::sample::select(Family::ALL.to_vec()), 0..6),
    ) {
        let tools = enabled();
        let input = Input { content: &text, tools_used: &[], enabled_tools: &tools };
        let all = detect(&input, &Config::default());
        let config = off.iter().fold(Config::default(), |c, f| c.disable(*f));
        let some = detect(&input, &config);
        let expected: Vec<_> = all.leaks.iter().filter(|l| !off.contains(&l.family)).cloned().collect();
        prop_assert_eq!(&some.leaks, &expected);
        prop_assert_eq!(some.is_clean(), expected.is_empty());
    }
}

/// The case a proptest run found against the first version of the switch: with `hermes`
/// off, a more general family (bare JSON calls) claimed the object inside `<tool_call>` and
/// left the tags behind. Now the markup stays whole.
#[test]
fn disabling_hermes_leaves_its_markup_whole() {
    let text =
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}</tool_call>";
    let tools = enabled();
    let input = Input {
        content: text,
        tools_used: &[],
        enabled_tools: &tools,
    };
    assert!(!detect(&input, &Config::default()).is_clean());
    let off = detect(&input, &Config::default().disable(Family::Hermes));
    assert!(off.is_clean(), "{off:?}");
    assert_eq!(off.cleaned, None);
}

#[test]
fn huge_and_deep_inputs_finish() {
    let deep_braces = "{".repeat(100_000);
    let deep_brackets = format!("[TOOL_CALLS]{}", "[".repeat(100_000));
    let many_tags = "<tool_call>{\"name\": ".repeat(50_000);
    let big = "word ".repeat(2_000_000); // 10 MB
    let many_fences = "```\n<tool_call>\n".repeat(50_000);
    let many_ticks = "`a <tool_call> ".repeat(50_000);
    for t in [
        deep_braces,
        deep_brackets,
        many_tags,
        big,
        many_fences,
        many_ticks,
    ] {
        let _ = run(&t, &enabled());
    }
}

#[test]
fn truncated_markup_is_never_a_leak_of_its_prefix() {
    let full =
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
    // Every cut inside the JSON leaves an unparsable call: nothing may be removed. (The
    // opener alone is a reply of nothing but call markup, which goes: `dangling.rs`.)
    let json_end = full.find("</tool_call>").unwrap();
    for cut in "<tool_call>".len() + 1..json_end {
        let text = &full[..cut];
        assert!(run(text, &enabled()).is_clean(), "{text}");
    }
}

/// Control tokens of the formats below; none may survive the cleaning of a leak.
const CONTROL_TOKENS: &[&str] = &[
    "<|start|>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|eot|>",
    "<|im_end|>",
    "</s>",
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "[TOOL_CALL]",
    "[/TOOL_CALL]",
    "<function=",
    "</function>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call:start|>",
    "<|tool_call:end|>",
    "<ifm|tool_calls>",
    "</ifm|tool_calls>",
    "<｜GCML｜tool_calls>",
    "</｜GCML｜tool_calls>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<|tool_call>",
    "<tool_call|>",
];

/// One leak of a format with control tokens, and the text of its own that must stay
/// (Harmony keeps the analysis text; every other format keeps nothing).
fn tokened_leak() -> impl Strategy<Value = (String, String)> {
    let v = "[A-Za-z][A-Za-z ]{0,30}";
    let q = |s: &str| serde_json::json!(s).to_string();
    let none = |s: String| (s, String::new());
    prop_oneof![
        (v, v).prop_map(move |(t, c)| (
            format!("<|channel|>analysis<|message|>{t}<|end|><|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json<|message|>{{\"q\": {}}}<|call|>", q(&c)),
            t,
        )),
        v.prop_map(move |c| none(format!("<|channel|>commentary to=functions.search<|message|>{{\"q\": {}}}", q(&c)))),
        v.prop_map(move |c| none(format!("<|python_tag|>{{\"name\": \"search\", \"parameters\": {{\"q\": {}}}}}<|eom_id|>", q(&c)))),
        v.prop_map(move |c| none(format!("<|python_tag|>brave_search.call(query={})<|eom_id|>", q(&c)))),
        v.prop_map(move |c| none(format!("<|python_start|>{{\"name\": \"search\", \"parameters\": {{\"q\": {}}}}}<|python_end|><|eot|>", q(&c)))),
        v.prop_map(move |c| none(format!("<function=search>{{\"q\": {}}}</function><|eot_id|>", q(&c)))),
        v.prop_map(move |c| none(format!("[get_weather(city={})]<|eot_id|>", q(&c)))),
        v.prop_map(move |c| none(format!("<tool_call>{{\"name\": \"search\", \"args\": {{\"q\": {}}}}}</tool_call><|im_end|>", q(&c)))),
        v.prop_map(move |c| none(format!("[TOOL_CALLS][{{\"name\": \"search\", \"arguments\": {{\"q\": {}}}}}]</s>", q(&c)))),
        v.prop_map(move |c| none(format!("<｜tool▁call▁begin｜>search<｜tool▁sep｜>{{\"q\": {}}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", q(&c)))),
        v.prop_map(move |c| none(format!("<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{{\"q\": {}}}<|tool_call_end|><|tool_calls_section_end|>", q(&c)))),
        v.prop_map(move |c| none(format!("<|tool_call:start|>search\n<|tool_arg:start|>q<|tool_arg:value|>{c}<|tool_arg:end|>\n<|tool_call:end|>"))),
        v.prop_map(move |c| none(format!("<ifm|tool_calls><ifm|tool_call>search<ifm|arg_key>q</ifm|arg_key><ifm|arg_value>{c}</ifm|arg_value></ifm|tool_call></ifm|tool_calls>"))),
        v.prop_map(move |c| none(format!("<｜GCML｜tool_calls><｜GCML｜invoke name=\"search\"><｜GCML｜parameter name=\"q\" string=\"true\">{c}</｜GCML｜parameter></｜GCML｜invoke></｜GCML｜tool_calls>"))),
        v.prop_map(move |c| none(format!("<minimax:tool_call><invoke name=\"search\"><parameter name=\"q\">{c}</parameter></invoke></minimax:tool_call>"))),
        v.prop_map(move |c| none(format!("<|tool_call>call:search{{q:<|\"|>{c}<|\"|>}}<tool_call|>"))),
        v.prop_map(move |c| none(format!("{{\"name\": \"search\", \"arguments\": {{\"q\": {}}}}}\n</tool_call>", q(&c)))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// No residue: a leak of any format between two lines of text cleans to exactly
    /// those lines (and the text the format keeps), and none of its control tokens stays.
    #[test]
    fn a_leak_between_lines_leaves_no_control_token(
        before in "[A-Za-z][A-Za-z0-9 ,]{0,60}[.!?]",
        (leak, kept) in tokened_leak(),
        after in "[A-Z][A-Za-z0-9 ,]{0,60}[.!?]",
    ) {
        let message = format!("{before}\n{leak}\n{after}");
        let d = run(&message, &enabled());
        prop_assert!(!d.is_clean(), "not detected: {}", message);
        let want = format!("{before}\n{kept}\n{after}");
        let cleaned = d.cleaned.clone().unwrap_or_default();
        prop_assert_eq!(cleaned.as_str(), want.trim(), "{}", message);
        for tok in CONTROL_TOKENS {
            prop_assert!(!cleaned.contains(tok), "{} left in {:?}", tok, cleaned);
        }
    }
}
