//! The ledger of the recovery: `recoveries` (one row per pass that changed or recorded
//! something) and `recovery_items` (one row per leaked call or result object, with the
//! removed text verbatim), the summary published with the moderation message, and the
//! ids derived from ledger rows.
//!
//! May depend on: the parent `recover`, `ids`, `error`, `sqlx`.

use super::load::MessageRow;
use super::plan::Item;
use super::{CallReport, ForwardedCall, Mode, Outcome, Source};
use crate::error::Error;
use crate::ids::{MessageId, ID_NAMESPACE};
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use std::collections::HashMap;
use toolcall_detect::Leak;
use uuid::Uuid;

/// The forwarded items of several ledger rows, in each row's ledger order.
const FORWARDED_ITEMS: &str = "SELECT recovery_id, id, call_name, call_arguments, family \
     FROM recovery_items WHERE recovery_id = ANY($1) AND outcome = 'forwarded' \
     ORDER BY recovery_id, leak_index, item_index";
/// The `recoveries` rows of a batch, one array per column.
const INSERT_RECOVERIES: &str = "INSERT INTO recoveries (message_id, chat_id, agent_id, \
     source, event_id, outcome, content_before, content_after, tools_used_before, \
     tools_used_after, repaired_tool_message_ids, summary, mode, model) \
     SELECT m, c, a, s, e, o, cb, ca, tb, ta, r::bigint[], su, mo, md \
     FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::uuid[], $6::text[], \
       $7::text[], $8::text[], $9::jsonb[], $10::jsonb[], $11::text[], $12::jsonb[], \
       $13::text[], $14::text[]) \
       WITH ORDINALITY AS u(m, c, a, s, e, o, cb, ca, tb, ta, r, su, mo, md, n) \
     ORDER BY n RETURNING id, message_id";
/// The `recovery_items` rows of a batch, one array per column.
const INSERT_ITEMS: &str = "INSERT INTO recovery_items (recovery_id, leak_index, item_index, \
     family, span_start, span_end, removed_text, call_name, call_arguments, result_object, \
     outcome, detail, memory_id, tool_message_id, tool_call_id) \
     SELECT r, l, i, f, ss, se, t, cn, ca, ro, o, d, mi, ti, tc \
     FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[], $5::int[], $6::int[], \
       $7::text[], $8::text[], $9::jsonb[], $10::jsonb[], $11::text[], $12::text[], \
       $13::bigint[], $14::bigint[], $15::text[]) \
       WITH ORDINALITY AS u(r, l, i, f, ss, se, t, cn, ca, ro, o, d, mi, ti, tc, n) \
     ORDER BY n RETURNING id, recovery_id, leak_index, item_index";

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

