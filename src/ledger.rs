//! The read side of the audit ledger: what recovery passes wrote to `recoveries` and
//! `recovery_items` (the write side is `recover/ledger.rs`), for the `ledger` command
//! (`cmd/ledger.rs`) and the admin API's `GET /v1/messages/{id}/ledger` ([`message_ledger`]).
//!
//! [`list`] reads the rows matching a [`Filter`], newest first, in two parameterised
//! queries (the recoveries, then the items of exactly those); [`render`] prints them.
//! Message content (`content_before`, `content_after`, the removed text) is read from the
//! database only when `show_text` is asked for, so it cannot leak into a listing that did
//! not ask for it. The parsed call (name, arguments) and result object are always listed:
//! they are what the ledger is for.
//!
//! Reads only; never creates a database nor applies migrations.
//!
//! Each row names the model that wrote the message as recorded (`recoveries.model`: the
//! event's `model_id` as it came). [`Filter::model`] matches a name against it two ways:
//! the recorded id itself (`models/gemini-2.5-flash`, any case), or the `model` label the
//! metrics give it under a model list (`gemini-2.5-flash`, `other`, `unknown`), so the
//! label an operator reads on the dashboard finds its rows. The label is computed here, in
//! Rust, over the distinct recorded ids (one more query): SQL cannot apply the
//! normalisation, and the column has no index to spare a scan anyway.
//!
//! [`flags`] is the filter as command-line flags, shared by the `ledger` and `revert`
//! commands. [`count`] and [`matching`] serve a bulk action over every matching row, in
//! pages found by keyset ([`Filter::before_id`]), never by OFFSET.
//!
//! May depend on: `error`, `recover` (the outcome and mode labels), `model`, `settings`
//! (the flags: model list, family names), `sqlx`, `clap`, `toolcall_detect::Family`. No
//! broker, no HTTP.

pub mod flags;
pub mod render;

use crate::error::Error;
use crate::model::{self, Models};
use crate::recover::{Mode, Outcome};
use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::PgPool;
use std::collections::HashMap;
use toolcall_detect::Family;
use uuid::Uuid;

/// Rows listed when `--limit` is not given.
pub const DEFAULT_LIMIT: u32 = 50;
/// The largest `--limit`, and what [`message_ledger`] lists at most for one message.
pub const MAX_LIMIT: u32 = 10_000;

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
    /// The model that wrote the message: a recorded id or a label.
    pub model: Option<ModelFilter>,
    /// `recoveries.created_at` at or after this.
    pub since: Option<DateTime<Utc>>,
    /// `recoveries.created_at` before this.
    pub until: Option<DateTime<Utc>>,
    /// Only rows whose id is below this: the keyset cursor of a listing in pages (the last
    /// id of the page before), so a page is found by the index, not by skipping rows.
    pub before_id: Option<i64>,
    /// Only the latest row of each message (the one a revert undoes).
    pub latest_only: bool,
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
            model: None,
            since: None,
            until: None,
            before_id: None,
            latest_only: false,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// Rows of a model: those whose recorded model id is `name` (ignoring ASCII case and
/// surrounding space), or whose id `models` labels `name` (`unknown`: rows without one).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFilter {
    /// A recorded id or a label.
    pub name: String,
    /// The model list the labels come from (`--models`, as the worker's).
    pub models: Models,
}

impl ModelFilter {
    fn matches(&self, recorded: &str) -> bool {
        let name = self.name.trim();
        recorded.trim().eq_ignore_ascii_case(name)
            || self.models.name(self.models.label(Some(recorded))) == name
    }

