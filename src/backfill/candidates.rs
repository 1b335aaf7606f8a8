//! The keyset walk over history: pages of assistant messages that can hold a leak, in id
//! order, never with OFFSET (each page starts after the last id of the one before, so a
//! page costs the same at the end of a large table as at its start).
//!
//! The SQL prefilter keeps rows whose content has one of the bytes every leak marker is
//! anchored on (`<`, `[`, `{`; a JSON fence leak holds an object, so `{`), the same anchors
//! the detection prefilter scans for: it never drops a row detection could call a leak.
//! It is three `strpos` calls, a byte search each, rather than one regular expression,
//! which made the server's page query about 1.7 times as long (BENCHMARKS.md §3): the
//! server's scan is what bounds the walk. The bytes are ASCII, so in UTF-8 a byte match is
//! a character match.
//!
//! The agents' enabled tools come from a second, small query per page (the agents the page
//! names), not from a join, which would send the same array with every row and have it
//! decoded here into an allocation per row.
//!
//! The model that wrote a message is one more column of the page, when the app's
//! `messages` table has the column `--model-column` names ([`ModelColumn`], looked up once
//! at start); the contract's table has none, and then every model is unknown.
//!
//! May depend on: `error`, `sqlx`, `futures-util`.

use crate::error::Error;
use futures_util::TryStreamExt;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::PgPool;
use std::collections::HashMap;

/// The anchor bytes of every leak marker.
const ANCHORS: [&str; 3] = ["<", "[", "{"];

/// `tools_used` is sent only when not `[]` (as it is for nearly every message): an empty
/// array would still cost a conversion to text on the server and a parse here. `{model}`
/// is the model column's expression ([`ModelColumn`]), filled in once at start.
const PAGE: &str = "SELECT id, chat_id, agent_id, content, NULLIF(tools_used, '[]'), {model} \
     FROM messages \
     WHERE id > $1 AND id <= $2 AND role = 'assistant' \
       AND (strpos(content, $3) > 0 OR strpos(content, $4) > 0 OR strpos(content, $5) > 0) \
     ORDER BY id LIMIT $6";

/// The type of a column of the `messages` table the unqualified name resolves to (the one
/// the page query reads, whatever schema the search path finds it in), NULL without it.
const COLUMN_TYPE: &str = "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
     WHERE attrelid = to_regclass('messages') AND attname = $1 AND attnum > 0 \
       AND NOT attisdropped";

const AGENT_TOOLS: &str = "SELECT id, enabled_tools FROM agents WHERE id = ANY($1)";

const LAST_ID: &str = "SELECT max(id) FROM messages WHERE id <= $1";

/// Content bytes a page holds at most (it may pass it by its last row): a page of large
/// messages is cut short, and the next page starts after its last row. With the page being
/// examined and the two the reader keeps ahead, about 24 MiB of rows: inside the worker's
/// default byte budget (`--max-in-flight-bytes`, 32 MiB), as for a worker's deliveries.
pub const PAGE_BYTES: usize = 8 << 20;

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
    /// The model column's value (None without a model column, or NULL).
    pub model: Option<String>,
}

/// Where the walk reads the model that wrote a message: a column of the app's `messages`
/// table, or nowhere.
#[derive(Debug, Clone)]
pub struct ModelColumn {
    /// The column's name, when the table has it.
    name: Option<String>,
    /// [`PAGE`] with the column (or NULL) in it.
    page: String,
}

impl Default for ModelColumn {
    /// No model column: every model is unknown.
    fn default() -> Self {
        ModelColumn::with(None)
    }
}

