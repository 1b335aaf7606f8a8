//! The finder's cases: each shape found, and the prose and other tools that must stay.

use serde_json::json;

fn run(text: &str, tools: &[&str]) -> crate::Detection {
    super::super::testing::detect_with(text, tools)
}

#[test]
fn stripped_tokens_leave_a_name_and_its_object() {
    let d = run(
        "Let me look.functions.read_file:0{\"path\": \"a.md\"}",
        &["read_file"],
    );
    assert_eq!(d.leaks[0].calls[0].name, "read_file");
    assert_eq!(d.cleaned.as_deref(), Some("Let me look."));
    let d = run("get_weather{\"city\": \"Paris\"}", &["get_weather"]);
    assert_eq!(d.leaks[0].calls[0].arguments, json!({"city": "Paris"}));
}

#[test]
fn a_name_on_its_line_then_an_object() {
    let d = run(
        "I'll check.\nget_weather\n{\"city\": \"Paris\"}",
        &["get_weather"],
    );
    assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
}

#[test]
fn bare_python_calls_on_the_edge_lines() {
    let d = run(
        "get_weather(city=\"Paris\")\nLet me check.",
        &["get_weather"],
    );
    assert_eq!(d.cleaned.as_deref(), Some("Let me check."));
    let d = run("I'll check.\nget_weather(city=\"Paris\")", &["get_weather"]);
    assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
    // A bare call opens its line, or follows a sentence's end on the last line and ends
    // the message (a look over that one line, only when the message ends with `)`).
    // Anywhere else in a line it is looked for nowhere: the clean path would have to scan
    // every line.
    let d = run("I'll check. get_weather(city=\"Paris\")", &["get_weather"]);
    assert_eq!(d.cleaned.as_deref(), Some("I'll check."));
    let d = run("Noted!get_weather(city=\"Paris\")\n", &["get_weather"]);
    assert_eq!(d.cleaned.as_deref(), Some("Noted!"));
    assert!(run("I'll check get_weather(city=\"Paris\")", &["get_weather"]).is_clean());
    assert!(run(
        "I'll check. get_weather(city=\"Paris\") now.",
        &["get_weather"]
    )
    .is_clean());
    assert!(run("Done. get_weather(city=\"Paris\")", &["search"]).is_clean());
    let d = run("a(x=1)\nb(y=2)\nc(z=3)", &["a", "b", "c"]);
    assert_eq!(d.leaks.iter().map(|l| l.calls.len()).sum::<usize>(), 3);
    // One bare call of an enabled tool and nothing else is a call (an empty argument
    // list too, there only); of another tool, or with text after it, it stays.
    let d = run("get_weather(city=\"Paris\")", &["get_weather"]);
    assert_eq!(d.cleaned.as_deref(), Some(""));
    let d = run(" list_files()\n<|eot_id|>", &["list_files"]);
    assert_eq!(d.leaks[0].calls[0].name, "list_files");
    assert!(run("get_weather(city=\"Paris\")", &["search"]).is_clean());
    assert!(run("list_files()", &["search"]).is_clean());
    assert!(run("list_files() is empty", &["list_files"]).is_clean());
    assert!(run("Run it.\nlist_files()", &["list_files"]).is_clean());
}

#[test]
fn prose_and_other_tools_stay() {
    let tools = &["search", "get_weather"];
    for t in [
        "You can call get_weather(city=\"Paris\") to do it.",
        "Use search {\"q\": \"x\"} to find it.",
        "other{\"a\": 1}",
        "get_weather(\"Paris\")",
        "main() is where it starts",
        "search\n{\"q\": \"x\"",
    ] {
        assert!(run(t, tools).is_clean(), "{t}");
    }
}

#[test]
fn the_tools_are_asked_only_for_a_complete_candidate() {
    let d = run("A plain answer (with parentheses) and {braces}.", &[]);
    assert!(!d.depends_on_tools);
    let d = run("Checking.\nget_weather(city=\"Paris\")", &[]);
    assert!(d.depends_on_tools && d.is_clean());
}

#[test]
fn a_bracketed_closer_ends_a_bare_call_at_the_reply_end() {
    // A front end's labels around a bare call (`[TOOL_CALL]` .. `[/TOOL_CALL]`): the closer
    // ends the reply as `</tool_call>` does, and the labels go with the call. Read where the
    // prefilter looks, at the reply's end, like the angle-bracket closers.
    let t = "Let me check.\n[TOOL_CALL]\nget_weather(city=\"Paris\", days=3)\n[/TOOL_CALL]";
    let d = run(t, &["get_weather"]);
    assert_eq!(
        d.leaks[0].calls[0].arguments,
        json!({"city": "Paris", "days": 3})
    );
    assert_eq!(d.cleaned.as_deref(), Some("Let me check."));
    // A citation's bracket, or a closer after prose, is text.
    assert!(run("See the appendix [1]", &["get_weather"]).is_clean());
    assert!(run("Noted [/TOOL_CALL]", &["get_weather"])
        .leaks
        .iter()
        .all(|l| l.calls.is_empty()));
}

#[test]
fn a_special_token_before_a_name_line_is_the_calls_markup() {
    // GLM-4's template writes `<|assistant|>` before each call's name line.
    let t = "get_weather\n{\"city\": \"Paris\"}<|assistant|>get_weather\n{\"city\": \"Lyon\"}<|observation|>";
    let d = run(t, &["get_weather"]);
    let calls: Vec<_> = d.leaks.iter().flat_map(|l| &l.calls).collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].arguments, json!({"city": "Lyon"}));
    assert_eq!(d.cleaned.as_deref(), Some(""));
}
