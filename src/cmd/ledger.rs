//! `toolcall-recovery ledger`: the flags and the run (connect read-only, list, print). The
//! filter flags, shared with `revert`, are `ledger::flags`.
//!
//! May depend on: `ledger`, `store`, `settings`, `error`, `sqlx`.

use crate::error::Error;
pub use crate::ledger::flags::{parse_outcome, parse_since, FilterArgs};
use crate::ledger::{self, render, Filter, DEFAULT_LIMIT, MAX_LIMIT};
use crate::settings::DatabaseSettings;
use crate::store;
use sqlx::PgPool;
use std::io::Write;

/// `application_name` of the ledger command's database connections.
pub const APPLICATION_NAME: &str = "toolcall-recovery-ledger";
/// Flags of `toolcall-recovery ledger`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("database_url", |a| a.help(
    "PostgreSQL URL (`sslmode=require` for TLS). Only read: a missing database is an error"
)))]
pub struct LedgerArgs {
    /// The database. The ledger command only reads: it never creates the database nor
    /// applies migrations, and uses at most 2 connections.
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// Only the recoveries of this message.
    #[arg(long = "message", value_name = "ID")]
    pub message_id: Option<i64>,

    /// Which recoveries.
    #[command(flatten)]
    pub filters: FilterArgs,

    /// Recoveries listed at most (newest first). When more match, stderr says so.
    #[arg(long, default_value_t = DEFAULT_LIMIT,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LIMIT)))]
    pub limit: u32,

    /// One JSON object per recovery per line (JSON Lines).
    #[arg(long)]
    pub json: bool,

    /// Also print the removed text of each call (verbatim) and, with --json, the content
    /// before and after the pass. Without it no message content is printed.
    #[arg(long)]
    pub show_text: bool,
}

impl LedgerArgs {
    /// The filter these flags ask for.
    pub fn filter(&self) -> Filter {
        self.filters.filter(self.message_id, self.limit)
    }
}

/// `toolcall-recovery ledger`: connects (a pool of at most 2, never creating the
/// database), checks the schema is migrated, lists and prints. Returns the number of
/// recoveries listed.
pub async fn run(args: LedgerArgs, out: &mut (dyn Write + Send)) -> Result<usize, Error> {
    run_with(args, out, &mut std::io::stderr()).await
}

/// [`run`], with the note that the limit cut the listing written to `note` (stderr).
pub async fn run_with(
    args: LedgerArgs,
    out: &mut (dyn Write + Send),
    note: &mut (dyn Write + Send),
) -> Result<usize, Error> {
    let pool = store::connect_command(&args.database, APPLICATION_NAME, 2).await?;
    let result = list_and_print(&pool, &args, out, note).await;
    pool.close().await;
    result
}

async fn list_and_print(
    pool: &PgPool,
    args: &LedgerArgs,
    out: &mut (dyn Write + Send),
    note: &mut (dyn Write + Send),
) -> Result<usize, Error> {
    store::ensure_migrated(pool, false).await?;
    let listing = ledger::list_cut(pool, &args.filter(), args.show_text).await?;
    let entries = listing.entries;
    tracing::debug!(listed = entries.len(), cut = listing.cut, "ledger listed");
    let written = if args.json {
        render::render_json(&entries, out)
    } else {
        render::render(&entries, args.show_text, listing.cut, out)
    };
    // Said apart from the listing (in --json mode too), so a script piping the rows on
    // learns that they are not all of them.
    if listing.cut {
        let _ = writeln!(note, "{}", cut_note(entries.len()));
    }
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(entries.len()),
        // `ledger | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(entries.len()),
        Err(e) => Err(Error::Output(e)),
    }
}

/// What stderr says when `--limit` cut a listing.
pub fn cut_note(shown: usize) -> String {
    format!(
        "ledger: showing {shown} of at least {} matching rows; pass --limit N (at most \
         {MAX_LIMIT}) or narrow the filters; to revert every match, give revert the same \
         filters",
        shown + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recover::{Mode, Outcome};
    use chrono::{TimeZone, Utc};
    use toolcall_detect::Family;

    #[test]
    fn flags_parse_into_the_filter() {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: LedgerArgs,
        }
        let p = P::try_parse_from([
            "ledger",
            "--message=7",
            "--chat=3",
            "--family=json_fence",
            "--outcome=needs_review",
            "--mode=observe",
            "--model=gemini-2.5-flash",
            "--since=2026-01-02",
            "--until=2026-01-05T00:00:00Z",
            "--limit=10",
        ])
        .unwrap();
        let f = p.a.filter();
        assert_eq!(f.message_id, Some(7));
        assert_eq!(f.chat_id, Some(3));
        assert_eq!(f.family, Some(Family::JsonFence));
        assert_eq!(f.outcome, Some(Outcome::NeedsReview));
        assert_eq!(f.mode, Some(Mode::Observe));
        assert_eq!(
            f.model.map(|m| (m.name, m.models)),
            Some((
                "gemini-2.5-flash".to_string(),
                crate::model::Models::default()
            ))
        );
        assert_eq!(
            f.since,
            Some(Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap())
        );
        assert_eq!(
            f.until,
            Some(Utc.with_ymd_and_hms(2026, 1, 5, 0, 0, 0).unwrap())
        );
        assert_eq!((f.before_id, f.latest_only), (None, false));
        assert_eq!(f.limit, 10);
        assert_eq!(
            P::try_parse_from(["ledger"]).unwrap().a.limit,
            DEFAULT_LIMIT
        );
        for bad in [
            "--limit=0",
            "--limit=10001",
            "--family=nope",
            "--outcome=nope",
            "--mode=both",
            "--since=soon",
            "--until=later",
        ] {
            assert!(P::try_parse_from(["ledger", bad]).is_err(), "{bad}");
        }
    }
}
