//! Reverting a recovery: the way back when recovery was wrong. One transaction holding the
//! message row locked puts the message back exactly as the ledger says it was before the
//! latest applied pass (content and `tools_used`, byte for byte), deletes the memories and
//! `role='tool'` messages that pass created, and marks its ledger row reverted (rows are
//! never deleted). A message whose latest ledger row is reverted is then left alone by
//! every automatic pass (see `recover_in`).
//!
//! What it refuses: a message that changed after recovery (its content or `tools_used` is
//! no longer what the pass wrote): restoring would throw away someone else's edit. What it
//! keeps: a memory the app edited since (reported, not deleted). It deletes nothing the
//! pass did not create: the ids come from the ledger row, and a tool message must still
//! carry the pass's `tool_call_id`. Transcript repairs of other tool messages are kept:
//! they fix a separate fault, and any pass on the chat would make them again.
//!
//! Publishing the restored message is the caller's job, after the commit.
//!
//! May depend on: the parent `recover` (ledger, plan), `outbox` (the rows it owes), `ids`,
//! `error`, `sqlx`.

use super::{ledger, plan, string_entries, Mode, Source};
use crate::error::{Error, Poison};
use crate::ids::{AgentId, ChatId, MessageId};
use crate::outbox::{enqueue, Outgoing};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool};

const LOCK_MESSAGE: &str =
    "SELECT chat_id, agent_id, content, tools_used FROM messages WHERE id = $1 FOR UPDATE";
const LATEST_RECOVERY: &str = "SELECT id, mode, reverted_at IS NOT NULL AS reverted, \
       content_before, content_after, tools_used_before, tools_used_after \
     FROM recoveries WHERE message_id = $1 ORDER BY id DESC LIMIT 1 FOR UPDATE";
const ITEMS: &str = "SELECT memory_id, tool_message_id, tool_call_id, call_arguments \
     FROM recovery_items WHERE recovery_id = $1 ORDER BY leak_index, item_index";
const MEMORY: &str = "SELECT content FROM agent_memories WHERE id = $1 FOR UPDATE";
const DELETE_MEMORY: &str = "DELETE FROM agent_memories WHERE id = $1";
const DELETE_TOOL_MESSAGE: &str =
    "DELETE FROM messages WHERE id = $1 AND role = 'tool' AND tool_call_id = $2 RETURNING id";
const RESTORE: &str =
    "UPDATE messages SET content = $2, tools_used = $3, updated_at = now() WHERE id = $1";
const MARK_REVERTED: &str = "UPDATE recoveries SET reverted_at = now(), reverted_by = $2, \
     revert_summary = $3 WHERE id = $1";

/// What a revert came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RevertOutcome {
    /// The message is back as it was before recovery.
    Reverted,
    /// A revert already did it: nothing changed.
    AlreadyReverted,
    /// No applied recovery to undo (none, or only observed).
    NothingToRevert,
    /// The message changed after recovery: refused, nothing changed.
    Conflict,
}

impl RevertOutcome {
    /// Every result, so the metric shows each from the start.
    pub const ALL: [RevertOutcome; 4] = [
        RevertOutcome::Reverted,
        RevertOutcome::AlreadyReverted,
        RevertOutcome::NothingToRevert,
        RevertOutcome::Conflict,
    ];

    /// The label in metrics and output.
    pub fn as_str(self) -> &'static str {
        match self {
            RevertOutcome::Reverted => "reverted",
            RevertOutcome::AlreadyReverted => "already_reverted",
            RevertOutcome::NothingToRevert => "nothing_to_revert",
            RevertOutcome::Conflict => "conflict",
        }
    }
}

/// What happened to one row the recovery created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowFate {
    /// The row's id.
    pub id: i64,
    /// `deleted`, `kept_edited` (a memory the app changed since), or `gone` (already
    /// deleted by someone else).
    pub fate: &'static str,
}

/// What a revert did (or, dry, would do).
#[derive(Debug, Clone, Serialize)]
pub struct RevertReport {
    /// The message.
    pub message_id: MessageId,
    /// Its chat.
    pub chat_id: ChatId,
    /// Its agent.
    pub agent_id: Option<AgentId>,
    /// What it came to.
    pub outcome: RevertOutcome,
    /// Why, when nothing was reverted.
    pub reason: Option<String>,
    /// The ledger row undone (or that was undone before).
    pub recovery_id: Option<i64>,
    /// Memories the recovery created, and what became of each.
    pub memories: Vec<RowFate>,
    /// Tool messages the recovery created, and what became of each.
    pub tool_messages: Vec<RowFate>,
    /// Rolled back: nothing was written.
    pub dry_run: bool,
    /// The message is as the revert left it (true for `reverted`; for `already_reverted`,
    /// when nothing changed it since): moderation may be told (again) about the restored
    /// text under the revert's deterministic id. Covers a publish that failed after the
    /// revert committed: asking again publishes it.
    #[serde(skip)]
    pub restored: bool,
    /// The message's content after the revert (the restored one when reverted).
    #[serde(skip)]
    pub content: Option<String>,
    /// `tools_used` after the revert (string entries).
    #[serde(skip)]
    pub tools_used: Vec<String>,
    /// What the revert wrote to the outbox and is still to be sent.
    #[serde(skip)]
    pub outbox: Vec<crate::outbox::Queued>,
}