impl ModelColumn {
    /// Looks the column `name` up in the `messages` table (once, at start); no column of
    /// that name, or an empty name, reads no model. Any type is read as text.
    pub async fn find(pool: &PgPool, name: &str) -> Result<ModelColumn, Error> {
        if name.is_empty() {
            return Ok(ModelColumn::default());
        }
        let found: Option<Option<String>> = sqlx::query_scalar(COLUMN_TYPE)
            .bind(name)
            .fetch_optional(pool)
            .await?;
        match found.flatten() {
            Some(ty) => {
                tracing::info!(column = name, r#type = %ty, "backfill: the model of each message is read from messages.{name}");
                Ok(ModelColumn::with(Some(name)))
            }
            None => {
                tracing::info!(
                    column = name,
                    "backfill: messages has no such column; every message's model is unknown \
                     (--model-column names the app's column)"
                );
                Ok(ModelColumn::default())
            }
        }
    }

    fn with(name: Option<&str>) -> ModelColumn {
        let column = ModelColumn {
            name: name.map(str::to_string),
            page: String::new(),
        };
        ModelColumn {
            page: PAGE.replace("{model}", &column.select("")),
            ..column
        }
    }

    /// The column's name, when the walk reads one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The select-list expression of the model: the column, quoted and read as text
    /// (qualified by `table`, when given), or NULL.
    pub fn select(&self, table: &str) -> String {
        match &self.name {
            Some(name) => {
                let dot = if table.is_empty() { "" } else { "." };
                // A quoted identifier, its quotes doubled: the name is configuration, and
                // this is the one place it becomes SQL. It was also found in the catalog.
                format!("{table}{dot}\"{}\"::text", name.replace('"', "\"\""))
            }
            None => "NULL::text".to_string(),
        }
    }
}

/// Up to `limit` candidates with `after < id <= until`, in id order, holding up to about
/// [`PAGE_BYTES`] of content. Rows are decoded as they arrive, while the server is still
/// scanning for the rest.
pub async fn page(
    pool: &PgPool,
    model: &ModelColumn,
    after: i64,
    until: i64,
    limit: i64,
) -> Result<Vec<Candidate>, Error> {
    let mut candidates: Vec<Candidate> =
        Vec::with_capacity(usize::try_from(limit.clamp(0, 10_000)).unwrap_or(0));
    let mut rows = sqlx::query_as::<_, PageRow>(&model.page)
        .bind(after)
        .bind(until)
        .bind(ANCHORS[0])
        .bind(ANCHORS[1])
        .bind(ANCHORS[2])
        .bind(limit)
        .fetch(pool);
    let mut bytes = 0;
    while let Some(row) = rows.try_next().await? {
        let c: Candidate = row.into();
        bytes += c.content.len();
        candidates.push(c);
        if bytes >= PAGE_BYTES {
            break;
        }
    }
    drop(rows);
    let mut agents: Vec<i64> = candidates.iter().filter_map(|c| c.agent_id).collect();
    agents.sort_unstable();
    agents.dedup();
    if agents.is_empty() {
        return Ok(candidates);
    }
    let tools: HashMap<i64, Vec<String>> = sqlx::query_as(AGENT_TOOLS)
        .bind(&agents)
        .fetch_all(pool)
        .await?
        .into_iter()
        .collect();
    for c in &mut candidates {
        // An agent deleted since the page was read has no tools, as a message without one.
        if let Some(enabled) = c.agent_id.and_then(|a| tools.get(&a)) {
            c.enabled_tools.clone_from(enabled);
        }
    }
    Ok(candidates)
}

/// A row of [`PAGE`], by position (its columns are expressions; the revisit's query has
/// the same first six).
#[derive(sqlx::FromRow)]
pub(super) struct PageRow(
    /// `id`.
    i64,
    /// `chat_id`.
    i64,
    /// `agent_id`.
    Option<i64>,
    /// `content`.
    String,
    /// `tools_used`, NULL when `[]`.
    Option<Json<Value>>,
    /// The model column, as text.
    Option<String>,
);

impl From<PageRow> for Candidate {
    fn from(PageRow(id, chat_id, agent_id, content, tools_used, model): PageRow) -> Self {
        let tools_used = tools_used
            .and_then(|json| match json.0 {
                Value::Array(a) => Some(
                    a.into_iter()
                        .filter_map(|v| match v {
                            Value::String(s) => Some(s),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default();
        Candidate {
            id,
            chat_id,
            agent_id,
            content,
            tools_used,
            enabled_tools: Vec::new(),
            model,
        }
    }
}

/// The highest message id at most `until` (for the progress bar's length), 0 when none.
pub async fn last_id(pool: &PgPool, until: i64) -> Result<i64, Error> {
    let id: Option<i64> = sqlx::query_scalar(LAST_ID)
        .bind(until)
        .fetch_one(pool)
        .await?;
    Ok(id.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_column_is_quoted_or_null() {
        assert!(ModelColumn::default()
            .page
            .contains("NULLIF(tools_used, '[]'), NULL::text"));
        let c = ModelColumn::with(Some("model\"id"));
        assert_eq!(c.select("m"), "m.\"model\"\"id\"::text");
        assert!(c.page.contains("'[]'), \"model\"\"id\"::text"));
        assert!(!c.page.contains("{model}"));
    }
}
