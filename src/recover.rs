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
//! Callers that recover many messages at once (the worker, the backfill) go through a
//! [`committer::Committer`], which puts the recoveries that queue up in one transaction.
//!
//! May depend on: `ids`, `settings`, `error`, `toolcall_detect`, `sqlx`, `tokio`. No broker,
//! no HTTP.

pub mod committer;
mod dry_run;
mod ledger;
pub mod outbox;
mod pass;
mod plan;
mod policy;
mod report;
pub mod revert;
mod save_memory;

pub use dry_run::{diagnose, what_if, Diagnosis};
pub use ledger::tool_call_event_id;
pub use plan::planned_outcomes;
pub use policy::{FamilyMode, Mode, Policy};
pub use report::{preview, CallReport, ForwardedCall, Outcome, Report, Source};

use crate::error::{Error, Poison};
use crate::ids::{AgentId, ChatId, MessageId};
use chrono::{DateTime, Utc};
use pass::Effects;
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::{Connection, PgConnection, PgPool, Row};
use toolcall_detect::{Config, Detection, Input};

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
/// [`LOCK_MESSAGE`] in a batch: a row another transaction holds (the app writing the
/// message, a redelivery's pass) fails the batch at once ([`BatchError`]) instead of
/// holding every message of the batch behind it; that one message then runs alone, and
/// waits.
const LOCK_MESSAGE_NOWAIT: &str = "SELECT chat_id, agent_id, role, content, tools_used, \
     created_at FROM messages WHERE id = $1 FOR UPDATE NOWAIT";
/// The same row, read and not locked (the diagnosis changes nothing).
const READ_MESSAGE: &str = "SELECT chat_id, agent_id, role, content, tools_used, created_at \
     FROM messages WHERE id = $1";
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
    let report =
        pass_with_outbox(&mut tx, message_id, policy, source, envelope, LOCK_MESSAGE).await?;
    tx.commit().await?;
    Ok(report)
}

/// One message of a [`recover_batch`].
pub struct BatchItem<'a> {
    /// The message.
    pub message_id: MessageId,
    /// Where the pass comes from.
    pub source: Source,
    /// What a recorded pass owes the broker (written to the outbox).
    pub envelope: Option<&'a dyn outbox::Envelope>,
}

/// Why a [`recover_batch`] committed nothing.
#[derive(Debug)]
pub struct BatchError {
    /// The item whose pass failed; `None` when the transaction itself did (begin, commit).
    pub failed: Option<usize>,
    /// What failed.
    pub error: Error,
}

impl BatchError {
    /// Whether the failure is the failed item's own (its row is missing or locked, its
    /// content is refused, ...), so the others can go on without it; otherwise it is the
    /// database's (connection, deadlock, ...) and every item has to wait.
    pub fn is_the_items_own(&self) -> bool {
        self.failed.is_some() && (!self.error.is_transient() || self.error.has_sqlstate("55P03"))
    }
}