    /// Whether rows without a recorded model match (their label is `unknown`).
    fn matches_none(&self) -> bool {
        self.name.trim() == model::UNKNOWN
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
    /// The model that wrote the message, as recorded (the event's `model_id`; None: the
    /// event named none, an admin pass, a backfill without a model column).
    pub model: Option<String>,
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

/// The conditions of a [`Filter`], shared by every query that selects recoveries (the
/// listing, the count, the pages of a bulk revert), so they select the same rows: optional
/// filters as `($n IS NULL OR ...)`, family and outcome through the items. `$7`: the
/// recorded model ids to list (NULL: any), `$8`: also rows without one, `$10`: the keyset
/// cursor (only ids below it), `$11`: only the latest row of each message.
macro_rules! matching {
    () => {
        " FROM recoveries r \
     WHERE ($1::bigint IS NULL OR r.message_id = $1) \
       AND ($2::bigint IS NULL OR r.chat_id = $2) \
       AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM recovery_items i \
             WHERE i.recovery_id = r.id AND i.family = $3)) \
       AND ($4::text IS NULL OR r.outcome = $4 OR EXISTS (SELECT 1 FROM recovery_items i \
             WHERE i.recovery_id = r.id AND i.outcome = $4)) \
       AND ($5::text IS NULL OR r.mode = $5) \
       AND ($6::timestamptz IS NULL OR r.created_at >= $6) \
       AND ($7::text[] IS NULL OR r.model = ANY($7) OR ($8 AND r.model IS NULL)) \
       AND ($9::timestamptz IS NULL OR r.created_at < $9) \
       AND ($10::bigint IS NULL OR r.id < $10) \
       AND (NOT $11 OR NOT EXISTS (SELECT 1 FROM recoveries l \
             WHERE l.message_id = r.message_id AND l.id > r.id))"
    };
}

/// Binds the parameters of [`matching!`] to a query, in order.
macro_rules! bind_matching {
    ($query:expr, $filter:expr, $models:expr) => {
        $query
            .bind($filter.message_id)
            .bind($filter.chat_id)
            .bind($filter.family.map(Family::as_str))
            .bind($filter.outcome.map(Outcome::as_str))
            .bind($filter.mode.map(Mode::as_str))
            .bind($filter.since)
            .bind($models.0)
            .bind($models.1)
            .bind($filter.until)
            .bind($filter.before_id)
            .bind($filter.latest_only)
    };
}

/// The recoveries matching a filter, newest first. Content is selected only when `$13`
/// (show_text) is true; `$12`: the rows at most.
const LIST_RECOVERIES: &str = concat!(
    "SELECT r.id, r.created_at, r.message_id, r.chat_id, \
       r.agent_id, r.source, r.event_id, r.mode, r.model, r.outcome, \
       CASE WHEN jsonb_typeof(r.summary -> 'bytes_removed') = 'number' \
            THEN (r.summary ->> 'bytes_removed')::numeric::bigint END AS bytes_removed, \
       r.reverted_at, r.reverted_by, r.revert_summary, \
       CASE WHEN $13 THEN r.content_before END AS content_before, \
       CASE WHEN $13 THEN r.content_after END AS content_after",
    matching!(),
    " ORDER BY r.id DESC LIMIT $12"
);

/// How many recoveries match a filter.
const COUNT_RECOVERIES: &str = concat!("SELECT count(*)", matching!());

/// The ids (recovery, message) of the recoveries matching a filter, newest first; `$12`:
/// the rows at most.
const MATCHING_IDS: &str = concat!(
    "SELECT r.id, r.message_id",
    matching!(),
    " ORDER BY r.id DESC LIMIT $12"
);

/// The model ids recorded in the rows a listing can reach (the `since` bound applied).
const RECORDED_MODELS: &str = "SELECT DISTINCT model FROM recoveries \
     WHERE model IS NOT NULL AND ($1::timestamptz IS NULL OR created_at >= $1)";

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
    Ok(list_cut(pool, filter, show_text).await?.entries)
}

/// A listing and whether its limit cut it.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The rows listed, at most the filter's limit.
    pub entries: Vec<Entry>,
    /// More rows match than the limit let through.
    pub cut: bool,
}

/// [`list`], also saying whether more rows match than the limit let through (one row more
/// is read to know, and dropped).
pub async fn list_cut(pool: &PgPool, filter: &Filter, show_text: bool) -> Result<Listing, Error> {
    let limit = filter.limit.clamp(1, MAX_LIMIT) as usize;
    let mut rows = recoveries(pool, filter, show_text, limit + 1).await?;
    let cut = rows.len() > limit;
    rows.truncate(limit);
    if rows.is_empty() {
        return Ok(Listing {
            entries: Vec::new(),
            cut,
        });
    }
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let mut items = items_of(pool, &ids, show_text).await?;
    let entries = rows
        .into_iter()
        .map(|row| {
            let items = items.remove(&row.id).unwrap_or_default();
            row.into_entry(items)
        })
        .collect();
    Ok(Listing { entries, cut })
}

