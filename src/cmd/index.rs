//! `toolcall-recovery index`: the partial index transcript repair uses on the app's
//! `messages` table, built concurrently (the app's writes go on), an invalid one (left by an
//! interrupted build) dropped and built again; two runs at once build it once. Not a
//! migration: only the table's owner may index it, and a concurrent build inside the
//! migrator's lock can deadlock two migrators. `--check` only says where it stands (for a
//! script or a probe: exit 3 unless ready); `--sql` prints the same steps for a DBA.
//!
//! May depend on: `store`, `settings`, `error`.

use crate::error::Error;
use crate::settings::DatabaseSettings;
use crate::store::{self, IndexState};
use std::io::Write;

/// Flags of `toolcall-recovery index`.
#[derive(Debug, Clone, clap::Args)]
pub struct IndexArgs {
    /// The database, as a role that owns the `messages` table (`--check` needs no more than
    /// to see it).
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// Only report the index's state (`ready`, `missing`, `invalid`) on stdout; exit 3
    /// unless ready. Builds nothing.
    #[arg(long, conflicts_with = "sql")]
    pub check: bool,

    /// Print the SQL a DBA runs by hand instead (with psql, in autocommit: a concurrent
    /// build cannot run in a transaction); connects to no database.
    #[arg(long)]
    pub sql: bool,
}

/// Does what the flags ask, prints the result; returns whether the index is usable now
/// (the exit code of `--check`).
pub async fn run(args: &IndexArgs, out: &mut dyn Write) -> Result<bool, Error> {
    if args.sql {
        out.write_all(store::TRANSCRIPT_INDEX_SQL.as_bytes())
            .map_err(Error::Output)?;
        return Ok(true);
    }
    if args.check {
        let pool = store::connect_command(&args.database, "toolcall-recovery-index", 1).await?;
        let state = store::transcript_index(&pool).await;
        pool.close().await;
        let state = state?;
        writeln!(out, "{} {}", store::TRANSCRIPT_INDEX, state.as_str()).map_err(Error::Output)?;
        return Ok(state == IndexState::Ready);
    }
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
    writeln!(out, "{line}").map_err(Error::Output)?;
    Ok(true)
}
