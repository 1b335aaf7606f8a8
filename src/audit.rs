//! The read side of the audit ledger: lists what recovery passes wrote to `recoveries` and
//! `recovery_items`, for `toolcall-recovery ledger` ([`run`], [`LedgerArgs`]) and for the
//! admin API's `GET /v1/messages/{id}/ledger` ([`message_ledger`]).
//!
//! [`list`] reads the rows matching a [`Filter`], newest first, in two parameterised
//! queries (the recoveries, then the items of exactly those); [`render`] prints them as
//! text, [`render_json`] as JSON Lines. Message content (`content_before`,
//! `content_after`, the removed text) is read from the database only when `show_text` is
//! asked for, so it cannot leak into a listing that did not ask for it. The parsed call
//! (name, arguments) and result object are always listed: they are what the ledger is for.
//!
//! Reads only; never creates a database nor applies migrations.
//!
//! May depend on: `store`, `settings`, `error`, `recover` (the outcome labels), `sqlx`,
//! `toolcall_detect::Family`. No broker, no HTTP.

use crate::error::Error;
use crate::recover::{Mode, Outcome};
use crate::settings::{parse_family, DatabaseSettings, LogFormat};
use crate::store;
use chrono::{DateTime, NaiveDate, SecondsFormat, TimeDelta, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::{PgPool, Row};
use std::collections::HashMap;
use std::io::Write;
use toolcall_detect::Family;
use uuid::Uuid;

/// `application_name` of the ledger command's database connections.
pub const APPLICATION_NAME: &str = "toolcall-recovery-ledger";
/// Rows listed when `--limit` is not given.
pub const DEFAULT_LIMIT: u32 = 50;
/// The largest `--limit`, and what [`message_ledger`] lists at most for one message.
pub const MAX_LIMIT: u32 = 10_000;

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

    /// Only recoveries written at or after this time: RFC 3339 (`2026-11-22T10:00:00Z`),
    /// a UTC date (`2026-11-22`) or an age (`30m`, `12h`, `7d`; also `s`, `w`).
    #[arg(long, value_name = "WHEN", value_parser = parse_since_now)]
    pub since: Option<DateTime<Utc>>,

    /// Recoveries listed at most (newest first).
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

    /// Log format (logs go to stderr; the listing to stdout).
    #[arg(long, env = "TCR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
}

impl LedgerArgs {
    /// The filter these flags ask for.
    pub fn filter(&self) -> Filter {
        Filter {
            message_id: self.message_id,
            chat_id: self.chat_id,
            family: self.family,
            outcome: self.outcome,
            mode: self.mode,
            since: self.since,
            limit: self.limit,
        }
    }
}

/// Which ledger rows to list. Every `None` matches everything.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// `recoveries.message_id`.
    pub message_id: Option<i64>,
    /// `recoveries.chat_id`.
    pub chat_id: Option<i64>,
    /// A family one of the row's items has.
    pub family: Option<Family>,
    /// The row's outcome, or the outcome of one of its items.
    pub outcome: Option<Outcome>,
    /// `recoveries.mode`.
    pub mode: Option<Mode>,
    /// `recoveries.created_at` at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Rows listed at most (clamped to 1..=[`MAX_LIMIT`]).
    pub limit: u32,
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            message_id: None,
            chat_id: None,
            family: None,
            outcome: None,
            mode: None,
            since: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// One `recoveries` row with its items, as listed.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// `recoveries.id`.
    pub recovery_id: i64,
    /// When the pass committed (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// The message.
    pub message_id: i64,
    /// Its chat.
    pub chat_id: i64,
    /// Its agent.
    pub agent_id: Option<i64>,
    /// What asked for the pass: `event`, `backfill`, `admin`.
    pub source: String,
    /// The event, for `source = event`.
    pub event_id: Option<Uuid>,
    /// `recover` or `observe`.
    pub mode: String,
    /// The message-level outcome.
    pub outcome: String,
    /// The families of the items, distinct, in item order.
    pub families: Vec<String>,
    /// Bytes removed from the content (from the pass's summary; for a row without one,
    /// the sum of `removed_bytes` over its leaks).
    pub bytes_removed: i64,
    /// Whether the pass was reverted.
    pub reverted: bool,
    /// When.
    pub reverted_at: Option<DateTime<Utc>>,
    /// By what: `cli` or `admin`.
    pub reverted_by: Option<String>,
    /// What the revert did.
    pub revert_summary: Option<Value>,
    /// The content before the pass (only with `show_text`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_before: Option<String>,
    /// The content after the pass (only with `show_text`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_after: Option<String>,
    /// One per leaked call or result object, in the order of the message.
    pub items: Vec<ItemEntry>,
}

