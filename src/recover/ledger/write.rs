//! Writing the ledger of a batch: every `recoveries` row and every `recovery_items` row of
//! its passes in ONE statement (the items join their row by message id, which is unique in
//! a batch's round).
//!
//! May depend on: the parent `ledger`, the rest of `recover`, `ids`, `error`,
//! `toolcall_detect`, `sqlx`.

use super::without_nul;
use crate::error::Error;
use crate::ids::MessageId;
use crate::recover::load::MessageRow;
use crate::recover::plan::Item;
use crate::recover::{Mode, Outcome, Source};
use serde_json::Value;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row};
use std::collections::HashMap;
use toolcall_detect::Leak;
use uuid::Uuid;

/// The rows of a batch, one array per column; returns each `recoveries` row with its items.
const INSERT: &str = "WITH r AS ( \
       INSERT INTO recoveries (message_id, chat_id, agent_id, source, event_id, outcome, \
         content_before, content_after, tools_used_before, tools_used_after, \
         repaired_tool_message_ids, summary, mode, model) \
       SELECT m, c, a, s, e, o, cb, ca, tb, ta, r::bigint[], su, mo, md \
       FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::uuid[], \
         $6::text[], $7::text[], $8::text[], $9::jsonb[], $10::jsonb[], $11::text[], \
         $12::jsonb[], $13::text[], $14::text[]) \
         WITH ORDINALITY AS u(m, c, a, s, e, o, cb, ca, tb, ta, r, su, mo, md, n) \
       ORDER BY n RETURNING id, message_id), \
     i AS ( \
       INSERT INTO recovery_items (recovery_id, leak_index, item_index, family, span_start, \
         span_end, removed_text, call_name, call_arguments, result_object, outcome, detail, \
         memory_id, tool_message_id, tool_call_id) \
       SELECT r.id, l, i, f, ss, se, t, cn, ca, ro, o, d, mi, ti, tc \
       FROM unnest($15::bigint[], $16::int[], $17::int[], $18::text[], $19::int[], \
         $20::int[], $21::text[], $22::text[], $23::jsonb[], $24::jsonb[], $25::text[], \
         $26::text[], $27::bigint[], $28::bigint[], $29::text[]) \
         WITH ORDINALITY AS v(m, l, i, f, ss, se, t, cn, ca, ro, o, d, mi, ti, tc, n) \
       JOIN r ON r.message_id = v.m \
       ORDER BY v.n RETURNING id, recovery_id, leak_index, item_index) \
     SELECT r.message_id, r.id AS recovery_id, i.id AS item_id, i.leak_index, i.item_index \
     FROM r LEFT JOIN i ON i.recovery_id = r.id";

/// A `recoveries` row to write.
pub(in crate::recover) struct NewRecovery<'a> {
    pub(in crate::recover) message_id: MessageId,
    pub(in crate::recover) row: &'a MessageRow,
    pub(in crate::recover) source: &'a Source,
    pub(in crate::recover) mode: Mode,
    pub(in crate::recover) outcome: Outcome,
    pub(in crate::recover) content_before: &'a str,
    pub(in crate::recover) content_after: &'a str,
    pub(in crate::recover) tools_used_after: &'a Value,
    pub(in crate::recover) repaired: &'a [i64],
    pub(in crate::recover) summary: &'a Value,
}

/// A `recovery_items` row to write, of the pass on `message_id`: the removed text is cut
/// from `content` by the leak's span.
pub(in crate::recover) struct NewItem<'a> {
    pub(in crate::recover) message_id: MessageId,
    pub(in crate::recover) item: &'a Item,
    pub(in crate::recover) leak: &'a Leak,
    pub(in crate::recover) content: &'a str,
}

