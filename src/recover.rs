//! THE recovery transaction (contract §3): one function, [`recover_message`], that the
//! worker, the backfill and the admin API all call. Given a message id it locks the row,
//! re-detects on the content as stored (the database is the truth; an event may be
//! stale), applies the recovery table, writes the ledger, repairs the chat's transcript and
//! commits, returning a [`Report`] of what it did. It knows nothing about AMQP: publishing
//! the report is the caller's job, after the commit.
//!
//! Idempotency rests on the row lock plus re-detection: a second pass on the same message
//! waits for the first to commit, then sees cleaned content and does nothing
//! (`already_recovered`); a message left untouched (for review, or by an observe-mode
//! pass) is recognised by its ledger row and not recorded twice.
//!
//! The [`Policy`] decides the mode of each pass. An observe-mode pass runs exactly the
//! same effects inside a savepoint, rolls them back, and records what they were: the
//! would-be outcome is the real decision, not a second implementation of it. A message
//! whose latest ledger row was reverted ([`revert`]) is left alone except by the admin API.
//!
//! May depend on: `ids`, `settings`, `error`, `toolcall_detect`, `sqlx`. No broker, no HTTP.

mod dry_run;
mod ledger;
pub mod outbox;
mod policy;
mod report;
pub mod revert;
mod save_memory;

pub use dry_run::{detect_stored, what_if};
pub use ledger::tool_call_event_id;
pub use policy::{FamilyMode, Mode, Policy};
pub use report::{preview, CallReport, ForwardedCall, Outcome, Report, Source};

use crate::error::{Error, Poison};
use crate::ids::{AgentId, ChatId, MessageId};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::{Connection, PgConnection, PgPool, Row};
use toolcall_detect::{Call, Detection, Family, Input, Leak, ResultKind};

/// The tool the worker can run itself.
pub const SAVE_MEMORY: &str = "save_memory";
/// The outcome a moderation message carries when recovery failed for good (not a ledger
/// outcome: nothing was recorded).
pub const FAILED: &str = "failed";
/// What a recovered call appends to `tools_used`.
pub const RECOVERED_TOOL_MARK: &str = "save_memory (recovered)";

/// The locked message row, as the recovery reads it.
struct MessageRow {
    chat_id: i64,
    agent_id: Option<i64>,
    role: String,
    content: Option<String>,
    tools_used: Value,
    created_at: DateTime<Utc>,
}

/// Locks the row alone. The agent's tools and the latest ledger row are read by a statement
/// of its own after it ([`CONTEXT`]): folded into this one (a LATERAL join), a pass that
/// waited for the lock would see the ledger as it was before the other pass committed
/// (READ COMMITTED re-reads only the locked row) and do the work twice. The idempotency
/// and racing-revert tests catch exactly that.
const LOCK_MESSAGE: &str = "SELECT chat_id, agent_id, role, content, tools_used, created_at \
     FROM messages WHERE id = $1 FOR UPDATE";
/// After the lock, in one round trip: the agent's enabled tools, the message's latest
/// ledger row (`prev_*`, all NULL without one), and the latest applied pass whose
/// `content_before` is the content as it is now (`replayed_id`: the app wrote the
/// pre-cleaning text back, so that pass's calls ran already). A statement of its own, so it
/// sees what a pass that held the lock before committed.
const CONTEXT: &str = "SELECT \
       coalesce((SELECT enabled_tools FROM agents WHERE id = $2), '{}') AS enabled_tools, \
       (SELECT id FROM recoveries WHERE message_id = $1 AND mode = 'recover' \
          AND reverted_at IS NULL AND content_before = $3 ORDER BY id DESC LIMIT 1) \
         AS replayed_id, \
       r.id AS prev_id, r.event_id AS prev_event_id, r.summary AS prev_summary, \
       r.content_before AS prev_content_before, r.content_after AS prev_content_after, \
       r.mode AS prev_mode, r.reverted_at IS NOT NULL AS prev_reverted \
     FROM (SELECT 1) one LEFT JOIN LATERAL ( \
       SELECT id, event_id, summary, content_before, content_after, mode, reverted_at \
       FROM recoveries WHERE message_id = $1 ORDER BY id DESC LIMIT 1) r ON true";