/// How many ledger rows match `filter` (its limit and cursor aside: every row it reaches).
pub async fn count(pool: &PgPool, filter: &Filter) -> Result<i64, Error> {
    let models = model_ids(pool, filter).await?;
    Ok(
        bind_matching!(sqlx::query_scalar(COUNT_RECOVERIES), filter, models)
            .fetch_one(pool)
            .await?,
    )
}

/// A ledger row as a bulk action needs it: which row, which message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Matched {
    /// `recoveries.id`.
    #[sqlx(rename = "id")]
    pub recovery_id: i64,
    /// The message.
    pub message_id: i64,
}

/// The ids of the rows matching `filter`, newest first, at most its limit: one page of a
/// bulk action. The next page is the same filter with `before_id` set to the last
/// `recovery_id` of this one (keyset pagination: rows written meanwhile, with higher ids,
/// never shift a page).
pub async fn matching(pool: &PgPool, filter: &Filter) -> Result<Vec<Matched>, Error> {
    let models = model_ids(pool, filter).await?;
    let limit = i64::from(filter.limit.clamp(1, MAX_LIMIT));
    Ok(bind_matching!(sqlx::query_as(MATCHING_IDS), filter, models)
        .bind(limit)
        .fetch_all(pool)
        .await?)
}

/// The `recoveries` rows matching `filter`, newest first, at most `limit`.
async fn recoveries(
    pool: &PgPool,
    filter: &Filter,
    show_text: bool,
    limit: usize,
) -> Result<Vec<RecoveryRow>, Error> {
    let models = model_ids(pool, filter).await?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    Ok(
        bind_matching!(sqlx::query_as(LIST_RECOVERIES), filter, models)
            .bind(limit)
            .bind(show_text)
            .fetch_all(pool)
            .await?,
    )
}

/// The recorded model ids the filter's model matches (None: no model filter), and whether
/// rows without one match.
async fn model_ids(pool: &PgPool, filter: &Filter) -> Result<(Option<Vec<String>>, bool), Error> {
    Ok(match &filter.model {
        Some(m) => (
            Some(recorded_ids(pool, m, filter.since).await?),
            m.matches_none(),
        ),
        None => (None, false),
    })
}

/// The items of the recoveries `ids`, by recovery, each in the order of its message.
async fn items_of(
    pool: &PgPool,
    ids: &[i64],
    show_text: bool,
) -> Result<HashMap<i64, Vec<ItemEntry>>, Error> {
    let rows: Vec<ItemRow> = sqlx::query_as(LIST_ITEMS)
        .bind(ids)
        .bind(show_text)
        .fetch_all(pool)
        .await?;
    let mut items: HashMap<i64, Vec<ItemEntry>> = HashMap::with_capacity(ids.len());
    for row in rows {
        items.entry(row.recovery_id).or_default().push(row.into());
    }
    Ok(items)
}

/// A row of [`LIST_RECOVERIES`].
#[derive(sqlx::FromRow)]
struct RecoveryRow {
    id: i64,
    created_at: DateTime<Utc>,
    message_id: i64,
    chat_id: i64,
    agent_id: Option<i64>,
    source: String,
    event_id: Option<Uuid>,
    mode: String,
    model: Option<String>,
    outcome: String,
    /// From the pass's summary; None for a row without one.
    bytes_removed: Option<i64>,
    reverted_at: Option<DateTime<Utc>>,
    reverted_by: Option<String>,
    revert_summary: Option<Json<Value>>,
    content_before: Option<String>,
    content_after: Option<String>,
}