/// Writes the rows (at most one `recoveries` row per message) in one statement; returns
/// the ids of `rows` and of `items`, in their order.
pub(in crate::recover) async fn insert(
    conn: &mut PgConnection,
    rows: &[NewRecovery<'_>],
    items: &[NewItem<'_>],
) -> Result<(Vec<i64>, Vec<i64>), Error> {
    if rows.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let recoveries = RecoveryColumns::of(rows);
    let item_columns = ItemColumns::of(items);
    let query = item_columns.bind(recoveries.bind(sqlx::query(INSERT)));
    let written = query.fetch_all(&mut *conn).await?;
    let mut recovery_ids: HashMap<i64, i64> = HashMap::with_capacity(rows.len());
    let mut item_ids: HashMap<(i64, i32, i32), i64> = HashMap::with_capacity(items.len());
    for row in written {
        let (message_id, recovery_id): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        recovery_ids.insert(message_id, recovery_id);
        if let Some(item_id) = row.try_get::<Option<i64>, _>(2)? {
            item_ids.insert((message_id, row.try_get(3)?, row.try_get(4)?), item_id);
        }
    }
    let recovery_ids = recoveries
        .message_ids
        .iter()
        .map(|m| {
            recovery_ids
                .get(m)
                .copied()
                .ok_or_else(|| Error::Bug(format!("no ledger row came back for message {m}")))
        })
        .collect::<Result<Vec<i64>, Error>>()?;
    let item_ids = (0..items.len())
        .map(|i| {
            let key = (
                item_columns.message_ids[i],
                item_columns.leak_indexes[i],
                item_columns.item_indexes[i],
            );
            item_ids
                .remove(&key)
                .ok_or_else(|| Error::Bug(format!("no ledger item came back for {key:?}")))
        })
        .collect::<Result<Vec<i64>, Error>>()?;
    Ok((recovery_ids, item_ids))
}

type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

/// The columns of `recoveries` rows.
struct RecoveryColumns<'a> {
    message_ids: Vec<i64>,
    chats: Vec<i64>,
    agents: Vec<Option<i64>>,
    sources: Vec<&'static str>,
    events: Vec<Option<Uuid>>,
    outcomes: Vec<&'static str>,
    before: Vec<&'a str>,
    after: Vec<&'a str>,
    tools_before: Vec<Json<&'a Value>>,
    tools_after: Vec<Json<&'a Value>>,
    repaired: Vec<String>,
    summaries: Vec<Json<&'a Value>>,
    modes: Vec<&'static str>,
    models: Vec<Option<&'a str>>,
}

impl<'a> RecoveryColumns<'a> {
    fn of(rows: &[NewRecovery<'a>]) -> Self {
        RecoveryColumns {
            message_ids: rows.iter().map(|r| r.message_id.get()).collect(),
            chats: rows.iter().map(|r| r.row.chat_id).collect(),
            agents: rows.iter().map(|r| r.row.agent_id).collect(),
            sources: rows.iter().map(|r| r.source.label()).collect(),
            events: rows.iter().map(|r| r.source.event_id()).collect(),
            outcomes: rows.iter().map(|r| r.outcome.as_str()).collect(),
            before: rows.iter().map(|r| r.content_before).collect(),
            after: rows.iter().map(|r| r.content_after).collect(),
            tools_before: rows.iter().map(|r| Json(&r.row.tools_used)).collect(),
            tools_after: rows.iter().map(|r| Json(r.tools_used_after)).collect(),
            repaired: rows.iter().map(|r| array_literal(r.repaired)).collect(),
            summaries: rows.iter().map(|r| Json(r.summary)).collect(),
            modes: rows.iter().map(|r| r.mode.as_str()).collect(),
            models: rows.iter().map(|r| r.source.model()).collect(),
        }
    }

    /// Binds `$1` to `$14`.
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(&self.message_ids)
            .bind(&self.chats)
            .bind(&self.agents)
            .bind(&self.sources)
            .bind(&self.events)
            .bind(&self.outcomes)
            .bind(&self.before)
            .bind(&self.after)
            .bind(&self.tools_before)
            .bind(&self.tools_after)
            .bind(&self.repaired)
            .bind(&self.summaries)
            .bind(&self.modes)
            .bind(&self.models)
    }
}

/// The columns of `recovery_items` rows, with the message each belongs to.
struct ItemColumns<'a> {
    message_ids: Vec<i64>,
    leak_indexes: Vec<i32>,
    item_indexes: Vec<i32>,
    families: Vec<&'static str>,
    starts: Vec<i32>,
    ends: Vec<i32>,
    removed: Vec<&'a str>,
    names: Vec<Option<&'a str>>,
    arguments: Vec<Option<Json<std::borrow::Cow<'a, Value>>>>,
    results: Vec<Option<Json<std::borrow::Cow<'a, Value>>>>,
    outcomes: Vec<&'static str>,
    details: Vec<Option<&'a str>>,
    memories: Vec<Option<i64>>,
    tool_messages: Vec<Option<i64>>,
    call_ids: Vec<Option<&'a str>>,
}

impl<'a> ItemColumns<'a> {
    fn of(items: &[NewItem<'a>]) -> Self {
        let report = |n: &NewItem<'a>| &n.item.report;
        ItemColumns {
            message_ids: items.iter().map(|n| n.message_id.get()).collect(),
            leak_indexes: items.iter().map(|n| n.item.leak_index as i32).collect(),
            item_indexes: items.iter().map(|n| n.item.item_index as i32).collect(),
            families: items.iter().map(|n| n.leak.family.as_str()).collect(),
            starts: items.iter().map(|n| n.leak.span.start as i32).collect(),
            ends: items.iter().map(|n| n.leak.span.end as i32).collect(),
            removed: items
                .iter()
                .map(|n| n.content.get(n.leak.span.clone()).unwrap_or_default())
                .collect(),
            names: items.iter().map(|n| report(n).name.as_deref()).collect(),
            arguments: items
                .iter()
                .map(|n| report(n).arguments.as_ref().map(|v| Json(without_nul(v))))
                .collect(),
            results: items
                .iter()
                .map(|n| n.item.result_object.as_ref().map(|v| Json(without_nul(v))))
                .collect(),
            outcomes: items.iter().map(|n| report(n).outcome.as_str()).collect(),
            details: items.iter().map(|n| report(n).detail.as_deref()).collect(),
            memories: items.iter().map(|n| report(n).memory_id).collect(),
            tool_messages: items.iter().map(|n| report(n).tool_message_id).collect(),
            call_ids: items
                .iter()
                .map(|n| n.item.tool_call_id.as_deref())
                .collect(),
        }
    }

    /// Binds `$15` to `$29`.
    fn bind<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        query
            .bind(&self.message_ids)
            .bind(&self.leak_indexes)
            .bind(&self.item_indexes)
            .bind(&self.families)
            .bind(&self.starts)
            .bind(&self.ends)
            .bind(&self.removed)
            .bind(&self.names)
            .bind(&self.arguments)
            .bind(&self.results)
            .bind(&self.outcomes)
            .bind(&self.details)
            .bind(&self.memories)
            .bind(&self.tool_messages)
            .bind(&self.call_ids)
    }
}

/// A `bigint[]` literal (`{1,2,3}`): a column of arrays cannot be unnested from a
/// two-dimensional array, whose rows would all need the same length.
fn array_literal(ids: &[i64]) -> String {
    let parts: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("{{{}}}", parts.join(","))
}