/// The recoveries of several messages in ONE transaction and one commit (group commit:
/// where the commit, not the work, is the cost). Each pass is exactly the pass of
/// [`recover_with_outbox`]; the reports come back in the order of `items`.
///
/// All or nothing: an error in any pass rolls back every pass and says which item failed
/// ([`BatchError`]); the others' passes are simply done again by the caller, which is
/// harmless because nothing of the batch was committed. A row another transaction holds
/// is not waited for here (`NOWAIT`): it fails the batch with that item (SQLSTATE 55P03),
/// for the caller to run alone.
///
/// Rows are locked in message id order and never waited for, so two batches over the same
/// messages cannot deadlock on them: the later one fails at the first row the other holds.
/// A message named twice is passed twice, the second pass seeing the first (idempotent, as
/// across transactions).
pub async fn recover_batch(
    pool: &PgPool,
    policy: &Policy,
    items: Vec<BatchItem<'_>>,
) -> Result<Vec<Report>, BatchError> {
    let whole = |error: Error| BatchError {
        failed: None,
        error,
    };
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].message_id);
    let mut reports: Vec<Option<Report>> = Vec::new();
    reports.resize_with(items.len(), || None);
    let mut items: Vec<Option<BatchItem<'_>>> = items.into_iter().map(Some).collect();
    let mut tx = pool.begin().await.map_err(|e| whole(e.into()))?;
    for i in order {
        let Some(item) = items[i].take() else {
            return Err(whole(Error::Bug("a batch item was taken twice".into())));
        };
        let report = pass_with_outbox(
            &mut tx,
            item.message_id,
            policy,
            item.source,
            item.envelope,
            LOCK_MESSAGE_NOWAIT,
        )
        .await
        .map_err(|error| BatchError {
            failed: Some(i),
            error,
        })?;
        reports[i] = Some(report);
    }
    tx.commit().await.map_err(|e| whole(e.into()))?;
    reports
        .into_iter()
        .map(|r| r.ok_or_else(|| whole(Error::Bug("a batch item has no report".into()))))
        .collect()
}

/// One pass and the outbox rows it owes, inside the caller's transaction.
async fn pass_with_outbox(
    tx: &mut PgConnection,
    message_id: MessageId,
    policy: &Policy,
    source: Source,
    envelope: Option<&dyn outbox::Envelope>,
    lock: &'static str,
) -> Result<Report, Error> {
    let mut report = pass_locking(tx, message_id, policy, source, lock).await?;
    if let (Some(envelope), true) = (envelope, report.recorded()) {
        let owed = envelope.outgoing(&report)?;
        report.outbox = outbox::enqueue(tx, report.recovery_id, message_id, owed).await?;
    }
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
    pass_locking(conn, message_id, policy, source, LOCK_MESSAGE).await
}

