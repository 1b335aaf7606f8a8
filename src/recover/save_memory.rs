//! The effects of save_memory, the one tool the worker runs itself: inserting the memory
//! and the `role='tool'` message that records the result (or the error) one second before
//! the assistant message. What to run is decided in `plan.rs`.
//!
//! May depend on: the parent `recover`, `ids`, `error`, `sqlx`, `chrono`.

use super::ledger::without_nul;
use super::plan::MemoryArgs;
use super::{MessageRow, SAVE_MEMORY};
use crate::error::Error;
use crate::ids::MessageId;
use serde_json::{json, Value};
use sqlx::PgConnection;

const INSERT_MEMORY: &str =
    "INSERT INTO agent_memories (agent_id, content, memory_type, expires_at) \
     VALUES ($1, $2, $3, $4) RETURNING id";
const INSERT_TOOL_MESSAGE: &str = "INSERT INTO messages \
     (chat_id, agent_id, role, content, tool_call_id, tool_name, created_at, updated_at) \
     VALUES ($1, $2, 'tool', $3, $4, $5, $6, now()) RETURNING id";

/// What running a call needs to know about the message.
pub(super) struct CallCtx<'a> {
    pub(super) row: &'a MessageRow,
    pub(super) message_id: MessageId,
}

/// The ids a save_memory call wrote.
pub(super) struct Written {
    pub(super) memory_id: Option<i64>,
    pub(super) tool_message_id: i64,
    pub(super) tool_call_id: String,
}

impl CallCtx<'_> {
    fn tool_call_id(&self, ordinal: usize) -> String {
        format!("tcr-{}-{ordinal}", self.message_id)
    }

    /// Saves the memory and the tool message of its result.
    pub(super) async fn save(
        &self,
        conn: &mut PgConnection,
        memory: &MemoryArgs,
        ordinal: usize,
    ) -> Result<Written, Error> {
        let Some(agent_id) = self.row.agent_id else {
            return Err(Error::Bug(
                "save_memory run on a message without agent".into(),
            ));
        };
        let memory_id: i64 = sqlx::query_scalar(INSERT_MEMORY)
            .bind(agent_id)
            .bind(&memory.content)
            .bind(&memory.memory_type)
            .bind(memory.expires_at)
            .fetch_one(&mut *conn)
            .await?;
        let result = json!({
            "success": true,
            "memory_id": memory_id,
            "memory_type": memory.memory_type,
            "content": memory.content,
            "recovered": true,
        });
        let tool_call_id = self.tool_call_id(ordinal);
        let tool_message_id = self.tool_message(conn, &result, &tool_call_id).await?;
        Ok(Written {
            memory_id: Some(memory_id),
            tool_message_id,
            tool_call_id,
        })
    }

    /// A save_memory that cannot run: a tool message records the error.
    pub(super) async fn record_error(
        &self,
        conn: &mut PgConnection,
        reason: &str,
        ordinal: usize,
    ) -> Result<Written, Error> {
        let tool_call_id = self.tool_call_id(ordinal);
        let result = json!({"success": false, "error": reason});
        let tool_message_id = self.tool_message(conn, &result, &tool_call_id).await?;
        Ok(Written {
            memory_id: None,
            tool_message_id,
            tool_call_id,
        })
    }

    async fn tool_message(
        &self,
        conn: &mut PgConnection,
        result: &Value,
        tool_call_id: &str,
    ) -> Result<i64, Error> {
        let created_at = self.row.created_at - chrono::Duration::seconds(1);
        Ok(sqlx::query_scalar(INSERT_TOOL_MESSAGE)
            .bind(self.row.chat_id)
            .bind(self.row.agent_id)
            .bind(without_nul(result).to_string())
            .bind(tool_call_id)
            .bind(SAVE_MEMORY)
            .bind(created_at)
            .fetch_one(&mut *conn)
            .await?)
    }
}
