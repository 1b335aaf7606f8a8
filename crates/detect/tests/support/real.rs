//! The real-message corpora in `tests/data/real/`, compressed with zstd (see the README
//! there for where they come from and under which licences). Shared by the real-corpus
//! tests, the benches and the examples, so all read the same bytes from the repository
//! itself, with the same agent.

// Test support reads its data files; the crate's clippy.toml bans I/O for detection itself.
#![allow(clippy::disallowed_methods, dead_code)]

use std::path::PathBuf;

/// The decompressed text of `tests/data/real/<name>.zst`. A missing or corrupt file is a
/// broken checkout: the caller fails loudly rather than skipping.
pub fn read(name: &str) -> Result<String, String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real")
        .join(format!("{name}.zst"));
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bytes = zstd::stream::decode_all(file).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The tools a chat agent commonly has: the corpora are read with them, so the families
/// that need an enabled tool are exercised too.
pub const AGENT_TOOLS: &[&str] = &[
    "save_memory",
    "search",
    "web_search",
    "get_weather",
    "calculator",
    "python",
    "read_file",
    "write_file",
    "wikipedia",
    "weather",
    "calendar",
    "translate",
];

/// [`AGENT_TOOLS`] as the detector takes them.
pub fn agent_tools() -> Vec<String> {
    AGENT_TOOLS.iter().map(|t| t.to_string()).collect()
}

/// The `content` of every message of `tests/data/real/<name>.zst`; panics on a broken
/// checkout.
pub fn contents(name: &str) -> Vec<String> {
    read(name)
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["content"].as_str().map(String::from))
        .collect()
}
