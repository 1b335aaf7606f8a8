//! Unit tests of the `scan` command (`cmd/scan.rs`), apart so that the module reads in one
//! sitting.
//!
//! May depend on: the parent `scan`, `settings` (the detection settings it is given).

use super::*;

fn args(files: Vec<PathBuf>, jsonl: bool) -> ScanArgs {
    ScanArgs {
        files,
        jsonl,
        enabled_tools: vec!["save_memory".into()],
        detect: crate::settings::DetectSettings {
            memory_types: vec!["journal".into(), "fact".into()],
            families_disabled: crate::settings::FamilyList::default(),
        },
        leaks_only: false,
        stats: false,
        explain: false,
    }
}

/// A scratch directory removed when the test that made it ends, pass or fail.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_file(name: &str, body: &[u8]) -> (Scratch, PathBuf) {
    let dir = std::env::temp_dir().join(format!("tcr-scan-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(body)
        .unwrap();
    (Scratch(dir), path)
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn plain_file_is_one_message() {
    let (_dir, f) = temp_file(
        "leak.txt",
        b"{success: true, memory_type: 'fact', content: 'tea'}Noted.",
    );
    let mut out = Vec::new();
    let s = run(&args(vec![f], false), &mut out).unwrap();
    assert_eq!((s.messages, s.with_leaks, s.unreadable), (1, 1, 0));
    let v = &lines(&out)[0];
    assert_eq!(v["cleaned"], "Noted.");
    assert_eq!(v["leaks"][0]["calls"][0]["name"], "save_memory");
    assert_eq!(
        v["leaks"][0]["removed"],
        "{success: true, memory_type: 'fact', content: 'tea'}"
    );
}

#[test]
fn jsonl_lines_carry_their_own_tools_and_ids() {
    let body = concat!(
        r#"{"id": 7, "content": "```json\n{\"tool\": \"write_file\", \"parameters\": {\"path\": \"a\"}}\n```\nDone.", "enabled_tools": ["write_file"]}"#,
        "\n",
        r#"{"id": 8, "content": "Just prose."}"#,
        "\n"
    );
    let (_dir, f) = temp_file("m.jsonl", body.as_bytes());
    let mut out = Vec::new();
    let s = run(&args(vec![f], true), &mut out).unwrap();
    assert_eq!((s.messages, s.with_leaks), (2, 1));
    let v = lines(&out);
    assert_eq!(v[0]["id"], 7);
    assert_eq!(v[0]["families"][0], "json_fence");
    assert_eq!(v[1]["clean"], true);
}

#[test]
fn unreadable_inputs_are_counted_not_fatal() {
    let (_dir1, bad_utf8) = temp_file("bad.txt", b"\xff\xfe oops");
    let (_dir2, bad_line) = temp_file(
        "bad.jsonl",
        b"{\"content\": 5}\nnot json\n{\"content\": \"ok\"}\n",
    );
    let missing = PathBuf::from("/nonexistent/tcr-scan-input");
    let mut out = Vec::new();
    let s = run(&args(vec![bad_utf8, missing], false), &mut out).unwrap();
    assert_eq!((s.messages, s.unreadable), (0, 2));
    let mut out = Vec::new();
    let s = run(&args(vec![bad_line], true), &mut out).unwrap();
    assert_eq!((s.messages, s.unreadable), (1, 2));
}

#[test]
fn other_roles_are_never_leaks_and_text_is_read_as_content() {
    let leak = r#"<tool_call>{\"name\": \"save_memory\", \"arguments\": {\"content\": \"tea\", \"memory_type\": \"fact\"}}</tool_call>"#;
    let body = format!(
        "{{\"id\": 1, \"role\": \"user\", \"content\": \"{leak}\"}}\n\
         {{\"id\": 2, \"role\": \"tool\", \"content\": \"{leak}\"}}\n\
         {{\"id\": 3, \"role\": \"assistant\", \"text\": \"{leak}\"}}\n"
    );
    let (_dir, f) = temp_file("roles.jsonl", body.as_bytes());
    let mut out = Vec::new();
    let s = run(&args(vec![f], true), &mut out).unwrap();
    assert_eq!((s.messages, s.with_leaks, s.not_assistant), (3, 1, 2));
    let v = lines(&out);
    assert_eq!(v[0]["clean"], true);
    assert_eq!(v[1]["clean"], true);
    assert_eq!(v[2]["families"][0], "hermes");
}

#[test]
fn explain_says_why_a_leak_was_missed() {
    let body = concat!(
        r#"{"id": 1, "content": "Done.\nget_weather(city=\"Paris\")", "enabled_tools": ["search"]}"#,
        "\n",
        r#"{"id": 2, "content": "Just prose."}"#,
        "\n",
        r#"{"id": 3, "content": "<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>"}"#,
        "\n",
    );
    let (_dir, f) = temp_file("explain.jsonl", body.as_bytes());
    let mut a = args(vec![f], true);
    a.explain = true;
    let mut out = Vec::new();
    run(&a, &mut out).unwrap();
    let v = lines(&out);
    // A bare call of a tool the agent does not have: the detector ran and says so.
    assert_eq!(v[0]["clean"], true);
    let steps = v[0]["explain"]["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| s["verdict"] == "declined"
                && s["why"].as_str().unwrap().contains("`get_weather`")),
        "{steps:?}"
    );
    // No marker at all: the prefilter alone decided.
    assert_eq!(v[1]["explain"]["detectors"], json!([]));
    // A leak taken, with its calls.
    let steps = v[2]["explain"]["steps"].as_array().unwrap();
    assert!(steps
        .iter()
        .any(|s| s["verdict"] == "taken" && s["calls"][0]["name"] == "search"));
}

#[test]
fn stats_count_leaks_by_family_and_what_recovery_would_do() {
    let body = concat!(
        r#"{"content": "{success: true, memory_type: 'fact', content: 'tea'}Noted."}"#,
        "\n",
        r#"{"content": "{success: true, memory_type: 'nope', content: 'tea'}Noted."}"#,
        "\n",
        r#"{"content": "<tool_call>{\"name\": \"web_search\", \"arguments\": {}}</tool_call>", "enabled_tools": ["web_search"]}"#,
        "\n",
        r#"{"content": "Just prose."}"#,
        "\n",
        r#"{"role": "user", "content": "{success: true}"}"#,
        "\n",
    );
    let (_dir, f) = temp_file("stats.jsonl", body.as_bytes());
    let mut a = args(vec![f], true);
    a.stats = true;
    let mut out = Vec::new();
    let s = run(&a, &mut out).unwrap();
    let v = lines(&out);
    assert_eq!(v.len(), 1, "one summary, no per-message lines");
    let v = &v[0];
    assert_eq!(v["messages"], 5);
    assert_eq!(v["with_leaks"], 3);
    assert_eq!(v["not_assistant"], 1);
    assert_eq!(v["leaks_by_family"]["result_prefix"], 2);
    assert_eq!(v["leaks_by_family"]["hermes"], 1);
    assert_eq!(v["messages_by_outcome"]["recovered"], 1);
    assert_eq!(v["messages_by_outcome"]["invalid_args"], 1);
    assert_eq!(v["messages_by_outcome"]["forwarded"], 1);
    assert_eq!(v["messages_by_outcome"]["clean"], 2);
    assert_eq!(s.calls_by_outcome.values().sum::<usize>(), 3);
}

#[test]
fn explain_names_the_matched_marker_and_every_detector_that_ran_says_why() {
    // Both are JSON that starts like a call of an enabled tool and is not one.
    let body = concat!(
        r#"{"id": 1, "content": "```json\n{\"tool\": \"search\", \"query\": \"x\"}\n```", "enabled_tools": ["search"]}"#,
        "\n",
        r#"{"id": 2, "content": "{\"tool\": \"search\", \"note\": 1} ok", "enabled_tools": ["search"]}"#,
        "\n",
    );
    let (_dir, f) = temp_file("explain-declines.jsonl", body.as_bytes());
    let mut a = args(vec![f], true);
    a.explain = true;
    let mut out = Vec::new();
    run(&a, &mut out).unwrap();
    for v in lines(&out) {
        let detectors = v["explain"]["detectors"].as_array().unwrap();
        let steps = v["explain"]["steps"].as_array().unwrap();
        assert!(!detectors.is_empty(), "{v}");
        for d in detectors {
            // The markers found in this text, not the detector's whole list.
            let markers = d["markers"].as_array().unwrap();
            assert!(!markers.is_empty() && markers.len() <= 2, "{d}");
            assert!(
                steps
                    .iter()
                    .any(|s| s["detector"] == d["detector"] && s["verdict"] == "declined"),
                "{} ran and said nothing: {steps:?}",
                d["detector"]
            );
        }
    }
}
