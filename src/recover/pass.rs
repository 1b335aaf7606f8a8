//! A batch's passes around their effects: each message's pass prepared without I/O
//! ([`prepare`]: its ledger items, its content and `tools_used` after, the effects to
//! write, which `effects.rs` then writes for every pass at once), the ledger of every pass
//! written ([`record`], one statement) and their reports completed; or, for the read-only
//! diagnosis, only described ([`describe`]).
//!
//! May depend on: the parent `recover` (plan, ledger, load, report), `error`,
//! `toolcall_detect`, `sqlx`.

use super::ledger::{self, NewItem, NewRecovery};
use super::load::MessageRow;
use super::plan::{outcome_of, Effect, Item, Planned};
use super::{
    string_entries, CallReport, ForwardedCall, Mode, Outcome, Report, Source, RECOVERED_TOOL_MARK,
};
use crate::error::Error;
use serde_json::{json, Value};
use sqlx::PgConnection;
use toolcall_detect::Detection;

/// The tool messages transcript repair would name (the diagnosis reads, never repairs).
const WOULD_REPAIR: &str = "SELECT id FROM messages \
     WHERE chat_id = $1 AND role = 'tool' AND coalesce(tool_name, '') = '' ORDER BY id";

/// What the effects of a pass were (or, observed or described, would have been).
pub(super) struct Pass {
    pub(super) items: Vec<Item>,
    /// What each item writes, beside it.
    pub(super) effects: Vec<Effect>,
    pub(super) content_after: String,
    pub(super) tools_used_after: Value,
    pub(super) repaired: Vec<i64>,
}

impl Pass {
    /// An observed pass: its effects were rolled back, so no id it drew exists.
    pub(super) fn forget_effects(&mut self) {
        for item in &mut self.items {
            item.report.memory_id = None;
            item.report.tool_message_id = None;
            item.tool_call_id = None;
        }
        self.repaired.clear();
    }
}

/// One message's pass in a batch: what it read and decided, its pass, its report so far.
pub(super) struct Work<'a> {
    /// Its place among the batch's messages.
    pub(super) index: usize,
    pub(super) row: MessageRow,
    /// The content as read, which the detection's spans are offsets into.
    pub(super) content: String,
    pub(super) detection: Detection,
    pub(super) pass: Pass,
    pub(super) report: Report,
    pub(super) source: &'a Source,
}

/// The pass of a plan, its effects not yet written: the items, the content and
/// `tools_used` after. `replayed`: the ledger row whose calls already ran on this content.
pub(super) fn prepare(
    row: &MessageRow,
    content: &str,
    detection: &Detection,
    plan: Vec<Planned>,
    replayed: Option<i64>,
) -> Pass {
    let mut tools_used_after = row.tools_used.clone();
    let mut items = Vec::with_capacity(plan.len());
    let mut effects = Vec::with_capacity(plan.len());
    for Planned { mut item, effect } in plan {
        if item.report.outcome == Outcome::Recovered {
            push_recovered_mark(&mut tools_used_after);
        }
        if let Some(earlier) = replayed {
            item.report.detail = Some(format!(
                "the text was written back after ledger row {earlier} ran this call; not run again"
            ));
        }
        items.push(item);
        effects.push(effect);
    }
    let content_after = detection
        .cleaned
        .clone()
        .unwrap_or_else(|| content.to_string());
    Pass {
        items,
        effects,
        content_after,
        tools_used_after,
        repaired: Vec::new(),
    }
}

/// What transcript repair would name in `chat_id` now, without repairing (the diagnosis).
pub(super) async fn would_repair(conn: &mut PgConnection, chat_id: i64) -> Result<Vec<i64>, Error> {
    Ok(sqlx::query_scalar(WOULD_REPAIR)
        .bind(chat_id)
        .fetch_all(&mut *conn)
        .await?)
}

/// Completes `report` with a pass, without writing anything (the diagnosis).
pub(super) fn describe(report: &mut Report, content: &str, detection: &Detection, pass: Pass) {
    let reports = || pass.items.iter().map(|i| &i.report);
    let outcome = outcome_of(reports());
    let bytes_removed = detection.bytes_removed(content);
    let summary = ledger::summary_of(outcome, report.mode, reports(), bytes_removed);
    complete(report, pass, outcome, summary);
}