/// What a revert owes the broker: the restored message for moderation (`outbound`'s
/// stand-in event). The revert's own envelope, apart from a recovery pass's
/// ([`super::Envelope`]): a revert reports differently, and the outbox knows neither.
pub trait RevertEnvelope: Sync {
    /// The messages owed for a revert that left the message restored, in sending order.
    fn restored(&self, report: &RevertReport) -> Result<Vec<Outgoing>, Error>;
}

/// Reverts the latest applied recovery of a message in one transaction (rolled back when
/// `dry_run`). While the message is as the revert left it (reverted now, or before and
/// unchanged since), what `envelope` says is owed for it (the restored message for
/// moderation) is written to the outbox in the same transaction, once: asking again finds
/// the row, and sends it only if it was never sent. Errors: [`Poison::MissingMessage`] for
/// an unknown message, database errors. `by` is recorded in the ledger; without an
/// envelope nothing is owed (`--no-publish`).
pub async fn revert_message(
    pool: &PgPool,
    id: MessageId,
    by: &Source,
    dry_run: bool,
    envelope: Option<&dyn RevertEnvelope>,
) -> Result<RevertReport, Error> {
    let mut tx = pool.begin().await?;
    let mut report = revert_in(&mut tx, id, by).await?;
    let owes = matches!(
        report.outcome,
        RevertOutcome::Reverted | RevertOutcome::AlreadyReverted
    ) && report.restored;
    if let (Some(envelope), true, false) = (envelope, owes, dry_run) {
        let owed = envelope.restored(&report)?;
        report.outbox = enqueue(&mut tx, report.recovery_id, id, owed).await?;
    }
    if dry_run {
        tx.rollback().await?;
        report.dry_run = true;
    } else {
        tx.commit().await?;
    }
    Ok(report)
}

async fn revert_in(
    conn: &mut PgConnection,
    id: MessageId,
    by: &Source,
) -> Result<RevertReport, Error> {
    let message: MessageRow = sqlx::query_as(LOCK_MESSAGE)
        .bind(id.get())
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Poison::MissingMessage(id))?;
    let mut report = RevertReport::nothing_yet(id, &message);
    let pass: Option<PassRow> = sqlx::query_as(LATEST_RECOVERY)
        .bind(id.get())
        .fetch_optional(&mut *conn)
        .await?;
    let Some(pass) = pass else {
        report.reason = Some(format!("message {id} has no recovery in the ledger"));
        return Ok(report);
    };
    report.recovery_id = Some(pass.id);
    if let Some(refused) = refusal(id, &pass, &message)? {
        report.outcome = refused.outcome;
        report.restored = refused.restored;
        report.reason = Some(refused.reason);
        return Ok(report);
    }
    delete_created(conn, pass.id, &mut report).await?;
    restore(conn, id, by, pass, &mut report).await?;
    Ok(report)
}

/// The message row, locked.
#[derive(sqlx::FromRow)]
struct MessageRow {
    chat_id: i64,
    agent_id: Option<i64>,
    content: Option<String>,
    tools_used: Json<Value>,
}

/// The latest ledger row of the message, locked.
#[derive(sqlx::FromRow)]
struct PassRow {
    id: i64,
    mode: String,
    reverted: bool,
    content_before: Option<String>,
    content_after: Option<String>,
    tools_used_before: Json<Value>,
    tools_used_after: Json<Value>,
}

/// An item of the pass: the rows it created.
#[derive(sqlx::FromRow)]
struct ItemRow {
    memory_id: Option<i64>,
    tool_message_id: Option<i64>,
    tool_call_id: Option<String>,
    call_arguments: Option<Json<Value>>,
}

impl RevertReport {
    /// The report of a revert that has not (yet) changed anything: the message as it is.
    fn nothing_yet(id: MessageId, message: &MessageRow) -> Self {
        RevertReport {
            message_id: id,
            chat_id: ChatId::new(message.chat_id),
            agent_id: message.agent_id.map(AgentId::new),
            outcome: RevertOutcome::NothingToRevert,
            reason: None,
            recovery_id: None,
            memories: Vec::new(),
            tool_messages: Vec::new(),
            dry_run: false,
            restored: false,
            content: message.content.clone(),
            tools_used: string_entries(&message.tools_used.0),
            outbox: Vec::new(),
        }
    }
}