/// The forwarded calls of each of these ledger rows, to publish again (one statement; a
/// row without any is not in the map).
pub(super) async fn forwarded_calls(
    conn: &mut PgConnection,
    recovery_ids: &[i64],
) -> Result<HashMap<i64, Vec<ForwardedCall>>, Error> {
    let mut out: HashMap<i64, Vec<ForwardedCall>> = HashMap::new();
    if recovery_ids.is_empty() {
        return Ok(out);
    }
    let rows = sqlx::query(FORWARDED_ITEMS)
        .bind(recovery_ids)
        .fetch_all(&mut *conn)
        .await?;
    for row in rows {
        let item_id: i64 = row.try_get("id")?;
        out.entry(row.try_get("recovery_id")?)
            .or_default()
            .push(ForwardedCall {
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
    pub(super) source: &'a Source,
    pub(super) mode: Mode,
    pub(super) outcome: Outcome,
    pub(super) content_before: &'a str,
    pub(super) content_after: &'a str,
    pub(super) tools_used_after: &'a Value,
    pub(super) repaired: &'a [i64],
    pub(super) summary: &'a Value,
}

/// Writes the `recoveries` rows (one statement); returns their ids, in the order of `rows`.
/// At most one row per message.
pub(super) async fn insert_recoveries(
    conn: &mut PgConnection,
    rows: &[NewRecovery<'_>],
) -> Result<Vec<i64>, Error> {
    let message_ids: Vec<i64> = rows.iter().map(|r| r.message_id.get()).collect();
    let chats: Vec<i64> = rows.iter().map(|r| r.row.chat_id).collect();
    let agents: Vec<Option<i64>> = rows.iter().map(|r| r.row.agent_id).collect();
    let sources: Vec<&str> = rows.iter().map(|r| r.source.label()).collect();
    let events: Vec<Option<Uuid>> = rows.iter().map(|r| r.source.event_id()).collect();
    let outcomes: Vec<&str> = rows.iter().map(|r| r.outcome.as_str()).collect();
    let before: Vec<&str> = rows.iter().map(|r| r.content_before).collect();
    let after: Vec<&str> = rows.iter().map(|r| r.content_after).collect();
    let tools_before: Vec<Json<&Value>> = rows.iter().map(|r| Json(&r.row.tools_used)).collect();
    let tools_after: Vec<Json<&Value>> = rows.iter().map(|r| Json(r.tools_used_after)).collect();
    let repaired: Vec<String> = rows.iter().map(|r| array_literal(r.repaired)).collect();
    let summaries: Vec<Json<&Value>> = rows.iter().map(|r| Json(r.summary)).collect();
    let modes: Vec<&str> = rows.iter().map(|r| r.mode.as_str()).collect();
    let models: Vec<Option<&str>> = rows.iter().map(|r| r.source.model()).collect();
    let written = sqlx::query(INSERT_RECOVERIES)
        .bind(&message_ids)
        .bind(&chats)
        .bind(&agents)
        .bind(&sources)
        .bind(&events)
        .bind(&outcomes)
        .bind(&before)
        .bind(&after)
        .bind(&tools_before)
        .bind(&tools_after)
        .bind(&repaired)
        .bind(&summaries)
        .bind(&modes)
        .bind(&models)
        .fetch_all(&mut *conn)
        .await?;
    let mut ids: HashMap<i64, i64> = HashMap::with_capacity(written.len());
    for row in written {
        ids.insert(row.try_get("message_id")?, row.try_get("id")?);
    }
    message_ids
        .iter()
        .map(|m| {
            ids.remove(m)
                .ok_or_else(|| Error::Bug(format!("no ledger row came back for message {m}")))
        })
        .collect()
}

/// A `bigint[]` literal (`{1,2,3}`): a column of arrays cannot be unnested from a
/// two-dimensional array, whose rows would all need the same length.
fn array_literal(ids: &[i64]) -> String {
    let parts: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("{{{}}}", parts.join(","))
}

/// A `recovery_items` row to write: the removed text is cut from `content` by the leak's
/// span.
pub(super) struct NewItem<'a> {
    pub(super) recovery_id: i64,
    pub(super) item: &'a Item,
    pub(super) leak: &'a Leak,
    pub(super) content: &'a str,
}

/// Writes the `recovery_items` rows (one statement); returns their ids, in the order of
/// `items`.
pub(super) async fn insert_items(
    conn: &mut PgConnection,
    items: &[NewItem<'_>],
) -> Result<Vec<i64>, Error> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let col = |f: &dyn Fn(&NewItem) -> i32| items.iter().map(f).collect::<Vec<i32>>();
    let recovery_ids: Vec<i64> = items.iter().map(|n| n.recovery_id).collect();
    let leak_indexes = col(&|n| n.item.leak_index as i32);
    let item_indexes = col(&|n| n.item.item_index as i32);
    let families: Vec<&str> = items.iter().map(|n| n.leak.family.as_str()).collect();
    let starts = col(&|n| n.leak.span.start as i32);
    let ends = col(&|n| n.leak.span.end as i32);
    let removed: Vec<&str> = items
        .iter()
        .map(|n| n.content.get(n.leak.span.clone()).unwrap_or_default())
        .collect();
    let names: Vec<Option<&str>> = items
        .iter()
        .map(|n| n.item.report.name.as_deref())
        .collect();
    let arguments: Vec<Option<Json<Value>>> = items
        .iter()
        .map(|n| {
            n.item
                .report
                .arguments
                .as_ref()
                .map(|v| Json(without_nul(v)))
        })
        .collect();
    let results: Vec<Option<Json<Value>>> = items
        .iter()
        .map(|n| n.item.result_object.as_ref().map(|v| Json(without_nul(v))))
        .collect();
    let outcomes: Vec<&str> = items
        .iter()
        .map(|n| n.item.report.outcome.as_str())
        .collect();
    let details: Vec<Option<&str>> = items
        .iter()
        .map(|n| n.item.report.detail.as_deref())
        .collect();
    let memories: Vec<Option<i64>> = items.iter().map(|n| n.item.report.memory_id).collect();
    let tool_messages: Vec<Option<i64>> = items
        .iter()
        .map(|n| n.item.report.tool_message_id)
        .collect();
    let call_ids: Vec<Option<&str>> = items
        .iter()
        .map(|n| n.item.tool_call_id.as_deref())
        .collect();
    let written = sqlx::query(INSERT_ITEMS)
        .bind(&recovery_ids)
        .bind(&leak_indexes)
        .bind(&item_indexes)
        .bind(&families)
        .bind(&starts)
        .bind(&ends)
        .bind(&removed)
        .bind(&names)
        .bind(&arguments)
        .bind(&results)
        .bind(&outcomes)
        .bind(&details)
        .bind(&memories)
        .bind(&tool_messages)
        .bind(&call_ids)
        .fetch_all(&mut *conn)
        .await?;
    let mut ids: HashMap<(i64, i32, i32), i64> = HashMap::with_capacity(written.len());
    for row in written {
        let key = (
            row.try_get("recovery_id")?,
            row.try_get("leak_index")?,
            row.try_get("item_index")?,
        );
        ids.insert(key, row.try_get("id")?);
    }
    (0..items.len())
        .map(|i| {
            let key = (recovery_ids[i], leak_indexes[i], item_indexes[i]);
            ids.remove(&key)
                .ok_or_else(|| Error::Bug(format!("no ledger item came back for {key:?}")))
        })
        .collect()
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
