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