const UPDATE_MESSAGE: &str =
    "UPDATE messages SET content = $2, tools_used = $3, updated_at = now() WHERE id = $1";
/// Transcript repair: a tool message without a name gets the name of the assistant call
/// with its tool_call_id, `unknown` for an orphan.
const REPAIR_TRANSCRIPT: &str = "UPDATE messages t SET tool_name = COALESCE(( \
       SELECT tc->>'name' FROM messages a, \
         jsonb_array_elements(CASE WHEN jsonb_typeof(a.tool_calls) = 'array' \
                                   THEN a.tool_calls ELSE '[]'::jsonb END) tc \
       WHERE a.chat_id = t.chat_id AND a.role = 'assistant' \
         AND jsonb_typeof(tc) = 'object' AND tc->>'id' = t.tool_call_id \
         AND coalesce(tc->>'name', '') <> '' \
       ORDER BY a.id LIMIT 1), 'unknown'), updated_at = now() \
     WHERE t.chat_id = $1 AND t.role = 'tool' AND coalesce(t.tool_name, '') = '' \
     RETURNING t.id";
/// The `recovery` object of a moderation message for a pass that handled no call (a clean
/// message the worker never took to the database, say).
pub fn empty_summary(outcome: Outcome, mode: Mode) -> Value {
    ledger::summary_of(outcome, mode, &[], 0)
}

/// The `recovery` object of a moderation message for an event whose recovery failed for
/// good (`reason`: the dead-letter reason): the message is moderated as it is stored.
pub fn failed_summary(mode: Mode, reason: &str) -> Value {
    let mut summary = ledger::summary_of(Outcome::Clean, mode, &[], 0);
    summary["outcome"] = json!(FAILED);
    summary["reason"] = json!(reason);
    summary
}

/// Runs the recovery of one message in one transaction and commits it, publishing
/// nothing: [`recover_with_outbox`] without an envelope.
pub async fn recover_message(
    pool: &PgPool,
    message_id: MessageId,
    policy: &Policy,
    source: Source,
) -> Result<Report, Error> {
    recover_with_outbox(pool, message_id, policy, source, None).await
}

/// Runs the recovery of one message in one transaction and commits it. A pass that
/// records something (a ledger row) also writes, in the same transaction, what `envelope`
/// says it owes the broker to the outbox; those rows come back in [`Report::outbox`], for
/// the caller to send after the commit. Without an envelope nothing is owed (`--no-publish`).
///
/// Errors: [`Poison::MissingMessage`] when the row does not exist; database errors
/// otherwise (see [`Error::kind`] for which are worth a retry). Nothing is written unless
/// the whole pass commits.
pub async fn recover_with_outbox(
    pool: &PgPool,
    message_id: MessageId,
    policy: &Policy,
    source: Source,
    envelope: Option<&dyn outbox::Envelope>,
) -> Result<Report, Error> {
    let mut tx = pool.begin().await?;
    let mut report = recover_in(&mut tx, message_id, policy, source).await?;
    if let (Some(envelope), true) = (envelope, report.recorded()) {
        let owed = envelope.outgoing(&report)?;
        report.outbox = outbox::enqueue(&mut tx, report.recovery_id, message_id, owed).await?;
    }
    tx.commit().await?;
    Ok(report)
}