/// Why the latest pass is left as it is.
struct Refusal {
    outcome: RevertOutcome,
    reason: String,
    /// The message is as a revert left it (for `already_reverted`).
    restored: bool,
}

/// Whether the latest pass cannot be undone: a revert did it already, it only observed,
/// or the message changed after it (restoring would throw that edit away).
fn refusal(id: MessageId, pass: &PassRow, message: &MessageRow) -> Result<Option<Refusal>, Error> {
    let row = pass.id;
    if pass.reverted {
        return Ok(Some(Refusal {
            outcome: RevertOutcome::AlreadyReverted,
            reason: format!("the recovery of message {id} (ledger row {row}) is already reverted"),
            restored: message.content == pass.content_before
                && message.tools_used.0 == pass.tools_used_before.0,
        }));
    }
    if ledger::ledger_mode(&pass.mode)? == Mode::Observe {
        return Ok(Some(Refusal {
            outcome: RevertOutcome::NothingToRevert,
            reason: format!(
                "the latest pass on message {id} (ledger row {row}) only observed; it \
                 changed nothing"
            ),
            restored: false,
        }));
    }
    let changed = if message.content != pass.content_after {
        "content"
    } else if message.tools_used.0 != pass.tools_used_after.0 {
        "tools_used"
    } else {
        return Ok(None);
    };
    Ok(Some(Refusal {
        outcome: RevertOutcome::Conflict,
        reason: format!(
            "message {id} changed after its recovery (ledger row {row}): its {changed} \
             is no longer what recovery wrote; nothing was reverted"
        ),
        restored: false,
    }))
}

/// Deletes the memories and tool messages the pass `recovery_id` created (only what is
/// still as it wrote it), and says what became of each.
async fn delete_created(
    conn: &mut PgConnection,
    recovery_id: i64,
    report: &mut RevertReport,
) -> Result<(), Error> {
    let items: Vec<ItemRow> = sqlx::query_as(ITEMS)
        .bind(recovery_id)
        .fetch_all(&mut *conn)
        .await?;
    for item in items {
        if let Some(memory_id) = item.memory_id {
            let written = item.call_arguments.and_then(|a| plan::memory_content(&a.0));
            report.memories.push(RowFate {
                id: memory_id,
                fate: remove_memory(conn, memory_id, written.as_deref()).await?,
            });
        }
        if let Some(tool_message_id) = item.tool_message_id {
            let deleted: Option<i64> = sqlx::query_scalar(DELETE_TOOL_MESSAGE)
                .bind(tool_message_id)
                .bind(item.tool_call_id)
                .fetch_optional(&mut *conn)
                .await?;
            report.tool_messages.push(RowFate {
                id: tool_message_id,
                fate: if deleted.is_some() { "deleted" } else { "gone" },
            });
        }
    }
    Ok(())
}

/// Puts the message back as it was before the pass and marks the pass reverted, with
/// what the revert did.
async fn restore(
    conn: &mut PgConnection,
    id: MessageId,
    by: &Source,
    pass: PassRow,
    report: &mut RevertReport,
) -> Result<(), Error> {
    sqlx::query(RESTORE)
        .bind(id.get())
        .bind(&pass.content_before)
        .bind(&pass.tools_used_before)
        .execute(&mut *conn)
        .await?;
    let summary = json!({
        "by": by.label(),
        "memories": report.memories,
        "tool_messages": report.tool_messages,
    });
    sqlx::query(MARK_REVERTED)
        .bind(pass.id)
        .bind(by.label())
        .bind(Json(&summary))
        .execute(&mut *conn)
        .await?;
    report.outcome = RevertOutcome::Reverted;
    report.restored = true;
    report.content = pass.content_before;
    report.tools_used = string_entries(&pass.tools_used_before.0);
    Ok(())
}

/// Deletes a memory the recovery created, unless it changed since (then it is the app's).
async fn remove_memory(
    conn: &mut PgConnection,
    memory_id: i64,
    written: Option<&str>,
) -> Result<&'static str, Error> {
    let current: Option<String> = sqlx::query_scalar(MEMORY)
        .bind(memory_id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match current {
        None => "gone",
        Some(c) if Some(c.as_str()) != written => "kept_edited",
        Some(_) => {
            sqlx::query(DELETE_MEMORY)
                .bind(memory_id)
                .execute(&mut *conn)
                .await?;
            "deleted"
        }
    })
}
