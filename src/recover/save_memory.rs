//! Running save_memory, the one tool the worker runs itself: validating the arguments,
//! inserting the memory, and the `role='tool'` message that records the result (or the
//! error) one second before the assistant message. Other calls are only classified
//! (`forwarded`) here.
//!
//! May depend on: the parent `recover`, `error`, `toolcall_detect`, `sqlx`, `chrono`.

use super::ledger::without_nul;
use super::{bare_item, tool_label, Item, MessageRow, Outcome, SAVE_MEMORY};
use crate::error::Error;
use crate::ids::MessageId;
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgConnection;
use toolcall_detect::{Call, Config, Leak};

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
    pub(super) enabled_tools: &'a [String],
    pub(super) config: &'a Config,
}

impl CallCtx<'_> {
    fn tool_call_id(&self, ordinal: usize) -> String {
        format!("tcr-{}-{ordinal}", self.message_id)
    }

    /// Runs one call: save_memory is executed (or refused), anything else is forwarded.
    pub(super) async fn run_call(
        &self,
        conn: &mut PgConnection,
        leak: &Leak,
        call: &Call,
        ordinal: usize,
    ) -> Result<Item, Error> {
        if call.name != SAVE_MEMORY {
            let mut item = bare_item(leak, Outcome::Forwarded, None);
            item.report.name = Some(call.name.clone());
            item.report.tool_label = tool_label(&call.name, self.enabled_tools);
            item.report.arguments = Some(call.arguments.clone());
            return Ok(item);
        }
        if !self.enabled_tools.iter().any(|t| t == SAVE_MEMORY) {
            return self
                .refuse(
                    conn,
                    leak,
                    Some(call),
                    Outcome::ToolNotEnabled,
                    "save_memory is not enabled for this agent",
                    ordinal,
                )
                .await;
        }
        let memory = match MemoryArgs::parse(&call.arguments, self.config) {
            Ok(m) => m,
            Err(reason) => {
                return self
                    .refuse(
                        conn,
                        leak,
                        Some(call),
                        Outcome::InvalidArgs,
                        reason,
                        ordinal,
                    )
                    .await
            }
        };
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
        let mut item = bare_item(leak, Outcome::Recovered, None);
        item.report.name = Some(call.name.clone());
        item.report.tool_label = SAVE_MEMORY.into();
        item.report.arguments = Some(call.arguments.clone());
        item.report.memory_id = Some(memory_id);
        item.report.tool_message_id = Some(tool_message_id);
        item.tool_call_id = Some(tool_call_id);
        Ok(item)
    }

    /// A save_memory that cannot run: a tool message records the error.
    pub(super) async fn refuse(
        &self,
        conn: &mut PgConnection,
        leak: &Leak,
        call: Option<&Call>,
        outcome: Outcome,
        reason: &str,
        ordinal: usize,
    ) -> Result<Item, Error> {
        let tool_call_id = self.tool_call_id(ordinal);
        let result = json!({"success": false, "error": reason});
        let tool_message_id = self.tool_message(conn, &result, &tool_call_id).await?;
        let mut item = bare_item(leak, outcome, Some(SAVE_MEMORY));
        item.report.name = Some(SAVE_MEMORY.into());
        item.report.arguments = call.map(|c| c.arguments.clone());
        item.report.detail = Some(reason.to_string());
        item.report.tool_message_id = Some(tool_message_id);
        item.tool_call_id = Some(tool_call_id);
        Ok(item)
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

/// save_memory arguments that can be saved.
struct MemoryArgs {
    content: String,
    memory_type: String,
    expires_at: Option<DateTime<Utc>>,
}

impl MemoryArgs {
    fn parse(args: &Value, config: &Config) -> Result<MemoryArgs, &'static str> {
        let obj = args.as_object().ok_or("arguments are not an object")?;
        let content = memory_content(args).ok_or("content is missing or blank")?;
        let memory_type = obj
            .get("memory_type")
            .and_then(Value::as_str)
            .map(str::trim)
            .ok_or("memory_type is missing")?;
        if !config.memory_type_allowed(memory_type) {
            return Err("memory_type is not allowed");
        }
        let expires_at = obj
            .get("expires_around")
            .and_then(Value::as_str)
            .and_then(parse_date);
        Ok(MemoryArgs {
            content,
            memory_type: memory_type.to_string(),
            expires_at,
        })
    }
}

/// The memory content save_memory writes for these arguments (trimmed, without NUL), if
/// any. A revert compares the memory with it to tell whether the app edited it since.
pub(super) fn memory_content(args: &Value) -> Option<String> {
    args.get("content")
        .and_then(Value::as_str)
        .map(|s| s.replace('\0', "").trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `expires_around` as a timestamp: RFC 3339, a naive date-time (UTC), or a date
/// (midnight UTC). Anything else is no expiry, and so is a date PostgreSQL cannot hold
/// (`timestamptz` spans 4713 BC to 294276 AD): a leak must not be able to make the insert
/// fail and the message skip recovery.
fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    parse_any_date(s.trim()).filter(|t| (PG_MIN_YEAR..=PG_MAX_YEAR).contains(&t.year()))
}

/// The years `timestamptz` holds whole (chrono counts 1 BC as year 0).
const PG_MIN_YEAR: i32 = -4712;
const PG_MAX_YEAR: i32 = 294_275;

fn parse_any_date(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dates() {
        assert!(parse_date("2026-03-01").is_some());
        assert!(parse_date("2026-03-01T10:00:00Z").is_some());
        assert!(parse_date("next week").is_none());
    }

    #[test]
    fn dates_postgres_cannot_hold_are_no_expiry() {
        for out_of_range in ["-5000-01-01", "+300000-01-01", "-4713-06-01T00:00:00"] {
            assert!(parse_date(out_of_range).is_none(), "{out_of_range}");
        }
        assert!(parse_date("-4712-06-01").is_some());
        assert!(parse_date("9999-12-31").is_some());
    }

    #[test]
    fn validates_memory_args() {
        let c = Config::default();
        assert!(MemoryArgs::parse(&json!({"content": "x", "memory_type": "fact"}), &c).is_ok());
        assert!(MemoryArgs::parse(&json!({"content": " ", "memory_type": "fact"}), &c).is_err());
        assert!(MemoryArgs::parse(&json!({"content": "x", "memory_type": "nope"}), &c).is_err());
    }
}
