//! Streaming detection gives the one-shot answer (issue #31): every vector of
//! `tests/data` (scored sets too) and every one of the 25,300 real replies, pushed in
//! deltas cut at random points (and, for short texts, at every character), shows exactly
//! the one-shot cleaned text and finishes with the one-shot detection. The metamorphic
//! suite checks the same of every variant it makes. Also a proptest over texts built from
//! the pieces leaks are made of, cut anywhere.

#[path = "support/real.rs"]
mod real;
#[path = "support/streamed.rs"]
mod streamed;
#[path = "support/vectors.rs"]
mod support;

use proptest::prelude::*;
use serde_json::Value;
use streamed::{same_answer, under_cuts};

#[test]
fn every_vector_streams_to_the_one_shot_answer() {
    let mut all = support::vectors();
    all.extend(support::scored("scored_"));
    assert!(all.len() > 500, "only {} vectors", all.len());
    let mut failures = Vec::new();
    for (i, v) in all.iter().enumerate() {
        if let Err(e) = under_cuts(&v.text, &v.enabled_tools, i as u64) {
            failures.push(format!("{} {}: {e}", v.file, v.id));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_real_reply_streams_to_the_one_shot_answer() {
    for name in [
        "real_assistant_messages.jsonl",
        "real_toolcall_messages.jsonl",
    ] {
        let body = real::read(name).unwrap_or_else(|e| panic!("{e}"));
        let tools = real::agent_tools();
        let mut failures = Vec::new();
        let mut n = 0;
        for (i, line) in body.lines().enumerate() {
            let v: Value = serde_json::from_str(line).expect("corpus line is JSON");
            let content = v["content"].as_str().unwrap_or_default();
            n += 1;
            let parts = streamed::deltas(content, 16, i as u64);
            if let Err(e) = same_answer(&parts, &tools) {
                failures.push(format!("{} {}: {e}", name, v["id"]));
            }
        }
        assert!(n > 2_000, "{name} has only {n} messages");
        let shown: Vec<&String> = failures.iter().take(5).collect();
        assert!(
            failures.is_empty(),
            "{} failures: {shown:#?}",
            failures.len()
        );
    }
}

/// Pieces leaks and replies are made of.
const PIECES: &[&str] = &[
    "Sure. ",
    "\n",
    "\n\n",
    " ",
    "<tool_call>",
    "</tool_call>",
    "{\"name\": \"save_memory\", \"arguments\": {\"content\": \"tea\"}}",
    "{success: true, memory_type: \"journal\", content: \"x\"}",
    "save_memory(content=\"x\")",
    "Action: save_memory",
    "Action Input: {\"content\": \"x\"}",
    "[TOOL_CALLS]",
    "<|im_end|>",
    "<think>",
    "</think>",
    "```",
    "```json",
    "`",
    "(",
    ")",
    "{",
    "}",
    "<b>",
    "</b>",
    "<function=save_memory>",
    "<parameter=content>",
    "tea",
    "</parameter>",
    "</function>",
    "I see: ",
    "{\"result\": \"ok\"}",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn texts_of_leak_pieces_stream_to_the_one_shot_answer(
        picks in prop::collection::vec(0..PIECES.len(), 0..24),
        cuts in prop::collection::vec(1usize..12, 1..64),
    ) {
        let text: String = picks.iter().map(|&i| PIECES[i]).collect();
        let mut parts = Vec::new();
        let (mut at, mut k) = (0, 0);
        while at < text.len() {
            let mut end = (at + cuts[k % cuts.len()]).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            parts.push(&text[at..end]);
            at = end;
            k += 1;
        }
        let tools = vec!["save_memory".to_string()];
        prop_assert_eq!(same_answer(&parts, &tools), Ok(()));
    }
}