/// One `recovery_items` row, as listed. Several calls in one leak (adjacent blocks) are
/// items of the same `leak_index` and share its span and removed text.
#[derive(Debug, Clone, Serialize)]
pub struct ItemEntry {
    /// Which leak of the message (0-based, in the order of the content).
    pub leak_index: i32,
    /// Which call or result object of that leak.
    pub item_index: i32,
    /// The leak's family.
    pub family: String,
    /// What was done with this call.
    pub outcome: String,
    /// The call's name (None for a bare result object).
    pub name: Option<String>,
    /// The call's arguments.
    pub arguments: Option<Value>,
    /// The leaked result object, if any.
    pub result_object: Option<Value>,
    /// Why, for the error outcomes.
    pub detail: Option<String>,
    /// The memory the call created.
    pub memory_id: Option<i64>,
    /// The `role='tool'` message the call created.
    pub tool_message_id: Option<i64>,
    /// Byte offset of the leak in the content before the pass.
    pub span_start: i32,
    /// Byte offset of the end of the leak.
    pub span_end: i32,
    /// Bytes of the leak's span removed from the content: `span_end - span_start`, or 0
    /// for `needs_review` (left in place). Shared by the items of one leak.
    pub removed_bytes: i64,
    /// The removed text, verbatim (only with `show_text`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_text: Option<String>,
}

/// The recoveries: optional filters as `($n IS NULL OR ...)`, family and outcome through
/// the items. Content is selected only when `$8` (show_text) is true.
const LIST_RECOVERIES: &str = "SELECT r.id, r.created_at, r.message_id, r.chat_id, \
       r.agent_id, r.source, r.event_id, r.mode, r.outcome, \
       CASE WHEN jsonb_typeof(r.summary -> 'bytes_removed') = 'number' \
            THEN (r.summary ->> 'bytes_removed')::numeric::bigint END AS bytes_removed, \
       r.reverted_at, r.reverted_by, r.revert_summary, \
       CASE WHEN $8 THEN r.content_before END AS content_before, \
       CASE WHEN $8 THEN r.content_after END AS content_after \
     FROM recoveries r \
     WHERE ($1::bigint IS NULL OR r.message_id = $1) \
       AND ($2::bigint IS NULL OR r.chat_id = $2) \
       AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM recovery_items i \
             WHERE i.recovery_id = r.id AND i.family = $3)) \
       AND ($4::text IS NULL OR r.outcome = $4 OR EXISTS (SELECT 1 FROM recovery_items i \
             WHERE i.recovery_id = r.id AND i.outcome = $4)) \
       AND ($5::text IS NULL OR r.mode = $5) \
       AND ($6::timestamptz IS NULL OR r.created_at >= $6) \
     ORDER BY r.id DESC \
     LIMIT $7";

/// The items of the listed recoveries; the removed text only when `$2` (show_text).
const LIST_ITEMS: &str =
    "SELECT recovery_id, leak_index, item_index, family, outcome, call_name, call_arguments, \
       result_object, detail, memory_id, tool_message_id, span_start, span_end, \
       CASE WHEN $2 THEN removed_text END AS removed_text \
     FROM recovery_items \
     WHERE recovery_id = ANY($1) \
     ORDER BY recovery_id, leak_index, item_index";

