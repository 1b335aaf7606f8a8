//! `scan`: stub, being written.

use clap::Args;
use std::io::Write;

/// Flags of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {}

/// Counts of a scan run.
pub struct Summary {
    /// Inputs that could not be read or decoded.
    pub unreadable: usize,
}

/// Runs the scan.
pub fn run(_args: &ScanArgs, _out: &mut dyn Write) -> std::io::Result<Summary> {
    Ok(Summary { unreadable: 0 })
}