/// [`recover_in`], the row locked by `lock` ([`LOCK_MESSAGE`] or [`LOCK_MESSAGE_NOWAIT`]).
async fn pass_locking(
    conn: &mut PgConnection,
    message_id: MessageId,
    policy: &Policy,
    source: Source,
    lock: &'static str,
) -> Result<Report, Error> {
    let row = load_message(conn, message_id, lock).await?;
    let (mut report, loaded) = start(conn, message_id, &row, policy).await?;
    let Some(loaded) = loaded else {
        return Ok(report);
    };
    let detection = detect_with(&loaded, &policy.detect);
    let (detection, replayed) = match decide(&mut report, &loaded, detection, policy, &source) {
        Decision::Done => return Ok(report),
        Decision::AlreadyRecovered(prev) => {
            return already_recovered(conn, report, prev, source).await
        }
        Decision::Pass {
            detection,
            replayed,
        } => (detection, replayed),
    };
    let ctx = save_memory::CallCtx {
        row: &row,
        message_id,
    };
    let planned = plan::plan(&detection, &loaded.enabled_tools, &policy.detect);
    let content = &loaded.content;
    let mut pass = match report.mode {
        Mode::Recover => {
            pass::run_pass(conn, &ctx, content, &detection, planned, Effects::Apply).await?
        }
        Mode::Observe => {
            // The same effects, undone: the would-be outcome is the real decision.
            let mut savepoint = conn.begin().await?;
            let pass = pass::run_pass(
                &mut savepoint,
                &ctx,
                content,
                &detection,
                planned,
                Effects::Apply,
            )
            .await;
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
    pass::record(conn, &row, content, &detection, pass, source, report).await
}

/// What a pass reads after the message row: the content it works on, the agent's tools,
/// the latest ledger row, and whether the content is one an applied pass started from.
struct Loaded {
    content: String,
    tools_used: Vec<String>,
    enabled_tools: Vec<String>,
    prev: Option<ledger::PrevRecovery>,
    replayed: Option<i64>,
}

/// The report of a pass that does nothing yet, and what the pass needs to decide; `None`
/// for a message that cannot hold a leak (not an assistant's, no content).
async fn start(
    conn: &mut PgConnection,
    message_id: MessageId,
    row: &MessageRow,
    policy: &Policy,
) -> Result<(Report, Option<Loaded>), Error> {
    let tools_used = string_entries(&row.tools_used);
    let report = Report {
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
        _ => return Ok((report, None)),
    };
    let context = sqlx::query(CONTEXT)
        .bind(message_id.get())
        .bind(row.agent_id)
        .bind(&content)
        .fetch_one(&mut *conn)
        .await?;
    let loaded = Loaded {
        content,
        tools_used,
        enabled_tools: context.try_get("enabled_tools")?,
        prev: ledger::prev_recovery(&context)?,
        replayed: context.try_get("replayed_id")?,
    };
    Ok((report, Some(loaded)))
}

/// What a pass will do, decided from what it read; `report` is completed for the cases
/// that end here.
enum Decision {
    /// Nothing to do (clean, reverted, no agent): `report` says which.
    Done,
    /// A pass did the work before.
    AlreadyRecovered(ledger::PrevRecovery),
    /// Run the recovery table on this detection; `replayed`: the ledger row whose calls
    /// already ran on this very content (then the detection is strip-only).
    Pass {
        detection: Detection,
        replayed: Option<i64>,
    },
}

fn decide(
    report: &mut Report,
    loaded: &Loaded,
    mut detection: Detection,
    policy: &Policy,
    source: &Source,
) -> Decision {
    let prev = loaded.prev.clone();
    if detection.is_clean() {
        return match prev.filter(|p| p.applied()) {
            Some(prev) => Decision::AlreadyRecovered(prev),
            None => Decision::Done,
        };
    }
    if let Some(prev) = &prev {
        if prev.reverted && !matches!(source, Source::Admin) {
            report.outcome = Outcome::Reverted;
            report.summary = ledger::summary_of(Outcome::Reverted, policy.mode, &[], 0);
            return Decision::Done;
        }
    }
    let mode = policy.pass_mode(&detection);
    report.mode = mode;
    report.summary = ledger::summary_of(Outcome::Clean, mode, &[], 0);
    // The content is exactly what a pass left (cleaned text, a message kept for review),
    // or what an observe-mode pass already recorded: nothing new to do or to record.
    if let Some(prev) = prev {
        let content = Some(loaded.content.as_str());
        let left_by_applied = prev.applied() && prev.content_after.as_deref() == content;
        let seen_by_observer = mode == Mode::Observe
            && prev.mode == Mode::Observe
            && !prev.reverted
            && prev.content_before.as_deref() == content;
        if left_by_applied || seen_by_observer {
            return Decision::AlreadyRecovered(prev);
        }
    }
    // The content is what an applied pass found before it cleaned it: the app wrote the old
    // text back (a full-row save of a stale copy). That pass's calls ran; running them again
    // would save every memory twice. The markup is stripped (and recorded) only.
    if loaded.replayed.is_some() {
        detection.strip_only = true;
    }
    if !detection.strip_only && report.agent_id.is_none() {
        report.outcome = Outcome::NoAgent;
        report.summary = ledger::summary_of(Outcome::NoAgent, mode, &[], 0);
        return Decision::Done;
    }
    Decision::Pass {
        detection,
        replayed: loaded.replayed,
    }
}

fn detect_with(loaded: &Loaded, config: &Config) -> Detection {
    toolcall_detect::detect(
        &Input {
            content: &loaded.content,
            tools_used: &loaded.tools_used,
            enabled_tools: &loaded.enabled_tools,
        },
        config,
    )
}

/// The message row by `sql` ([`LOCK_MESSAGE`], [`LOCK_MESSAGE_NOWAIT`] or [`READ_MESSAGE`]).
async fn load_message(
    conn: &mut PgConnection,
    id: MessageId,
    sql: &'static str,
) -> Result<MessageRow, Error> {
    let row = sqlx::query(sql)
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
