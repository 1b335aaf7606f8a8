//! Carrying a plan out on the locked message (save_memory run or refused, the message
//! cleaned, the chat's transcript repaired) and writing its ledger; or, for the read-only
//! diagnosis, only describing what carrying it out would do.
//!
//! May depend on: the parent `recover` (plan, ledger, save_memory, report), `ids`,
//! `error`, `toolcall_detect`, `sqlx`.

use super::plan::{outcome_of, Effect, Item, Planned};
use super::save_memory::CallCtx;
use super::{
    ledger, repair_transcript, string_entries, CallReport, ForwardedCall, MessageRow, Mode,
    Outcome, Report, Source, RECOVERED_TOOL_MARK,
};
use crate::error::Error;
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::PgConnection;
use toolcall_detect::Detection;

const UPDATE_MESSAGE: &str =
    "UPDATE messages SET content = $2, tools_used = $3, updated_at = now() WHERE id = $1";
/// The tool messages transcript repair would name (the diagnosis reads, never repairs).
const WOULD_REPAIR: &str = "SELECT id FROM messages \
     WHERE chat_id = $1 AND role = 'tool' AND coalesce(tool_name, '') = '' ORDER BY id";

/// Whether a pass writes its effects or only describes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effects {
    /// Insert memories and tool messages, clean the message, repair the transcript.
    Apply,
    /// Write nothing: the diagnosis of what a pass would do now.
    Describe,
}

/// What the effects of a pass were (or, observed or described, would have been).
pub(super) struct Pass {
    pub(super) items: Vec<Item>,
    pub(super) content_after: String,
    pub(super) tools_used_after: Value,
    pub(super) repaired: Vec<i64>,
}

impl Pass {
    /// An observed pass: its effects were rolled back, so no id it drew exists.
    pub(super) fn forget_effects(mut self) -> Self {
        for item in &mut self.items {
            item.report.memory_id = None;
            item.report.tool_message_id = None;
            item.tool_call_id = None;
        }
        self.repaired.clear();
        self
    }
}

/// Carries `plan` out (or describes it) on the message `ctx` holds locked.
pub(super) async fn run_pass(
    conn: &mut PgConnection,
    ctx: &CallCtx<'_>,
    content: &str,
    detection: &Detection,
    plan: Vec<Planned>,
    effects: Effects,
) -> Result<Pass, Error> {
    let row = ctx.row;
    let mut tools_used_after = row.tools_used.clone();
    let mut items = Vec::with_capacity(plan.len());
    for Planned { mut item, effect } in plan {
        let written = match (&effect, effects) {
            (Effect::None, _) | (_, Effects::Describe) => None,
            (Effect::SaveMemory { memory, ordinal }, Effects::Apply) => {
                Some(ctx.save(conn, memory, *ordinal).await?)
            }
            (Effect::RecordError { reason, ordinal }, Effects::Apply) => {
                Some(ctx.record_error(conn, reason, *ordinal).await?)
            }
        };
        if let Some(w) = written {
            item.report.memory_id = w.memory_id;
            item.report.tool_message_id = Some(w.tool_message_id);
            item.tool_call_id = Some(w.tool_call_id);
        }
        if item.report.outcome == Outcome::Recovered {
            push_recovered_mark(&mut tools_used_after);
        }
        items.push(item);
    }
    let content_after = detection
        .cleaned
        .clone()
        .unwrap_or_else(|| content.to_string());
    let repaired = match effects {
        Effects::Apply => {
            if content_after != content || tools_used_after != row.tools_used {
                sqlx::query(UPDATE_MESSAGE)
                    .bind(ctx.message_id.get())
                    .bind(&content_after)
                    .bind(Json(&tools_used_after))
                    .execute(&mut *conn)
                    .await?;
            }
            repair_transcript(&mut *conn, row.chat_id).await?
        }
        Effects::Describe => {
            sqlx::query_scalar(WOULD_REPAIR)
                .bind(row.chat_id)
                .fetch_all(&mut *conn)
                .await?
        }
    };
    Ok(Pass {
        items,
        content_after,
        tools_used_after,
        repaired,
    })
}

/// Completes `report` with a pass, without writing anything (the diagnosis).
pub(super) fn describe(report: &mut Report, content: &str, detection: &Detection, pass: Pass) {
    let calls: Vec<CallReport> = pass.items.iter().map(|i| i.report.clone()).collect();
    let outcome = outcome_of(&calls);
    let summary = ledger::summary_of(
        outcome,
        report.mode,
        &calls,
        detection.bytes_removed(content),
    );
    complete(report, pass, calls, outcome, summary);
}

/// The report of a pass that was carried out or described: what every pass reports,
/// whether or not it wrote a ledger row.
fn complete(
    report: &mut Report,
    pass: Pass,
    calls: Vec<CallReport>,
    outcome: Outcome,
    summary: Value,
) {
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

/// Writes the ledger of a pass and completes its report.
pub(super) async fn record(
    conn: &mut PgConnection,
    row: &MessageRow,
    content: &str,
    detection: &Detection,
    pass: Pass,
    source: Source,
    mut report: Report,
) -> Result<Report, Error> {
    let mode = report.mode;
    let calls: Vec<CallReport> = pass.items.iter().map(|i| i.report.clone()).collect();
    let outcome = outcome_of(&calls);
    let bytes_removed = detection.bytes_removed(content);
    let summary = ledger::summary_of(outcome, mode, &calls, bytes_removed);
    let recovery_id = ledger::insert_recovery(
        conn,
        &ledger::NewRecovery {
            message_id: report.message_id,
            row,
            source,
            mode,
            outcome,
            content_before: content,
            content_after: &pass.content_after,
            tools_used_after: &pass.tools_used_after,
            repaired: &pass.repaired,
            summary: &summary,
        },
    )
    .await?;
    for item in &pass.items {
        let leak = &detection.leaks[item.leak_index];
        let item_id = ledger::insert_item(conn, recovery_id, item, leak, content).await?;
        // Observed calls are not forwarded: the app would run them.
        if item.report.outcome == Outcome::Forwarded && mode == Mode::Recover {
            report.forward.push(ForwardedCall {
                event_id: ledger::tool_call_event_id(item_id),
                name: item.report.name.clone().unwrap_or_default(),
                arguments: item.report.arguments.clone().unwrap_or(Value::Null),
                family: leak.family.as_str().to_string(),
            });
        }
    }
    report.recovery_id = Some(recovery_id);
    complete(&mut report, pass, calls, outcome, summary);
    Ok(report)
}

fn push_recovered_mark(tools_used: &mut Value) {
    match tools_used {
        Value::Array(a) => a.push(Value::String(RECOVERED_TOOL_MARK.into())),
        other => *other = json!([RECOVERED_TOOL_MARK]),
    }
}
