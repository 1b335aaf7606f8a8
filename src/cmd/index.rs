//! `toolcall-recovery index`: the partial index transcript repair uses on the app's
//! `messages` table, built concurrently (the app's writes go on), an invalid one (left by an
//! interrupted build) dropped and built again; two runs at once build it once. Not a
//! migration: only the table's owner may index it, and a concurrent build inside the
//! migrator's lock can deadlock two migrators. `docs/operations.md` has the same SQL for a DBA.
//!
//! May depend on: `store`, `settings`, `error`.

use crate::error::Error;
use crate::settings::{DatabaseSettings, LogFormat};
use crate::store::{self, IndexState};
use std::io::Write;

/// Flags of `toolcall-recovery index`.
#[derive(Debug, Clone, clap::Args)]
pub struct IndexArgs {
    /// The database, as a role that owns the `messages` table.
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// Log format (logs go to stderr; the result to stdout).
    #[arg(long, env = "TCR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
}

/// Builds the index when it is missing or invalid; prints what it found and did.
pub async fn run(args: &IndexArgs, out: &mut dyn Write) -> Result<(), Error> {
    let found = store::build_transcript_index(&args.database).await?;
    let line = match found {
        IndexState::Ready => format!(
            "{} is there and valid: nothing to do",
            store::TRANSCRIPT_INDEX
        ),
        IndexState::Missing => format!("{} was missing: built it", store::TRANSCRIPT_INDEX),
        IndexState::Invalid => format!(
            "{} was invalid (an interrupted build): dropped and built it again",
            store::TRANSCRIPT_INDEX
        ),
    };
    writeln!(out, "{line}").map_err(Error::Output)
}