/// The body of [`recover_message`] on a connection already inside a transaction (for
/// callers that compose it with their own writes, or roll it back).
pub async fn recover_in(
    conn: &mut PgConnection,
    message_id: MessageId,
    policy: &Policy,
    source: Source,
) -> Result<Report, Error> {
    let row = lock_message(conn, message_id).await?;
    let tools_used = string_entries(&row.tools_used);
    let mut report = Report {
        message_id,
        chat_id: ChatId::new(row.chat_id),
        agent_id: row.agent_id.map(AgentId::new),
        outcome: Outcome::Clean,
        mode: policy.mode,
        calls: Vec::new(),
        content: row.content.clone(),
        tools_used: tools_used.clone(),
        recovery_id: None,
        summary: ledger::summary_of(Outcome::Clean, policy.mode, &[], 0),
        forward: Vec::new(),
        repaired_tool_messages: Vec::new(),
        memories_created: 0,
        outbox: Vec::new(),
    };
    let content = match (&row.role[..], &row.content) {
        ("assistant", Some(c)) => c.clone(),
        _ => return Ok(report),
    };
    let context = sqlx::query(CONTEXT)
        .bind(message_id.get())
        .bind(row.agent_id)
        .bind(&content)
        .fetch_one(&mut *conn)
        .await?;
    let enabled_tools: Vec<String> = context.try_get("enabled_tools")?;
    let prev = ledger::prev_recovery(&context)?;
    let replayed: Option<i64> = context.try_get("replayed_id")?;
    let mut detection = toolcall_detect::detect(
        &Input {
            content: &content,
            tools_used: &tools_used,
            enabled_tools: &enabled_tools,
        },
        &policy.detect,
    );
    if detection.is_clean() {
        return match prev.filter(|p| p.applied()) {
            Some(prev) => already_recovered(conn, report, prev, source).await,
            None => Ok(report),
        };
    }
    if let Some(prev) = &prev {
        if prev.reverted && !matches!(source, Source::Admin) {
            report.outcome = Outcome::Reverted;
            report.summary = ledger::summary_of(Outcome::Reverted, policy.mode, &[], 0);
            return Ok(report);
        }
    }
    let mode = policy.pass_mode(&detection);
    report.mode = mode;
    report.summary = ledger::summary_of(Outcome::Clean, mode, &[], 0);
    // The content is exactly what a pass left (cleaned text, a message kept for review),
    // or what an observe-mode pass already recorded: nothing new to do or to record.
    if let Some(prev) = prev {
        let left_by_applied = prev.applied() && prev.content_after.as_deref() == Some(&content);
        let seen_by_observer = mode == Mode::Observe
            && prev.mode == Mode::Observe
            && !prev.reverted
            && prev.content_before.as_deref() == Some(&content);
        if left_by_applied || seen_by_observer {
            return already_recovered(conn, report, prev, source).await;
        }
    }
    // The content is what an applied pass found before it cleaned it: the app wrote the old
    // text back (a full-row save of a stale copy). That pass's calls ran; running them again
    // would save every memory twice. The markup is stripped (and recorded) only.
    if replayed.is_some() {
        detection.strip_only = true;
    }
    if !detection.strip_only && row.agent_id.is_none() {
        report.outcome = Outcome::NoAgent;
        report.summary = ledger::summary_of(Outcome::NoAgent, mode, &[], 0);
        return Ok(report);
    }
    let call = save_memory::CallCtx {
        row: &row,
        message_id,
        enabled_tools: &enabled_tools,
        config: &policy.detect,
    };
    let mut pass = match mode {
        Mode::Recover => run_pass(conn, &call, &content, &detection).await?,
        Mode::Observe => {
            // The same effects, undone: the would-be outcome is the real decision.
            let mut savepoint = conn.begin().await?;
            let pass = run_pass(&mut savepoint, &call, &content, &detection).await;
            savepoint.rollback().await?;
            pass?.forget_effects()
        }
    };
    if let Some(earlier) = replayed {
        for item in &mut pass.items {
            item.report.detail = Some(format!(
                "the text was written back after ledger row {earlier} ran this call; not run again"
            ));
        }
    }
    record(conn, &row, &content, &detection, pass, mode, source, report).await
}

