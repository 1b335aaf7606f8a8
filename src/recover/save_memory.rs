//! The effects of save_memory, the one tool the worker runs itself: inserting the memories
//! and the `role='tool'` messages that record each result (or error) one second before the
//! assistant message. What to run is decided in `plan.rs`; this writes it for every pass of
//! a batch at once: one statement for the memories, one for the tool messages.
//!
//! May depend on: the parent `recover`, `ids`, `error`, `sqlx`, `chrono`.

use super::ledger::without_nul;
use super::pass::Work;
use super::plan::{Effect, MemoryArgs};
use super::SAVE_MEMORY;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{PgConnection, Row};
use std::collections::HashMap;

/// The memories, in the order given. RETURNING promises no order, but the ids are drawn
/// from the column's default as the rows are inserted, in that order: ascending ids are
/// the order given (as for the outbox's rows).
const INSERT_MEMORIES: &str =
    "INSERT INTO agent_memories (agent_id, content, memory_type, expires_at) \
     SELECT a, c, t, e FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) \
       WITH ORDINALITY AS u(a, c, t, e, n) ORDER BY n \
     RETURNING id";
/// The tool messages; each comes back with its `tool_call_id`, unique in a batch.
const INSERT_TOOL_MESSAGES: &str = "INSERT INTO messages \
     (chat_id, agent_id, role, content, tool_call_id, tool_name, created_at, updated_at) \
     SELECT c, a, 'tool', b, k, $6, t, now() \
     FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[]) \
       WITH ORDINALITY AS u(c, a, b, k, t, n) ORDER BY n \
     RETURNING id, tool_call_id";

/// The `tool_call_id` of a pass's call: the message and the call's place among its calls.
fn tool_call_id(message_id: i64, ordinal: usize) -> String {
    format!("tcr-{message_id}-{ordinal}")
}

/// Runs the save_memory effects of `works`: inserts their memories, then the tool messages
/// of their results and errors, and puts the ids in their items.
pub(super) async fn write(
    conn: &mut PgConnection,
    works: &mut [&mut Work<'_>],
) -> Result<(), Error> {
    let memory_ids = insert_memories(conn, works).await?;
    let mut memory_ids = memory_ids.into_iter();
    let mut messages = ToolMessages::default();
    for work in works.iter_mut() {
        let row = &work.row;
        let created_at = row.created_at - chrono::Duration::seconds(1);
        for (i, effect) in work.pass.effects.iter().enumerate() {
            let (result, memory_id, ordinal) = match effect {
                Effect::None => continue,
                Effect::SaveMemory { memory, ordinal } => {
                    let id = memory_ids
                        .next()
                        .ok_or_else(|| Error::Bug("a memory without its id".into()))?;
                    (saved(id, memory), Some(id), *ordinal)
                }
                Effect::RecordError { reason, ordinal } => {
                    (json!({"success": false, "error": reason}), None, *ordinal)
                }
            };
            let call_id = tool_call_id(row.id, ordinal);
            let item = &mut work.pass.items[i];
            item.report.memory_id = memory_id;
            item.tool_call_id = Some(call_id.clone());
            messages.push(
                row.chat_id,
                row.agent_id,
                without_nul(&result).to_string(),
                call_id,
                created_at,
            );
        }
    }
    let ids = messages.insert(conn).await?;
    for work in works.iter_mut() {
        for item in &mut work.pass.items {
            if let Some(call_id) = &item.tool_call_id {
                let id = ids.get(call_id).copied().ok_or_else(|| {
                    Error::Bug(format!("no tool message came back for {call_id}"))
                })?;
                item.report.tool_message_id = Some(id);
            }
        }
    }
    Ok(())
}

/// The result a saved memory's tool message records.
fn saved(memory_id: i64, memory: &MemoryArgs) -> serde_json::Value {
    json!({
        "success": true,
        "memory_id": memory_id,
        "memory_type": memory.memory_type,
        "content": memory.content,
        "recovered": true,
    })
}

/// Inserts the memories of every save_memory of `works` (one statement); returns their
/// ids in the order of the passes and their items.
async fn insert_memories(
    conn: &mut PgConnection,
    works: &[&mut Work<'_>],
) -> Result<Vec<i64>, Error> {
    let mut agents = Vec::new();
    let mut memories: Vec<&MemoryArgs> = Vec::new();
    for work in works {
        for effect in &work.pass.effects {
            if let Effect::SaveMemory { memory, .. } = effect {
                let Some(agent_id) = work.row.agent_id else {
                    return Err(Error::Bug(
                        "save_memory run on a message without agent".into(),
                    ));
                };
                agents.push(agent_id);
                memories.push(memory);
            }
        }
    }
    if memories.is_empty() {
        return Ok(Vec::new());
    }
    let contents: Vec<&str> = memories.iter().map(|m| m.content.as_str()).collect();
    let types: Vec<&str> = memories.iter().map(|m| m.memory_type.as_str()).collect();
    let expiries: Vec<Option<DateTime<Utc>>> = memories.iter().map(|m| m.expires_at).collect();
    let mut ids: Vec<i64> = sqlx::query_scalar(INSERT_MEMORIES)
        .bind(&agents)
        .bind(&contents)
        .bind(&types)
        .bind(&expiries)
        .fetch_all(&mut *conn)
        .await?;
    if ids.len() != contents.len() {
        return Err(Error::Bug(format!(
            "{} memory ids for {} memories",
            ids.len(),
            contents.len()
        )));
    }
    ids.sort_unstable();
    Ok(ids)
}

/// The tool messages of a batch, one array per column.
#[derive(Default)]
struct ToolMessages {
    chats: Vec<i64>,
    agents: Vec<Option<i64>>,
    bodies: Vec<String>,
    call_ids: Vec<String>,
    created: Vec<DateTime<Utc>>,
}

impl ToolMessages {
    fn push(
        &mut self,
        chat: i64,
        agent: Option<i64>,
        body: String,
        call_id: String,
        created: DateTime<Utc>,
    ) {
        self.chats.push(chat);
        self.agents.push(agent);
        self.bodies.push(body);
        self.call_ids.push(call_id);
        self.created.push(created);
    }

    /// Inserts them (one statement); returns their ids by `tool_call_id`.
    async fn insert(self, conn: &mut PgConnection) -> Result<HashMap<String, i64>, Error> {
        if self.chats.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = sqlx::query(INSERT_TOOL_MESSAGES)
            .bind(&self.chats)
            .bind(&self.agents)
            .bind(&self.bodies)
            .bind(&self.call_ids)
            .bind(&self.created)
            .bind(SAVE_MEMORY)
            .fetch_all(&mut *conn)
            .await?;
        let mut ids = HashMap::with_capacity(rows.len());
        for row in rows {
            ids.insert(row.try_get("tool_call_id")?, row.try_get("id")?);
        }
        Ok(ids)
    }
}
