//! The demo's rows: the agent, chat and message it seeds (nothing else is written), and
//! what it reads back of them once the worker is done: the ledger row, the message, the
//! memory and the tool message.
//!
//! May depend on: `error`, `sqlx`, `serde_json`, `tokio`.

use crate::error::Error;
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgPool, Row};
use std::time::Duration;

/// What the demo wrote.
#[derive(Debug, Clone, Copy)]
pub struct Seeded {
    /// The demo agent (save_memory enabled).
    pub agent: i64,
    /// The demo chat.
    pub chat: i64,
    /// The assistant message with the leak.
    pub message: i64,
}

const INSERT_AGENT: &str = "INSERT INTO agents (name, enabled_tools) \
     VALUES ('toolcall-recovery demo', ARRAY['save_memory']) RETURNING id";
const INSERT_CHAT: &str = "INSERT INTO chats DEFAULT VALUES RETURNING id";
const INSERT_MESSAGE: &str = "INSERT INTO messages (chat_id, agent_id, role, content, tools_used) \
     VALUES ($1, $2, 'assistant', $3, '[]'::jsonb) RETURNING id";

/// Writes the agent, the chat and the message in one transaction, committed before the event
/// is published (the worker looks the message up).
pub async fn seed(pool: &PgPool, content: &str) -> Result<Seeded, Error> {
    let mut tx = pool.begin().await?;
    let agent: i64 = sqlx::query_scalar(INSERT_AGENT).fetch_one(&mut *tx).await?;
    let chat: i64 = sqlx::query_scalar(INSERT_CHAT).fetch_one(&mut *tx).await?;
    let message: i64 = sqlx::query_scalar(INSERT_MESSAGE)
        .bind(chat)
        .bind(agent)
        .bind(content)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Seeded {
        agent,
        chat,
        message,
    })
}

/// Deletes what [`seed`] wrote, when its event could not be published (no worker listening):
/// the demo leaves nothing behind that nobody will look at.
pub async fn unseed(pool: &PgPool, seeded: Seeded) -> Result<(), Error> {
    let mut tx = pool.begin().await?;
    for (sql, id) in [
        ("DELETE FROM messages WHERE id = $1", seeded.message),
        ("DELETE FROM chats WHERE id = $1", seeded.chat),
        ("DELETE FROM agents WHERE id = $1", seeded.agent),
    ] {
        sqlx::query(sql).bind(id).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The worker's ledger row for the message.
#[derive(Debug, Clone)]
pub struct LedgerRow {
    /// Its id.
    pub id: i64,
    /// The pass's outcome (`recovered`, ...).
    pub outcome: String,
    /// `recover` or `observe`.
    pub mode: String,
    /// The `recovery` object published with the moderation message.
    pub summary: Value,
}

/// Polls the ledger until the worker wrote a row for `message`, for at most `wait`.
pub async fn wait_for_ledger(
    pool: &PgPool,
    message: i64,
    wait: Duration,
) -> Result<Option<LedgerRow>, Error> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let row = sqlx::query(
            "SELECT id, outcome, mode, summary FROM recoveries WHERE message_id = $1 \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(message)
        .fetch_optional(pool)
        .await?;
        if let Some(row) = row {
            return Ok(Some(LedgerRow {
                id: row.try_get("id")?,
                outcome: row.try_get("outcome")?,
                mode: row.try_get("mode")?,
                summary: row.try_get::<Json<Value>, _>("summary")?.0,
            }));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The seeded rows as the worker left them.
#[derive(Debug, Clone)]
pub struct After {
    /// The message's content now.
    pub content: Option<String>,
    /// Its `tools_used` now.
    pub tools_used: Value,
    /// The agent's memories: id, type, content.
    pub memories: Vec<(i64, String, String)>,
    /// The chat's `role='tool'` messages: id, tool name, content.
    pub tool_messages: Vec<(i64, Option<String>, Option<String>)>,
}

/// Reads back the message, the agent's memories and the chat's tool messages.
pub async fn after(pool: &PgPool, seeded: Seeded) -> Result<After, Error> {
    let message = sqlx::query("SELECT content, tools_used FROM messages WHERE id = $1")
        .bind(seeded.message)
        .fetch_one(pool)
        .await?;
    let memories = sqlx::query(
        "SELECT id, memory_type, content FROM agent_memories WHERE agent_id = $1 ORDER BY id",
    )
    .bind(seeded.agent)
    .fetch_all(pool)
    .await?;
    let tool_messages = sqlx::query(
        "SELECT id, tool_name, content FROM messages WHERE chat_id = $1 AND role = 'tool' \
         ORDER BY id",
    )
    .bind(seeded.chat)
    .fetch_all(pool)
    .await?;
    let (memories, tool_messages) = (
        triples(&memories, "memory_type")?,
        triples(&tool_messages, "tool_name")?,
    );
    Ok(After {
        content: message.try_get("content")?,
        tools_used: message.try_get::<Json<Value>, _>("tools_used")?.0,
        memories,
        tool_messages,
    })
}

/// The `(id, <column>, content)` of each row.
fn triples<T>(rows: &[PgRow], column: &str) -> Result<Vec<(i64, T, T)>, sqlx::Error>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    rows.iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get(column)?, r.try_get("content")?)))
        .collect()
}