async fn lock_message(conn: &mut PgConnection, id: MessageId) -> Result<MessageRow, Error> {
    let row = sqlx::query(LOCK_MESSAGE)
        .bind(id.get())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Poison::MissingMessage(id))?;
    Ok(MessageRow {
        chat_id: row.try_get("chat_id")?,
        agent_id: row.try_get("agent_id")?,
        role: row.try_get("role")?,
        content: row.try_get("content")?,
        tools_used: row.try_get::<Json<Value>, _>("tools_used")?.0,
        created_at: row.try_get("created_at")?,
    })
}

/// A pass already did the work: report it, republishing the same summary for the same
/// source event and the same forwarded calls (their ids are stable, consumers dedupe).
async fn already_recovered(
    conn: &mut PgConnection,
    mut report: Report,
    prev: ledger::PrevRecovery,
    source: Source,
) -> Result<Report, Error> {
    report.outcome = Outcome::AlreadyRecovered;
    report.mode = prev.mode;
    report.recovery_id = Some(prev.id);
    report.summary = match (prev.event_id, source.event_id()) {
        (Some(a), Some(b)) if a == b => prev.summary,
        _ => ledger::summary_of(Outcome::AlreadyRecovered, prev.mode, &[], 0),
    };
    if prev.mode == Mode::Recover {
        report.forward = ledger::forwarded_calls(conn, prev.id).await?;
    }
    Ok(report)
}

/// One ledger item before it is written.
struct Item {
    report: CallReport,
    leak_index: usize,
    item_index: usize,
    result_object: Option<Value>,
    tool_call_id: Option<String>,
}

/// What the effects of a pass were (or, observed, would have been).
struct Pass {
    items: Vec<Item>,
    content_after: String,
    tools_used_after: Value,
    repaired: Vec<i64>,
}

impl Pass {
    /// An observed pass: its effects were rolled back, so no id it drew exists.
    fn forget_effects(mut self) -> Self {
        for item in &mut self.items {
            item.report.memory_id = None;
            item.report.tool_message_id = None;
            item.tool_call_id = None;
        }
        self.repaired.clear();
        self
    }
}

/// The effects of the recovery table (contract §3) on the locked message: save_memory run
/// or refused, the message cleaned, the chat's transcript repaired. No ledger writes.
async fn run_pass(
    conn: &mut PgConnection,
    ctx: &save_memory::CallCtx<'_>,
    content: &str,
    detection: &Detection,
) -> Result<Pass, Error> {
    let row = ctx.row;
    let mut tools_used_after = row.tools_used.clone();
    let mut items = Vec::new();
    let mut ordinal = 0usize;
    for (li, leak) in detection.leaks.iter().enumerate() {
        let mut leak_items = Vec::new();
        if leak.family == Family::ResultOnly && !ctx.config.result_only_recover {
            leak_items.push(bare_item(leak, Outcome::NeedsReview, None));
        } else if detection.strip_only {
            for call in &leak.calls {
                leak_items.push(stripped_call(leak, call, ctx.enabled_tools));
            }
            if leak.calls.is_empty() {
                leak_items.push(bare_item(leak, Outcome::StrippedOnly, None));
            }
        } else {
            for call in &leak.calls {
                ordinal += 1;
                let item = ctx.run_call(conn, leak, call, ordinal).await?;
                if item.report.outcome == Outcome::Recovered {
                    push_recovered_mark(&mut tools_used_after);
                }
                leak_items.push(item);
            }
            for result in &leak.results {
                match &result.kind {
                    ResultKind::SaveMemory => {}
                    ResultKind::InvalidSaveMemory { reason } => {
                        ordinal += 1;
                        let mut item = ctx
                            .refuse(conn, leak, None, Outcome::InvalidArgs, reason, ordinal)
                            .await?;
                        item.result_object = Some(result.value.clone());
                        leak_items.push(item);
                    }
                    ResultKind::Other { tool } => {
                        let mut item = bare_item(leak, Outcome::StrippedOnly, *tool);
                        item.result_object = Some(result.value.clone());
                        leak_items.push(item);
                    }
                }
            }
            if leak_items.is_empty() {
                leak_items.push(bare_item(leak, Outcome::StrippedOnly, None));
            }
        }
        for (ii, mut item) in leak_items.into_iter().enumerate() {
            item.leak_index = li;
            item.item_index = ii;
            items.push(item);
        }
    }

    let content_after = detection
        .cleaned
        .clone()
        .unwrap_or_else(|| content.to_string());
    if content_after != content || tools_used_after != row.tools_used {
        sqlx::query(UPDATE_MESSAGE)
            .bind(ctx.message_id.get())
            .bind(&content_after)
            .bind(Json(&tools_used_after))
            .execute(&mut *conn)
            .await?;
    }
    let repaired = repair_transcript(&mut *conn, row.chat_id).await?;
    Ok(Pass {
        items,
        content_after,
        tools_used_after,
        repaired,
    })
}

