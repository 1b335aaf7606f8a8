//! The keyset walk over history: pages of assistant messages that can hold a leak, in id
//! order, never with OFFSET (each page starts after the last id of the one before, so a
//! page costs the same at the end of a large table as at its start).
//!
//! The SQL prefilter keeps rows whose content has one of the bytes every leak marker is
//! anchored on (`<`, `[`, `{`; a JSON fence leak holds an object, so `{`), the same anchors
//! the detection prefilter scans for: it never drops a row detection could call a leak.
//!
//! May depend on: `error`, `sqlx`.

use crate::error::Error;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgPool, Row};

/// The anchor bytes of every leak marker, as a PostgreSQL regular expression.
const MAY_HOLD_A_LEAK: &str = "[<\\[{]";

const PAGE: &str = "SELECT m.id, m.chat_id, m.agent_id, m.content, m.tools_used, \
       coalesce(a.enabled_tools, '{}') AS enabled_tools \
     FROM messages m LEFT JOIN agents a ON a.id = m.agent_id \
     WHERE m.id > $1 AND m.id <= $2 AND m.role = 'assistant' AND m.content ~ $3 \
     ORDER BY m.id LIMIT $4";

const LAST_ID: &str = "SELECT max(id) FROM messages WHERE id <= $1";

/// A message the walk examines, as read in the page.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// `messages.id`.
    pub id: i64,
    /// `messages.chat_id`.
    pub chat_id: i64,
    /// `messages.agent_id`.
    pub agent_id: Option<i64>,
    /// `messages.content` (never NULL here: the prefilter needs text).
    pub content: String,
    /// `messages.tools_used`, string entries.
    pub tools_used: Vec<String>,
    /// The agent's enabled tools (empty without an agent).
    pub enabled_tools: Vec<String>,
}

/// Up to `limit` candidates with `after < id <= until`, in id order.
pub async fn page(
    pool: &PgPool,
    after: i64,
    until: i64,
    limit: i64,
) -> Result<Vec<Candidate>, Error> {
    let rows = sqlx::query(PAGE)
        .bind(after)
        .bind(until)
        .bind(MAY_HOLD_A_LEAK)
        .bind(limit)
        .fetch_all(pool)
        .await?;
    rows.iter().map(candidate).collect()
}

pub(super) fn candidate(row: &sqlx::postgres::PgRow) -> Result<Candidate, Error> {
    let tools_used = row.try_get::<Json<Value>, _>("tools_used")?.0;
    Ok(Candidate {
        id: row.try_get("id")?,
        chat_id: row.try_get("chat_id")?,
        agent_id: row.try_get("agent_id")?,
        content: row.try_get("content")?,
        tools_used: tools_used
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        enabled_tools: row.try_get("enabled_tools")?,
    })
}

/// The highest message id at most `until` (for the progress bar's length), 0 when none.
pub async fn last_id(pool: &PgPool, until: i64) -> Result<i64, Error> {
    let id: Option<i64> = sqlx::query_scalar(LAST_ID)
        .bind(until)
        .fetch_one(pool)
        .await?;
    Ok(id.unwrap_or(0))
}
