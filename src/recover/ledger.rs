//! The ledger of the recovery: `recoveries` (one row per pass that changed or recorded
//! something) and `recovery_items` (one row per leaked call or result object, with the
//! removed text verbatim), the summary published with the moderation message, and the
//! ids derived from ledger rows.
//!
//! The rows of a batch are written together (`ledger/write.rs`).
//!
//! May depend on: the parent `recover`, `ids`, `error`, `sqlx`.

use super::{CallReport, ForwardedCall, Mode, Outcome};
use crate::error::Error;
use crate::ids::ID_NAMESPACE;
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use std::borrow::Cow;
use std::collections::HashMap;
use uuid::Uuid;

mod write;
pub(super) use write::{insert, NewItem, NewRecovery};

/// The forwarded items of several ledger rows, in each row's ledger order.
const FORWARDED_ITEMS: &str = "SELECT recovery_id, id, call_name, call_arguments, family \
     FROM recovery_items WHERE recovery_id = ANY($1) AND outcome = 'forwarded' \
     ORDER BY recovery_id, leak_index, item_index";

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

/// The id of the tool-calls message for one ledger item.
pub fn tool_call_event_id(item_id: i64) -> Uuid {
    Uuid::new_v5(&ID_NAMESPACE, format!("tool_call:{item_id}").as_bytes())
}

/// The `recovery` object of a moderation message. `mode` says whether the pass changed
/// the message (`recover`) or only recorded what it would do (`observe`).
pub(super) fn summary_of<'a, C>(
    outcome: Outcome,
    mode: Mode,
    calls: C,
    bytes_removed: usize,
) -> Value
where
    C: IntoIterator<Item = &'a CallReport>,
    C::IntoIter: Clone,
{
    let calls = calls.into_iter();
    let mut families: Vec<&str> = Vec::new();
    let mut outcomes: Vec<&str> = Vec::new();
    for c in calls.clone() {
        if !families.contains(&c.family.as_str()) {
            families.push(c.family.as_str());
        }
        if !outcomes.contains(&c.outcome.as_str()) {
            outcomes.push(c.outcome.as_str());
        }
    }
    let calls: Vec<Value> = calls
        .map(|c| {
            json!({
                "family": c.family.as_str(),
                "name": c.name,
                "arguments": c.arguments.as_ref().map(|a| without_nul(a).into_owned()),
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
/// Borrowed unless there is one to remove (nearly always).
pub(super) fn without_nul(v: &Value) -> Cow<'_, Value> {
    if has_nul(v) {
        Cow::Owned(strip_nul(v))
    } else {
        Cow::Borrowed(v)
    }
}

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

fn strip_nul(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace('\0', "")),
        Value::Array(a) => Value::Array(a.iter().map(strip_nul).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.replace('\0', ""), strip_nul(v)))
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
        let v = json!({"a": "x\u{0}y", "b\u{0}": ["\u{0}"]});
        assert_eq!(*without_nul(&v), json!({"a": "xy", "b": [""]}));
        let clean = json!({"a": ["x"]});
        assert!(matches!(without_nul(&clean), Cow::Borrowed(_)));
    }
}