/// The ledger rows matching `filter`, newest first (by `recoveries.id`), each with its
/// items. Message content is read only when `show_text` is set.
pub async fn list(pool: &PgPool, filter: &Filter, show_text: bool) -> Result<Vec<Entry>, Error> {
    let limit = i64::from(filter.limit.clamp(1, MAX_LIMIT));
    let rows = sqlx::query(LIST_RECOVERIES)
        .bind(filter.message_id)
        .bind(filter.chat_id)
        .bind(filter.family.map(Family::as_str))
        .bind(filter.outcome.map(Outcome::as_str))
        .bind(filter.mode.map(Mode::as_str))
        .bind(filter.since)
        .bind(limit)
        .bind(show_text)
        .fetch_all(pool)
        .await?;
    let mut entries = Vec::with_capacity(rows.len());
    let mut summary_bytes = Vec::with_capacity(rows.len());
    for row in rows {
        let reverted_at: Option<DateTime<Utc>> = row.try_get("reverted_at")?;
        summary_bytes.push(row.try_get::<Option<i64>, _>("bytes_removed")?);
        entries.push(Entry {
            recovery_id: row.try_get("id")?,
            created_at: row.try_get("created_at")?,
            message_id: row.try_get("message_id")?,
            chat_id: row.try_get("chat_id")?,
            agent_id: row.try_get("agent_id")?,
            source: row.try_get("source")?,
            event_id: row.try_get("event_id")?,
            mode: row.try_get("mode")?,
            outcome: row.try_get("outcome")?,
            families: Vec::new(),
            bytes_removed: 0,
            reverted: reverted_at.is_some(),
            reverted_at,
            reverted_by: row.try_get("reverted_by")?,
            revert_summary: row
                .try_get::<Option<Json<Value>>, _>("revert_summary")?
                .map(|j| j.0),
            content_before: row.try_get("content_before")?,
            content_after: row.try_get("content_after")?,
            items: Vec::new(),
        });
    }
    if entries.is_empty() {
        return Ok(entries);
    }
    let ids: Vec<i64> = entries.iter().map(|e| e.recovery_id).collect();
    let position: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let items = sqlx::query(LIST_ITEMS)
        .bind(&ids)
        .bind(show_text)
        .fetch_all(pool)
        .await?;
    for row in items {
        let recovery_id: i64 = row.try_get("recovery_id")?;
        let Some(&at) = position.get(&recovery_id) else {
            continue;
        };
        let span_start: i32 = row.try_get("span_start")?;
        let span_end: i32 = row.try_get("span_end")?;
        let outcome: String = row.try_get("outcome")?;
        let removed_bytes = if outcome == Outcome::NeedsReview.as_str() {
            0
        } else {
            (i64::from(span_end) - i64::from(span_start)).max(0)
        };
        entries[at].items.push(ItemEntry {
            leak_index: row.try_get("leak_index")?,
            item_index: row.try_get("item_index")?,
            family: row.try_get("family")?,
            outcome,
            name: row.try_get("call_name")?,
            arguments: row
                .try_get::<Option<Json<Value>>, _>("call_arguments")?
                .map(|j| j.0),
            result_object: row
                .try_get::<Option<Json<Value>>, _>("result_object")?
                .map(|j| j.0),
            detail: row.try_get("detail")?,
            memory_id: row.try_get("memory_id")?,
            tool_message_id: row.try_get("tool_message_id")?,
            span_start,
            span_end,
            removed_bytes,
            removed_text: row.try_get("removed_text")?,
        });
    }
    for (entry, from_summary) in entries.iter_mut().zip(summary_bytes) {
        for item in &entry.items {
            if !entry.families.contains(&item.family) {
                entry.families.push(item.family.clone());
            }
        }
        entry.bytes_removed = from_summary.unwrap_or_else(|| {
            let mut leaks: Vec<(i32, i64)> = entry
                .items
                .iter()
                .map(|i| (i.leak_index, i.removed_bytes))
                .collect();
            leaks.dedup_by_key(|(leak, _)| *leak);
            leaks.iter().map(|(_, bytes)| bytes).sum()
        });
    }
    Ok(entries)
}

