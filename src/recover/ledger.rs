//! The ledger of the recovery: `recoveries` (one row per pass that changed or recorded
//! something) and `recovery_items` (one row per leaked call or result object, with the
//! removed text verbatim), the summary published with the moderation message, and the
//! ids derived from ledger rows.
//!
//! May depend on: the parent `recover`, `ids`, `error`, `sqlx`.

use super::plan::Item;
use super::{CallReport, ForwardedCall, MessageRow, Mode, Outcome, Source};
use crate::error::Error;
use crate::ids::{MessageId, ID_NAMESPACE};
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use toolcall_detect::Leak;
use uuid::Uuid;

const FORWARDED_ITEMS: &str = "SELECT id, call_name, call_arguments, family FROM recovery_items \
     WHERE recovery_id = $1 AND outcome = 'forwarded' ORDER BY leak_index, item_index";
const INSERT_RECOVERY: &str = "INSERT INTO recoveries (message_id, chat_id, agent_id, source, \
     event_id, outcome, content_before, content_after, tools_used_before, tools_used_after, \
     repaired_tool_message_ids, summary, mode, model) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id";
const INSERT_ITEM: &str = "INSERT INTO recovery_items (recovery_id, leak_index, item_index, \
     family, span_start, span_end, removed_text, call_name, call_arguments, result_object, \
     outcome, detail, memory_id, tool_message_id, tool_call_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id";

/// The latest ledger row of a message.
#[derive(Debug, Clone)]
pub(super) struct PrevRecovery {
    pub(super) id: i64,
    pub(super) event_id: Option<Uuid>,
    pub(super) summary: Value,
    pub(super) content_before: Option<String>,
    pub(super) content_after: Option<String>,
    pub(super) mode: Mode,
    pub(super) reverted: bool,
}

impl PrevRecovery {
    /// Whether the row's changes are in the message (applied, not reverted).
    pub(super) fn applied(&self) -> bool {
        self.mode == Mode::Recover && !self.reverted
    }
}

/// The latest ledger row of a message, from the `prev_*` columns of the recovery's
/// context query (all NULL when the message has none).
pub(super) fn prev_recovery(row: &PgRow) -> Result<Option<PrevRecovery>, Error> {
    let Some(id) = row.try_get::<Option<i64>, _>("prev_id")? else {
        return Ok(None);
    };
    Ok(Some(PrevRecovery {
        id,
        event_id: row.try_get("prev_event_id")?,
        summary: row.try_get::<Json<Value>, _>("prev_summary")?.0,
        content_before: row.try_get("prev_content_before")?,
        content_after: row.try_get("prev_content_after")?,
        mode: ledger_mode(&row.try_get::<String, _>("prev_mode")?)?,
        reverted: row.try_get("prev_reverted")?,
    }))
}

/// The mode of a ledger row; the column's CHECK allows nothing else.
pub(super) fn ledger_mode(label: &str) -> Result<Mode, Error> {
    Mode::from_label(label).ok_or_else(|| Error::Bug(format!("ledger mode {label:?}")))
}

/// The forwarded calls of a pass, to publish again.
pub(super) async fn forwarded_calls(
    conn: &mut PgConnection,
    recovery_id: i64,
) -> Result<Vec<ForwardedCall>, Error> {
    let rows = sqlx::query(FORWARDED_ITEMS)
        .bind(recovery_id)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let item_id: i64 = row.try_get("id")?;
        out.push(ForwardedCall {
            event_id: tool_call_event_id(item_id),
            name: row
                .try_get::<Option<String>, _>("call_name")?
                .unwrap_or_default(),
            arguments: row
                .try_get::<Option<Json<Value>>, _>("call_arguments")?
                .map_or(Value::Null, |j| j.0),
            family: row.try_get("family")?,
        });
    }
    Ok(out)
}

/// A `recoveries` row to write.
pub(super) struct NewRecovery<'a> {
    pub(super) message_id: MessageId,
    pub(super) row: &'a MessageRow,
    pub(super) source: Source,
    pub(super) mode: Mode,
    pub(super) outcome: Outcome,
    pub(super) content_before: &'a str,
    pub(super) content_after: &'a str,
    pub(super) tools_used_after: &'a Value,
    pub(super) repaired: &'a [i64],
    pub(super) summary: &'a Value,
}