/// The report of a pass that was carried out or described: what every pass reports,
/// whether or not it wrote a ledger row.
fn complete(report: &mut Report, pass: Pass, outcome: Outcome, summary: Value) {
    let calls: Vec<CallReport> = pass.items.into_iter().map(|i| i.report).collect();
    report.memories_created = calls
        .iter()
        .filter(|c| c.outcome == Outcome::Recovered)
        .count();
    report.outcome = outcome;
    report.calls = calls;
    if report.mode == Mode::Recover {
        report.content = Some(pass.content_after);
        report.tools_used = string_entries(&pass.tools_used_after);
    }
    report.summary = summary;
    report.repaired_tool_messages = pass.repaired;
}

/// Writes the ledger of `works` (their `recoveries` rows and all their items: one
/// statement) and completes their reports, which come back in the order of `works`.
pub(super) async fn record(
    conn: &mut PgConnection,
    works: Vec<Work<'_>>,
) -> Result<Vec<(usize, Report)>, Error> {
    if works.is_empty() {
        return Ok(Vec::new());
    }
    let summaries: Vec<(Outcome, Value)> = works
        .iter()
        .map(|w| {
            let reports = || w.pass.items.iter().map(|i| &i.report);
            let outcome = outcome_of(reports());
            let bytes_removed = w.detection.bytes_removed(&w.content);
            let summary = ledger::summary_of(outcome, w.report.mode, reports(), bytes_removed);
            (outcome, summary)
        })
        .collect();
    let rows: Vec<NewRecovery> = works
        .iter()
        .zip(&summaries)
        .map(|(w, (outcome, summary))| NewRecovery {
            message_id: w.report.message_id,
            row: &w.row,
            source: w.source,
            mode: w.report.mode,
            outcome: *outcome,
            content_before: &w.content,
            content_after: &w.pass.content_after,
            tools_used_after: &w.pass.tools_used_after,
            repaired: &w.pass.repaired,
            summary,
        })
        .collect();
    let items: Vec<NewItem> = works
        .iter()
        .flat_map(|w| {
            w.pass.items.iter().map(move |item| NewItem {
                message_id: w.report.message_id,
                item,
                leak: &w.detection.leaks[item.leak_index],
                content: &w.content,
            })
        })
        .collect();
    let (recovery_ids, item_ids) = ledger::insert(conn, &rows, &items).await?;
    drop((rows, items));
    let mut item_ids = item_ids.into_iter();
    let mut out = Vec::with_capacity(works.len());
    for ((w, recovery_id), (outcome, summary)) in works.into_iter().zip(recovery_ids).zip(summaries)
    {
        let Work {
            index,
            detection,
            pass,
            mut report,
            ..
        } = w;
        for item in &pass.items {
            let item_id = item_ids
                .next()
                .ok_or_else(|| Error::Bug("a ledger item without its id".into()))?;
            forward(&mut report, item, item_id, &detection);
        }
        report.recovery_id = Some(recovery_id);
        complete(&mut report, pass, outcome, summary);
        out.push((index, report));
    }
    Ok(out)
}

/// Adds a forwarded call to `report` for its ledger item `item_id`. Observed calls are not
/// forwarded: the app would run them.
fn forward(report: &mut Report, item: &Item, item_id: i64, detection: &Detection) {
    if item.report.outcome == Outcome::Forwarded && report.mode == Mode::Recover {
        report.forward.push(ForwardedCall {
            event_id: ledger::tool_call_event_id(item_id),
            name: item.report.name.clone().unwrap_or_default(),
            arguments: item.report.arguments.clone().unwrap_or(Value::Null),
            family: detection.leaks[item.leak_index].family.as_str().to_string(),
        });
    }
}

fn push_recovered_mark(tools_used: &mut Value) {
    match tools_used {
        Value::Array(a) => a.push(Value::String(RECOVERED_TOOL_MARK.into())),
        other => *other = json!([RECOVERED_TOOL_MARK]),
    }
}
