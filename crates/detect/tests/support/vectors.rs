//! The detection vectors of `tests/data/*.jsonl` (schema in `tests/data/README.md`), read
//! once and shared by the vector test and the metamorphic suite, so both run exactly the same
//! vectors.

// Test support reads its data files; the crate's clippy.toml bans I/O for detection itself.
#![allow(clippy::disallowed_methods, dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};

/// One vector as written in its file.
#[derive(Debug, Clone)]
pub struct Vector {
    pub file: String,
    pub id: String,
    pub family: String,
    pub text: String,
    pub tools_used: Vec<String>,
    pub enabled_tools: Vec<String>,
    pub expected_calls: Vec<(String, Value)>,
    pub expected_text: String,
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Every JSON line of the `*.jsonl` files whose name starts with `prefix`, with its file.
pub fn load(prefix: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(data_dir())
        .expect("tests/data exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".jsonl") && name.starts_with(prefix)
        })
        .collect();
    files.sort();
    for path in files {
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let body = std::fs::read_to_string(&path).expect("readable vector file");
        for (n, line) in body
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{file}:{}: not JSON: {e}", n + 1));
            out.push((file.clone(), v));
        }
    }
    out
}

/// Every vector (the known-gap lists are not vectors, and the scored sets are scored as a
/// whole, see [`scored`]).
pub fn vectors() -> Vec<Vector> {
    load("")
        .into_iter()
        .filter(|(f, _)| !f.starts_with("known_gaps") && !f.starts_with("scored_"))
        .map(vector)
        .collect()
}

/// The vectors of the sets gathered to measure detection on what it was not built on
/// (`scored_*.jsonl`): scored as a whole against a floor, not one by one.
pub fn scored(prefix: &str) -> Vec<Vector> {
    load(prefix).into_iter().map(vector).collect()
}

/// One vector from its file's JSON line.
fn vector((file, v): (String, Value)) -> Vector {
    Vector {
        file,
        id: v["id"].as_str().expect("id").to_string(),
        family: v["family"].as_str().expect("family").to_string(),
        text: v["text"].as_str().expect("text").to_string(),
        tools_used: strings(&v["tools_used"]),
        enabled_tools: strings(&v["enabled_tools"]),
        expected_calls: v["expected_calls"]
            .as_array()
            .expect("expected_calls")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().expect("name").to_string(),
                    c["arguments"].clone(),
                )
            })
            .collect(),
        expected_text: v["expected_text"]
            .as_str()
            .expect("expected_text")
            .to_string(),
    }
}