/// Writes the `recoveries` row; returns its id.
pub(super) async fn insert_recovery(
    conn: &mut PgConnection,
    r: &NewRecovery<'_>,
) -> Result<i64, Error> {
    Ok(sqlx::query_scalar(INSERT_RECOVERY)
        .bind(r.message_id.get())
        .bind(r.row.chat_id)
        .bind(r.row.agent_id)
        .bind(r.source.label())
        .bind(r.source.event_id())
        .bind(r.outcome.as_str())
        .bind(r.content_before)
        .bind(r.content_after)
        .bind(Json(&r.row.tools_used))
        .bind(Json(r.tools_used_after))
        .bind(r.repaired)
        .bind(Json(r.summary))
        .bind(r.mode.as_str())
        .bind(r.source.model())
        .fetch_one(&mut *conn)
        .await?)
}

/// Writes one `recovery_items` row (the removed text cut from `content` by the leak's
/// span); returns its id.
pub(super) async fn insert_item(
    conn: &mut PgConnection,
    recovery_id: i64,
    item: &Item,
    leak: &Leak,
    content: &str,
) -> Result<i64, Error> {
    Ok(sqlx::query_scalar(INSERT_ITEM)
        .bind(recovery_id)
        .bind(item.leak_index as i32)
        .bind(item.item_index as i32)
        .bind(leak.family.as_str())
        .bind(leak.span.start as i32)
        .bind(leak.span.end as i32)
        .bind(content.get(leak.span.clone()).unwrap_or_default())
        .bind(item.report.name.as_deref())
        .bind(item.report.arguments.as_ref().map(|v| Json(without_nul(v))))
        .bind(item.result_object.as_ref().map(|v| Json(without_nul(v))))
        .bind(item.report.outcome.as_str())
        .bind(item.report.detail.as_deref())
        .bind(item.report.memory_id)
        .bind(item.report.tool_message_id)
        .bind(item.tool_call_id.as_deref())
        .fetch_one(&mut *conn)
        .await?)
}

/// The id of the tool-calls message for one ledger item.
pub fn tool_call_event_id(item_id: i64) -> Uuid {
    Uuid::new_v5(&ID_NAMESPACE, format!("tool_call:{item_id}").as_bytes())
}

/// The `recovery` object of a moderation message. `mode` says whether the pass changed
/// the message (`recover`) or only recorded what it would do (`observe`).
pub(super) fn summary_of(
    outcome: Outcome,
    mode: Mode,
    calls: &[CallReport],
    bytes_removed: usize,
) -> Value {
    let mut families: Vec<&str> = Vec::new();
    let mut outcomes: Vec<&str> = Vec::new();
    for c in calls {
        if !families.contains(&c.family.as_str()) {
            families.push(c.family.as_str());
        }
        if !outcomes.contains(&c.outcome.as_str()) {
            outcomes.push(c.outcome.as_str());
        }
    }
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "family": c.family.as_str(),
                "name": c.name,
                "arguments": c.arguments.as_ref().map(without_nul),
                "outcome": c.outcome.as_str(),
                "detail": c.detail,
            })
        })
        .collect();
    json!({
        "outcome": outcome.as_str(),
        "mode": mode.as_str(),
        "families": families,
        "calls": calls,
        "outcomes": outcomes,
        "bytes_removed": bytes_removed,
    })
}

/// PostgreSQL text and jsonb cannot hold NUL; a leaked argument may contain `\u0000`.
pub(super) fn without_nul(v: &Value) -> Value {
    match v {
        Value::String(s) if s.contains('\0') => Value::String(s.replace('\0', "")),
        Value::Array(a) => Value::Array(a.iter().map(without_nul).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.replace('\0', ""), without_nul(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_nul() {
        assert_eq!(without_nul(&json!({"a": "x\u{0}y"})), json!({"a": "xy"}));
    }
}