/// The ledger of one message for the admin API: `{"message_id": id, "recoveries": [...]}`,
/// newest first (at most [`MAX_LIMIT`] rows); an empty list when it has none.
pub async fn message_ledger(pool: &PgPool, id: i64, show_text: bool) -> Result<Value, Error> {
    let filter = Filter {
        message_id: Some(id),
        limit: MAX_LIMIT,
        ..Filter::default()
    };
    let entries = list(pool, &filter, show_text).await?;
    Ok(json!({ "message_id": id, "recoveries": entries }))
}

/// Prints `entries` as text: one line per recovery (time, ids, outcome, families, calls,
/// bytes removed, `[observed]` / `[reverted ...]`); with `show_text`, under it one line
/// per item and, once per leak, its removed text, each of its lines verbatim after
/// `    | `; then `N recoveries`, saying so when `limit` rows were listed (older ones may
/// exist).
pub fn render(
    entries: &[Entry],
    show_text: bool,
    limit: u32,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for e in entries {
        writeln!(out, "{}", summary_line(e))?;
        if show_text {
            render_items(&e.items, out)?;
        }
    }
    let n = entries.len();
    let noun = if n == 1 { "recovery" } else { "recoveries" };
    if n > 0 && n >= limit as usize {
        writeln!(
            out,
            "{n} {noun} (the limit; older ones may exist: raise --limit or narrow the filters)"
        )
    } else {
        writeln!(out, "{n} {noun}")
    }
}