/// Writes the ledger of a pass and completes its report.
#[allow(clippy::too_many_arguments)]
async fn record(
    conn: &mut PgConnection,
    row: &MessageRow,
    content: &str,
    detection: &Detection,
    pass: Pass,
    mode: Mode,
    source: Source,
    mut report: Report,
) -> Result<Report, Error> {
    let calls: Vec<CallReport> = pass.items.iter().map(|i| i.report.clone()).collect();
    let outcome = calls
        .iter()
        .map(|c| c.outcome)
        .max_by_key(|o| o.rank())
        .unwrap_or(Outcome::StrippedOnly);
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

    report.memories_created = calls
        .iter()
        .filter(|c| c.outcome == Outcome::Recovered)
        .count();
    report.outcome = outcome;
    report.mode = mode;
    report.calls = calls;
    if mode == Mode::Recover {
        report.content = Some(pass.content_after);
        report.tools_used = string_entries(&pass.tools_used_after);
    }
    report.recovery_id = Some(recovery_id);
    report.summary = summary;
    report.repaired_tool_messages = pass.repaired;
    Ok(report)
}

fn bare_item(leak: &Leak, outcome: Outcome, tool: Option<&str>) -> Item {
    Item {
        report: CallReport {
            leak_index: 0,
            family: leak.family,
            name: None,
            tool_label: tool.unwrap_or("none").to_string(),
            arguments: None,
            outcome,
            detail: None,
            memory_id: None,
            tool_message_id: None,
        },
        leak_index: 0,
        item_index: 0,
        result_object: leak.results.first().map(|r| r.value.clone()),
        tool_call_id: None,
    }
}

fn stripped_call(leak: &Leak, call: &Call, enabled_tools: &[String]) -> Item {
    let mut item = bare_item(leak, Outcome::StrippedOnly, None);
    item.report.name = Some(call.name.clone());
    item.report.tool_label = tool_label(&call.name, enabled_tools);
    item.report.arguments = Some(call.arguments.clone());
    item
}

fn tool_label(name: &str, enabled_tools: &[String]) -> String {
    if name == SAVE_MEMORY || enabled_tools.iter().any(|t| t == name) {
        name.to_string()
    } else {
        "other".to_string()
    }
}

fn push_recovered_mark(tools_used: &mut Value) {
    match tools_used {
        Value::Array(a) => a.push(Value::String(RECOVERED_TOOL_MARK.into())),
        other => *other = json!([RECOVERED_TOOL_MARK]),
    }
}

fn string_entries(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Transcript repair of one chat (contract §3): every `role='tool'` message with an empty
/// or NULL `tool_name` gets the name of the assistant call with its `tool_call_id`, or
/// `unknown` for an orphan. Returns the ids named. The recovery pass runs it for the chat of
/// the message it recovers; the backfill runs it over the whole history.
pub async fn repair_transcript(conn: &mut PgConnection, chat_id: i64) -> Result<Vec<i64>, Error> {
    Ok(sqlx::query_scalar(REPAIR_TRANSCRIPT)
        .bind(chat_id)
        .fetch_all(&mut *conn)
        .await?)
}