impl RecoveryRow {
    /// The entry of this row with its items: their families, distinct, in item order, and
    /// the bytes removed (the summary's, else the sum over the leaks: the items of one
    /// leak share its span).
    fn into_entry(self, items: Vec<ItemEntry>) -> Entry {
        let mut families: Vec<String> = Vec::new();
        for item in &items {
            if !families.contains(&item.family) {
                families.push(item.family.clone());
            }
        }
        let bytes_removed = self.bytes_removed.unwrap_or_else(|| {
            let mut leaks: Vec<(i32, i64)> = items
                .iter()
                .map(|i| (i.leak_index, i.removed_bytes))
                .collect();
            leaks.dedup_by_key(|(leak, _)| *leak);
            leaks.iter().map(|(_, bytes)| bytes).sum()
        });
        Entry {
            recovery_id: self.id,
            created_at: self.created_at,
            message_id: self.message_id,
            chat_id: self.chat_id,
            agent_id: self.agent_id,
            source: self.source,
            event_id: self.event_id,
            mode: self.mode,
            model: self.model,
            outcome: self.outcome,
            families,
            bytes_removed,
            reverted: self.reverted_at.is_some(),
            reverted_at: self.reverted_at,
            reverted_by: self.reverted_by,
            revert_summary: self.revert_summary.map(|j| j.0),
            content_before: self.content_before,
            content_after: self.content_after,
            items,
        }
    }
}

/// A row of [`LIST_ITEMS`].
#[derive(sqlx::FromRow)]
struct ItemRow {
    recovery_id: i64,
    leak_index: i32,
    item_index: i32,
    family: String,
    outcome: String,
    call_name: Option<String>,
    call_arguments: Option<Json<Value>>,
    result_object: Option<Json<Value>>,
    detail: Option<String>,
    memory_id: Option<i64>,
    tool_message_id: Option<i64>,
    span_start: i32,
    span_end: i32,
    removed_text: Option<String>,
}

impl From<ItemRow> for ItemEntry {
    fn from(row: ItemRow) -> Self {
        // A `needs_review` leak is left in place: nothing of its span was removed.
        let removed_bytes = if row.outcome == Outcome::NeedsReview.as_str() {
            0
        } else {
            (i64::from(row.span_end) - i64::from(row.span_start)).max(0)
        };
        ItemEntry {
            leak_index: row.leak_index,
            item_index: row.item_index,
            family: row.family,
            outcome: row.outcome,
            name: row.call_name,
            arguments: row.call_arguments.map(|j| j.0),
            result_object: row.result_object.map(|j| j.0),
            detail: row.detail,
            memory_id: row.memory_id,
            tool_message_id: row.tool_message_id,
            span_start: row.span_start,
            span_end: row.span_end,
            removed_bytes,
            removed_text: row.removed_text,
        }
    }
}

/// The recorded model ids `m` matches. Streamed and filtered as they come, so only the
/// matching ones are kept, however many distinct ids the events carried.
async fn recorded_ids(
    pool: &PgPool,
    m: &ModelFilter,
    since: Option<DateTime<Utc>>,
) -> Result<Vec<String>, Error> {
    let mut ids = Vec::new();
    let mut rows = sqlx::query_scalar::<_, String>(RECORDED_MODELS)
        .bind(since)
        .fetch(pool);
    while let Some(id) = rows.try_next().await? {
        if m.matches(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() && !m.matches_none() && !m.models.names().any(|n| n == m.name.trim()) {
        tracing::warn!(
            model = %m.name,
            "no ledger row records this model id, and it is not a label of the model list \
             (--models): nothing to list"
        );
    }
    Ok(ids)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_filter_matches_the_recorded_id_or_its_label() {
        let f = |name: &str| ModelFilter {
            name: name.to_string(),
            models: Models::default(),
        };
        let recorded = "models/gemini-2.5-flash-preview-05-20";
        assert!(f("gemini-2.5-flash").matches(recorded));
        assert!(f(" Models/Gemini-2.5-Flash-Preview-05-20 ").matches(recorded));
        assert!(!f("gemini-2.5-flash-lite").matches(recorded));
        assert!(
            !f("gemini").matches(recorded),
            "the label, not a prefix of it"
        );
        assert!(f("other").matches("acme-9000"));
        assert!(!f("other").matches(recorded));
        assert!(f("unknown").matches_none());
        assert!(!f("gemini-2.5-flash").matches_none());
    }
}