/// Prints `entries` as JSON Lines: one [`Entry`] object per line.
pub fn render_json(entries: &[Entry], out: &mut dyn Write) -> std::io::Result<()> {
    for e in entries {
        serde_json::to_writer(&mut *out, e)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// One line per item; after the last item of each leak, the leak's removed text (shared
/// by its items), every line verbatim after `    | `.
fn render_items(items: &[ItemEntry], out: &mut dyn Write) -> std::io::Result<()> {
    for (n, item) in items.iter().enumerate() {
        writeln!(
            out,
            "  - item {}: {} {}  {}  bytes {}..{}{}",
            n + 1,
            item.family,
            item.name.as_deref().unwrap_or("(no call)"),
            item.outcome,
            item.span_start,
            item.span_end,
            item.detail
                .as_deref()
                .map(|d| format!("  ({d})"))
                .unwrap_or_default(),
        )?;
        let last_of_leak = items
            .get(n + 1)
            .is_none_or(|next| next.leak_index != item.leak_index);
        if let (true, Some(text)) = (last_of_leak, item.removed_text.as_deref()) {
            for line in text.split('\n') {
                writeln!(out, "    | {line}")?;
            }
        }
    }
    Ok(())
}

fn summary_line(e: &Entry) -> String {
    let mut names: Vec<&str> = Vec::new();
    for item in &e.items {
        if let Some(name) = item.name.as_deref() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let families = if e.families.is_empty() {
        "-".to_string()
    } else {
        e.families.join(",")
    };
    let calls = if names.is_empty() {
        "(no call)".to_string()
    } else {
        names.join(",")
    };
    let mut line = format!(
        "{}  recovery {}  message {}  chat {}  {}  {} {}  removed {} B",
        e.created_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        e.recovery_id,
        e.message_id,
        e.chat_id,
        e.outcome,
        families,
        calls,
        e.bytes_removed,
    );
    if e.mode == Mode::Observe.as_str() {
        line.push_str("  [observed]");
    }
    if e.reverted {
        line.push_str("  [reverted");
        if let Some(at) = e.reverted_at {
            line.push(' ');
            line.push_str(&at.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        if let Some(by) = &e.reverted_by {
            line.push_str(" by ");
            line.push_str(by);
        }
        line.push(']');
    }
    line
}

/// `toolcall-recovery ledger`: connects (a pool of at most 2, never creating the
/// database), checks the schema is migrated, lists and prints. Returns the number of
/// recoveries listed.
pub async fn run(args: LedgerArgs, out: &mut (dyn Write + Send)) -> Result<usize, Error> {
    let pool = store::connect_command(&args.database, APPLICATION_NAME, 2).await?;
    let result = list_and_print(&pool, &args, out).await;
    pool.close().await;
    result
}

async fn list_and_print(
    pool: &PgPool,
    args: &LedgerArgs,
    out: &mut (dyn Write + Send),
) -> Result<usize, Error> {
    store::ensure_migrated(pool, false).await?;
    let entries = list(pool, &args.filter(), args.show_text).await?;
    tracing::debug!(listed = entries.len(), "ledger listed");
    let written = if args.json {
        render_json(&entries, out)
    } else {
        render(&entries, args.show_text, args.limit, out)
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Ok(entries.len()),
        // `ledger | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(entries.len()),
        Err(e) => Err(Error::Output(e)),
    }
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
            "--since=2026-01-02",
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
            f.since,
            Some(Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap())
        );
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
        ] {
            assert!(P::try_parse_from(["ledger", bad]).is_err(), "{bad}");
        }
    }

    fn entry(show_text: bool) -> Entry {
        Entry {
            recovery_id: 17,
            created_at: now(),
            message_id: 4567,
            chat_id: 89,
            agent_id: Some(5),
            source: "event".into(),
            event_id: None,
            mode: "observe".into(),
            outcome: "recovered".into(),
            families: vec!["hermes".into()],
            bytes_removed: 120,
            reverted: true,
            reverted_at: Some(now()),
            reverted_by: Some("admin".into()),
            revert_summary: Some(json!({"deleted": []})),
            content_before: show_text.then(|| "before".to_string()),
            content_after: show_text.then(|| "after".to_string()),
            items: vec![ItemEntry {
                leak_index: 0,
                item_index: 0,
                family: "hermes".into(),
                outcome: "recovered".into(),
                name: Some("save_memory".into()),
                arguments: Some(json!({"content": "x"})),
                result_object: None,
                detail: None,
                memory_id: Some(1),
                tool_message_id: Some(2),
                span_start: 0,
                span_end: 120,
                removed_bytes: 120,
                removed_text: show_text.then(|| "<tool_call>\nx ☕\n</tool_call>".to_string()),
            }],
        }
    }

    #[test]
    fn text_lines_carry_markers_and_verbatim_text_only_when_asked() {
        let mut out = Vec::new();
        render(&[entry(false)], false, 50, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "2026-11-22T10:00:00Z  recovery 17  message 4567  chat 89  recovered  hermes \
             save_memory  removed 120 B  [observed]  [reverted 2026-11-22T10:00:00Z by admin]\n\
             1 recovery\n"
        );
        let mut out = Vec::new();
        render(&[entry(true)], true, 1, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "  - item 1: hermes save_memory  recovered  bytes 0..120\n    | <tool_call>\n    \
                 | x ☕\n    | </tool_call>\n"
            ),
            "{text}"
        );
        assert!(text.ends_with(
            "1 recovery (the limit; older ones may exist: raise --limit or narrow the filters)\n"
        ));
    }

    #[test]
    fn the_text_of_a_leak_with_several_calls_is_printed_once() {
        let mut e = entry(true);
        let mut second = e.items[0].clone();
        second.item_index = 1;
        second.name = Some("web_search".into());
        second.outcome = "forwarded".into();
        e.items.push(second);
        let mut out = Vec::new();
        render(&[e], true, 50, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("    | x ☕\n").count(), 1, "{text}");
        let item2 = text
            .find("  - item 2: hermes web_search  forwarded")
            .unwrap();
        assert!(text.find("    | <tool_call>").unwrap() > item2, "{text}");
    }

    #[test]
    fn json_skips_text_fields_without_show_text() {
        let mut out = Vec::new();
        render_json(&[entry(false), entry(true)], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].get("content_before").is_none());
        assert!(lines[0]["items"][0].get("removed_text").is_none());
        assert_eq!(lines[0]["created_at"], json!("2026-11-22T10:00:00Z"));
        assert_eq!(lines[1]["content_before"], json!("before"));
        assert_eq!(
            lines[1]["items"][0]["removed_text"],
            json!("<tool_call>\nx ☕\n</tool_call>")
        );
    }
}
