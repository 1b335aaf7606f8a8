//! The net's classes, each written from a format's structure with its spelling changed
//! (issue #30), through the whole of `detect`, and the negatives beside them.

use crate::families::testing::detect_with;
use serde_json::{json, Value};

fn one(text: &str, tools: &[&str]) -> (String, Vec<(String, Value)>) {
    let d = detect_with(text, tools);
    let calls = d
        .leaks
        .iter()
        .flat_map(|l| l.calls.iter())
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    (d.cleaned.unwrap_or_else(|| text.to_string()), calls)
}

fn call(name: &str, args: Value) -> Vec<(String, Value)> {
    vec![(name.to_string(), args)]
}

#[test]
fn a_space_inside_the_tokens() {
    let t = "Checking.\n<| tool_call_begin |>functions.get_weather:0<| tool_call_argument_begin |>{\"city\": \"Oslo\"}<| tool_call_end |>";
    assert_eq!(
        one(t, &["get_weather"]),
        (
            "Checking.".into(),
            call("get_weather", json!({"city": "Oslo"}))
        )
    );
}

#[test]
fn a_changed_word_in_the_wrapper() {
    let t =
        "Sure.\n<toolcall>\n{\"name\": \"search\", \"arguments\": {\"q\": \"rust\"}}\n</toolcall>";
    assert_eq!(
        one(t, &["search"]),
        ("Sure.".into(), call("search", json!({"q": "rust"})))
    );
}

#[test]
fn typographic_quotes_around_attribute_values() {
    let t = "<invoke name=“read_file”>\n<parameter name=“path”>a.txt</parameter>\n</invoke>";
    assert_eq!(
        one(t, &["read_file"]),
        (String::new(), call("read_file", json!({"path": "a.txt"})))
    );
}

#[test]
fn a_tool_named_element_in_a_namespace() {
    let t = "Saving it.\n<｜DSML｜save_memory>\n<｜DSML｜content>likes tea</｜DSML｜content>\n</｜DSML｜save_memory>";
    assert_eq!(
        one(t, &["save_memory"]),
        (
            "Saving it.".into(),
            call("save_memory", json!({"content": "likes tea"}))
        )
    );
}

#[test]
fn the_name_as_a_child_element() {
    let t = "<function><name>get_time</name><tz>CET</tz></function> Done.";
    assert_eq!(
        one(t, &["get_time"]),
        ("Done.".into(), call("get_time", json!({"tz": "CET"})))
    );
}

#[test]
fn a_parameter_as_a_self_closing_element() {
    let t = "<tool_call name=\"get_weather\">\n  <parameter name=\"city\" value=\"Rome\"/>\n</tool_call>";
    assert_eq!(
        one(t, &["get_weather"]),
        (String::new(), call("get_weather", json!({"city": "Rome"})))
    );
}

#[test]
fn a_json_call_in_attribute_position() {
    let t = "On it. <functioncall {\"name\": \"lookup\", \"arguments\": {\"id\": 7}}>";
    assert_eq!(
        one(t, &["lookup"]),
        ("On it.".into(), call("lookup", json!({"id": 7})))
    );
}

#[test]
fn one_openers_with_another_formats_parameters() {
    let t = "<tool_call>\n<function=search>\n<arg_key>q</arg_key>\n<arg_value>cats</arg_value>\n</function>\n</tool_call>";
    assert_eq!(
        one(t, &["search"]),
        (String::new(), call("search", json!({"q": "cats"})))
    );
}

#[test]
fn a_json_call_inside_an_invoke_then_an_orphan_closer() {
    let t = "Let me check.\n<invoke>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}</invoke>\n</tool_call>";
    assert_eq!(
        one(t, &["get_weather"]),
        (
            "Let me check.".into(),
            call("get_weather", json!({"city": "Lima"}))
        )
    );
}

#[test]
fn a_lost_closing_bracket_on_the_opener() {
    let t = "<｜DSML｜function_calls\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"q\" string=\"true\">tea</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    assert_eq!(
        one(t, &["search"]),
        (String::new(), call("search", json!({"q": "tea"})))
    );
}

#[test]
fn not_enabled_means_not_a_call() {
    let t = "<function><name>get_time</name><tz>CET</tz></function> Done.";
    assert!(one(t, &["other"]).1.is_empty());
    assert_eq!(one(t, &["other"]).0, t);
}

#[test]
fn markup_in_code_is_an_example() {
    let t = "Write it like this:\n```\n<toolcall>{\"name\": \"search\", \"arguments\": {}}</toolcall>\n```";
    assert!(one(t, &["search"]).1.is_empty());
    let t = "The tag `<function><name>search</name><q>x</q></function>` is what the model sends.";
    assert!(one(t, &["search"]).1.is_empty());
}

#[test]
fn a_cut_value_is_not_read() {
    let t = "<invoke name=\"write_file\">\n<parameter name=\"content\">half of the fi";
    assert!(one(t, &["write_file"]).1.is_empty());
}

#[test]
fn html_that_names_a_tool_in_prose_is_prose() {
    let t = "<p>Use <b>search</b> to look things up.</p>";
    assert!(one(t, &["search"]).1.is_empty());
    let t = "The <search> element holds a form.";
    assert!(one(t, &["search"]).1.is_empty());
}

#[test]
fn a_nested_element_is_not_a_call_of_its_own() {
    let t = "<tool_call>\n<function><name>save_note</name><text>hi</text></function>\n</tool_call>";
    let (cleaned, calls) = one(t, &["save_note"]);
    assert_eq!(cleaned, "");
    assert_eq!(calls, call("save_note", json!({"text": "hi"})));
}

#[test]
fn the_probe_finds_a_call_word_anywhere_in_a_name_s_first_forty_bytes() {
    let probe = |t: &str| super::probe(t.as_bytes(), 0);
    for t in [
        "<tool_call>",
        "<TOOL-CALLS",
        "</ToolCall>",
        "<minimax:tool_call>",
        "<my_function>",
        "<invoke name",
        "<abcdefghijklmnopqrstuvwxyz_0123456_call>",
        "<|x|>",
        "<｜DSML｜",
        // One space a tokenizer put after the `<`.
        "< tool_call>",
        "< /tool_call>",
    ] {
        assert!(probe(t), "{t}");
    }
    for t in [
        "<div>",
        "<p>",
        "<cal>",
        "<ca ll>",
        "<abcdefghijklmnopqrstuvwxyz_012345678_call>",
        "<  tool_call>",
        "<1call>",
        "<cal_l>",
        "<tоol>",
    ] {
        assert!(!probe(t), "{t}");
    }
}
