//! Runs every detection vector in `tests/data/*.jsonl` (see its README): tier-1 families
//! must all pass; tier-2 families must pass except for listed known gaps.

#[path = "support/vectors.rs"]
mod support;

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use support::{load, vectors, Vector};
use toolcall_detect::{detect, Config, Input};

const TIER1: &[&str] = &[
    "result_prefix",
    "result_only",
    "hermes",
    "minimax",
    "xml_invoke",
    "mistral",
    "json_fence",
    "pythonic",
    "llama3_json",
    "deepseek",
    "kimi",
    "glm",
    "harmony",
    "llama3_python_tag",
    "llama3_function_tag",
    "negative",
];

/// `None` when the vector passes, else what differed.
fn check(v: &Vector) -> Option<String> {
    let config = Config::default();
    let d = detect(
        &Input {
            content: &v.text,
            tools_used: &v.tools_used,
            enabled_tools: &v.enabled_tools,
        },
        &config,
    );
    let calls: Vec<(String, Value)> = d
        .calls_to_run()
        .map(|(_, c)| (c.name.clone(), c.arguments.clone()))
        .collect();
    let text = d.cleaned.as_deref().unwrap_or(&v.text);
    let mut problems = Vec::new();
    if calls != v.expected_calls {
        problems.push(format!("calls: got {calls:?}, want {:?}", v.expected_calls));
    }
    if text.trim() != v.expected_text.trim() {
        problems.push(format!(
            "text: got {:?}, want {:?}",
            text.trim(),
            v.expected_text.trim()
        ));
    }
    if TIER1.contains(&v.family.as_str()) && v.family != "negative" && !v.expected_calls.is_empty()
    {
        let fams: Vec<&str> = d.families().iter().map(|f| f.as_str()).collect();
        if !fams.contains(&v.family.as_str()) {
            problems.push(format!("family: got {fams:?}, want {}", v.family));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

fn known_gaps() -> HashMap<String, String> {
    load("known_gaps")
        .into_iter()
        .map(|(_, v)| {
            (
                v["id"].as_str().expect("gap id").to_string(),
                v["reason"].as_str().expect("gap reason").to_string(),
            )
        })
        .collect()
}

#[test]
fn vector_ids_are_unique() {
    let mut seen = HashMap::new();
    for v in vectors() {
        if let Some(prev) = seen.insert(v.id.clone(), v.file.clone()) {
            panic!("vector id {} appears in {} and {}", v.id, prev, v.file);
        }
    }
}

#[test]
fn tier1_vectors_all_pass() {
    let mut failures = Vec::new();
    let mut per_family: BTreeMap<String, usize> = BTreeMap::new();
    for v in vectors()
        .iter()
        .filter(|v| TIER1.contains(&v.family.as_str()))
    {
        *per_family.entry(v.family.clone()).or_default() += 1;
        if let Some(why) = check(v) {
            failures.push(format!("{} [{}] ({}): {why}", v.id, v.family, v.file));
        }
    }
    eprintln!("tier-1 vectors per family: {per_family:?}");
    assert!(
        failures.is_empty(),
        "{} tier-1 vectors fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn tier2_vectors_pass_or_are_known_gaps() {
    let gaps = known_gaps();
    let mut unexpected = Vec::new();
    let mut stale = Vec::new();
    let mut per_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for v in vectors()
        .iter()
        .filter(|v| !TIER1.contains(&v.family.as_str()))
    {
        let e = per_family.entry(v.family.clone()).or_default();
        e.1 += 1;
        match (check(v), gaps.contains_key(&v.id)) {
            (None, false) => e.0 += 1,
            (None, true) => stale.push(v.id.clone()),
            (Some(why), false) => unexpected.push(format!("{} [{}]: {why}", v.id, v.family)),
            (Some(_), true) => {}
        }
    }
    let (pass, total) = per_family
        .values()
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    eprintln!("tier-2 coverage: {pass}/{total}");
    for (f, (p, t)) in &per_family {
        eprintln!("  {f}: {p}/{t}");
    }
    assert!(
        unexpected.is_empty(),
        "tier-2 vectors failing without a known-gap entry:\n{}",
        unexpected.join("\n")
    );
    assert!(
        stale.is_empty(),
        "known gaps that now pass (remove them): {stale:?}"
    );
    assert!(
        total == 0 || pass * 10 >= total * 9,
        "tier-2 coverage {pass}/{total} is below 90%"
    );
}

/// The worker calls a message clean from the event alone (no tools known) when detection
/// with no tools finds nothing and says it did not depend on them. That must never hide a
/// leak the agent's real tools would reveal.
#[test]
fn clean_without_tools_and_independent_of_them_is_clean_with_them() {
    let config = Config::default();
    let mut wrong = Vec::new();
    for v in vectors() {
        let bare = detect(
            &Input {
                content: &v.text,
                tools_used: &v.tools_used,
                enabled_tools: &[],
            },
            &config,
        );
        if bare.is_clean() && !bare.depends_on_tools {
            let full = detect(
                &Input {
                    content: &v.text,
                    tools_used: &v.tools_used,
                    enabled_tools: &v.enabled_tools,
                },
                &config,
            );
            if !full.is_clean() {
                wrong.push(v.id.clone());
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "tool-dependent verdicts not flagged: {wrong:?}"
    );
}

/// The sets gathered for issue #30 from public threads the test data had not used, scored as
/// a whole: `scored_issue30_heldout.jsonl` was kept out of sight while detection was built and
/// scored before (60 of 70 leaks) and after (64 of 70), 70 since; `scored_issue30_dev.jsonl` was gathered
/// to build on (25 of 40 before, 32 after, 35 since). `scored_issue36_heldout.jsonl` was
/// gathered the same way for issue #30's next round from 72 other threads (62 leaks, 28
/// negatives): 36 of 62 before that round, 51 after (its third part, kept hidden through
/// the first changes, went 8 -> 8 of 14, then 10 once its misses were read; 53 since).
/// `scored_issue37_heldout.jsonl` (round 37, 75 threads, 59 leaks, 24 negatives): 32 of 59
/// before, 32 after the round's first changes (built from a grid of the known formats'
/// mixtures, none from the set), 44 after its parts were read (part c, kept hidden until
/// then, 12 -> 12 -> 16 of 22; 48 since, 49 after round 38, 50 after round 39). `scored_issue38_heldout.jsonl` (round 38, 65
/// threads, 57 leaks, 29 negatives): 29 of 57 before; parts a-c read and built on while
/// part d stayed hidden (d: 2 -> 3 of 16), then d read: 45 of 57, 47 since.
/// `scored_issue38b_heldout.jsonl` (26 more threads, 19 leaks, 11 negatives), gathered
/// after round 38's first build and kept hidden while the next readings were built: 14 of
/// 19 before and after them, 16 once read. `scored_issue39_heldout.jsonl` (round 39, 71
/// threads, 53 leaks, 46 negatives, gathered in seven parts): 27 of 53 before; parts a-d
/// read and built on while e-g (15 leaks) stayed hidden: e-g 8 -> 8 of 15; then e-g read:
/// 41 of 53, 42 since. Round 37's set went to 50 with round 39's one-line values.
/// `scored_issue40_heldout.jsonl` (round 40, 55 threads, 46 leaks, 42 negatives, six parts):
/// 25 of 46 before; parts a-d (41 leaks) read and built on while e-f (5 leaks) stayed
/// hidden: e-f 1 -> 1 of 5; then e-f read: 37 of 46. Round 40 also lifted `30_dev` to 36,
/// set 36 to 54 and set 39 to 43. Rounds 41 and 42 added sets 41, 42 and 42b the same way
/// (tests/data/README). `scored_issue43_heldout.jsonl` (round 43, 46 threads, 30 leaks, 18
/// negatives, eight parts): 12 of 30 before; parts a-d read and built on while e-h (11
/// leaks) stayed hidden: e-h 5 -> 5 of 11; then e-h read: 21 of 30. Each set must
/// keep its figure: a change that recovers fewer of them, or touches one of their
/// negatives, fails here.
#[test]
fn scored_sets_keep_their_floor() {
    for (prefix, leaks_floor) in [
        ("scored_issue30_heldout", 70),
        ("scored_issue30_dev", 36),
        ("scored_issue36_heldout", 54),
        ("scored_issue37_heldout", 50),
        ("scored_issue38_heldout", 47),
        ("scored_issue38b_heldout", 16),
        ("scored_issue39_heldout", 43),
        ("scored_issue40_heldout", 38),
        ("scored_issue41_heldout", 39),
        ("scored_issue42_heldout", 10),
        ("scored_issue42b_heldout", 10),
        ("scored_issue43_heldout", 21),
        ("scored_issue44_heldout", 12),
    ] {
        let set = support::scored(prefix);
        assert!(!set.is_empty(), "{prefix}: no vectors");
        let (mut recovered, mut leaks, mut misses) = (0, 0, Vec::new());
        for v in &set {
            // Scored on the calls and the text, whatever family reads them.
            let plain = Vector {
                family: "scored".into(),
                ..v.clone()
            };
            let verdict = check(&plain);
            match (v.family == "negative", verdict) {
                (true, Some(why)) => panic!("{prefix}: negative {} touched: {why}", v.id),
                (true, None) => {}
                (false, None) => {
                    leaks += 1;
                    recovered += 1;
                }
                (false, Some(_)) => {
                    leaks += 1;
                    misses.push(v.id.clone());
                }
            }
        }
        eprintln!("{prefix}: {recovered} of {leaks} leaks fully recovered; missed {misses:?}");
        assert!(
            recovered >= leaks_floor,
            "{prefix}: {recovered} of {leaks} fully recovered, the floor is {leaks_floor}; missed {misses:?}"
        );
    }
}
