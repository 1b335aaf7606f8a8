//! The real-message corpora in `tests/data/real/`, compressed with zstd (see the README
//! there for where they come from and under which licences). Shared by the real-corpus
//! test and the detection bench, so both read the same bytes from the repository itself.

// Test support reads its data files; the crate's clippy.toml bans I/O for detection itself.
#![allow(clippy::disallowed_methods)]

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
