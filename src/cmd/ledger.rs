//! `toolcall-recovery ledger`: the flags, the parsing of `--since` and `--outcome`, and the
//! run (connect read-only, list, print).
//!
//! May depend on: `ledger`, `store`, `settings`, `error`, `recover` (labels), `sqlx`.

use crate::error::Error;
use crate::ledger::{self, render, Filter, ModelFilter, DEFAULT_LIMIT, MAX_LIMIT};
use crate::recover::{Mode, Outcome};
use crate::settings::{parse_family, DatabaseSettings, ModelSettings};
use crate::store;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use sqlx::PgPool;
use std::io::Write;
use toolcall_detect::Family;

/// `application_name` of the ledger command's database connections.
pub const APPLICATION_NAME: &str = "toolcall-recovery-ledger";
/// The ledger's filters as flags, but for `--message`: shared by `ledger` (which rows to
/// list) and `revert` (which messages to revert), so both read a filter the same way.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only the recoveries of messages in this chat.
    #[arg(long = "chat", value_name = "ID")]
    pub chat_id: Option<i64>,

    /// Only recoveries with a leak of this family (`hermes`, `result_prefix`, ...).
    #[arg(long, value_name = "NAME", value_parser = parse_family)]
    pub family: Option<Family>,

    /// Only recoveries whose outcome, or the outcome of one of whose calls, is this
    /// (`recovered`, `forwarded`, `needs_review`, ...).
    #[arg(long, value_name = "LABEL", value_parser = parse_outcome)]
    pub outcome: Option<Outcome>,

    /// Only passes of this mode (`observe`: recorded what it would do, changed nothing).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,

    /// Only messages written by this model: a model id as the events carried it
    /// (`models/gemini-2.5-flash`, any case), or a `model` label of the metrics under
    /// `--models` (`gemini-2.5-flash`, `other`; `unknown`: no model recorded).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The model list `--model` labels with (as the worker's).
    #[command(flatten)]
    pub models: ModelSettings,

    /// Only recoveries written at or after this time: RFC 3339 (`2026-11-22T10:00:00Z`),
    /// a UTC date (`2026-11-22`) or an age (`30m`, `12h`, `7d`; also `s`, `w`).
    #[arg(long, value_name = "WHEN", value_parser = parse_since_now)]
    pub since: Option<DateTime<Utc>>,

    /// Only recoveries written before this time (as `--since`: `2026-11-23` is before
    /// that day, `1h` before an hour ago).
    #[arg(long, value_name = "WHEN", value_parser = parse_since_now)]
    pub until: Option<DateTime<Utc>>,
}

impl FilterArgs {
    /// The filter these flags ask for, of one message or of all, at most `limit` rows.
    pub fn filter(&self, message_id: Option<i64>, limit: u32) -> Filter {
        Filter {
            message_id,
            chat_id: self.chat_id,
            family: self.family,
            outcome: self.outcome,
            mode: self.mode,
            model: self.model.as_ref().map(|name| ModelFilter {
                name: name.clone(),
                models: self.models.models.clone(),
            }),
            since: self.since,
            until: self.until,
            before_id: None,
            latest_only: false,
            limit,
        }
    }

    /// Whether any filter is given.
    pub fn any(&self) -> bool {
        self.chat_id.is_some()
            || self.family.is_some()
            || self.outcome.is_some()
            || self.mode.is_some()
            || self.model.is_some()
            || self.since.is_some()
            || self.until.is_some()
    }
}

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

/// `--outcome`: an outcome label of the ledger.
pub fn parse_outcome(s: &str) -> Result<Outcome, String> {
    let s = s.trim();
    Outcome::ALL
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| {
            let labels: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
            format!("unknown outcome {s:?}; valid: {}", labels.join(", "))
        })
}

fn parse_since_now(s: &str) -> Result<DateTime<Utc>, String> {
    parse_since(s, Utc::now())
}

/// `--since`: RFC 3339 (`2026-11-22T10:00:00Z`, any offset), a date (`2026-11-22`,
/// midnight UTC) or an age before `now`: a whole number and a unit, `s`, `m`, `h`, `d`
/// or `w` (`30m`, `12h`, `7d`).
pub fn parse_since(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a time: use RFC 3339 (2026-11-22T10:00:00Z), a date (2026-11-22) \
             or an age (30m, 12h, 7d)"
        )
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    let Some(unit) = s.chars().last() else {
        return Err(bad());
    };
    let seconds_per: i64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return Err(bad()),
    };
    let digits = &s[..s.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_far = || format!("{s:?} is too far back");
    let n: i64 = digits.parse().map_err(|_| too_far())?;
    let age = n
        .checked_mul(seconds_per)
        .and_then(TimeDelta::try_seconds)
        .ok_or_else(too_far)?;
    now.checked_sub_signed(age).ok_or_else(too_far)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0)
            .single()
            .unwrap()
    }

    #[test]
    fn since_accepts_rfc3339_dates_and_ages() {
        let at = |y, mo, d, h, mi, s| Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().unwrap();
        assert_eq!(
            parse_since("2026-11-20T08:30:00Z", now()),
            Ok(at(2026, 11, 20, 8, 30, 0))
        );
        assert_eq!(
            parse_since("2026-11-20T10:30:00+02:00", now()),
            Ok(at(2026, 11, 20, 8, 30, 0))
        );
        assert_eq!(
            parse_since("2026-11-20", now()),
            Ok(at(2026, 11, 20, 0, 0, 0))
        );
        assert_eq!(parse_since("30m", now()), Ok(at(2026, 11, 22, 9, 30, 0)));
        assert_eq!(parse_since("12h", now()), Ok(at(2026, 11, 21, 22, 0, 0)));
        assert_eq!(parse_since("7d", now()), Ok(at(2026, 11, 15, 10, 0, 0)));
        assert_eq!(parse_since("2w", now()), Ok(at(2026, 11, 8, 10, 0, 0)));
        assert_eq!(parse_since("45s", now()), Ok(at(2026, 11, 22, 9, 59, 15)));
        assert_eq!(parse_since(" 0d ", now()), Ok(now()));
    }

    #[test]
    fn since_refuses_other_values_clearly() {
        for bad in [
            "",
            "d",
            "7",
            "7x",
            "-7d",
            "+7d",
            "7 d",
            "1.5h",
            "yesterday",
            "2026-13-01",
            "2026-11-22 10:00",
            "7д",
            "1e3d",
        ] {
            let err = parse_since(bad, now()).expect_err(bad);
            assert!(
                err.contains("is not a time") && err.contains("RFC 3339"),
                "{bad}: {err}"
            );
        }
        let err = parse_since("99999999999999999d", now()).expect_err("overflow");
        assert!(err.contains("too far back"), "{err}");
        let err = parse_since("9999999999999999999999s", now()).expect_err("overflow");
        assert!(err.contains("too far back"), "{err}");
    }

    #[test]
    fn family_and_outcome_errors_list_the_valid_names() {
        assert_eq!(parse_family("hermes"), Ok(Family::Hermes));
        let err = parse_family("hermez").unwrap_err();
        assert!(err.contains("hermez") && err.contains("hermes") && err.contains("result_prefix"));
        assert_eq!(parse_outcome("forwarded"), Ok(Outcome::Forwarded));
        let err = parse_outcome("recoverd").unwrap_err();
        assert!(
            err.contains("needs_review") && err.contains("already_recovered"),
            "{err}"
        );
    }

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
