//! The recovery pass (contract §3), one transaction, with one front door: a [`Request`]
//! (which message, who asked, what to owe the broker) taken by [`recover`], the group
//! commit ([`recover_batch`], through a [`committer::Committer`]), the dry run
//! ([`what_if`]) and the diagnosis ([`diagnose`]); the worker, the backfill and the admin
//! API all come in through it. Given a message id the pass locks the row,
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
//! There the passes of every message run together, one statement per kind for all of them
//! (`batch.rs`): read (`load.rs`), decide without I/O (`decide.rs`, `plan.rs`), write the
//! effects (`pass.rs`, `save_memory.rs`), the ledger (`ledger.rs`) and the outbox. A single
//! message is the batch of one.
//!
//! May depend on: `ids`, `settings`, `error`, `toolcall_detect`, `outbox` (the write side),
//! `sqlx`, `tokio`. No broker, no HTTP.

/// Transcript repair of the chats in the array parameter `$chats`: a tool message without
/// a name gets the name of the assistant call with its tool_call_id, `unknown` for an
/// orphan. Returns the ids named and their chats. A macro, so that the batch's effects
/// statement (`effects.rs`) holds the very same text.
macro_rules! repair_transcripts {
    ($chats:literal) => {
        concat!(
            "UPDATE messages t SET tool_name = COALESCE(( ",
            "SELECT tc->>'name' FROM messages a, ",
            "jsonb_array_elements(CASE WHEN jsonb_typeof(a.tool_calls) = 'array' ",
            "THEN a.tool_calls ELSE '[]'::jsonb END) tc ",
            "WHERE a.chat_id = t.chat_id AND a.role = 'assistant' ",
            "AND jsonb_typeof(tc) = 'object' AND tc->>'id' = t.tool_call_id ",
            "AND coalesce(tc->>'name', '') <> '' ",
            "ORDER BY a.id LIMIT 1), 'unknown'), updated_at = now() ",
            "WHERE t.chat_id = ANY(",
            $chats,
            ") AND t.role = 'tool' AND coalesce(t.tool_name, '') = '' ",
            "RETURNING t.id, t.chat_id"
        )
    };
}

mod batch;
pub mod committer;
mod decide;
mod dry_run;
mod effects;
mod envelope;
mod ledger;
mod load;
mod pass;
mod plan;
mod policy;
mod report;
pub mod revert;
mod save_memory;

pub use dry_run::{diagnose, what_if, Diagnosis};
pub use envelope::Envelope;
pub use ledger::tool_call_event_id;
pub use plan::planned_outcomes;
pub use policy::{FamilyMode, Mode, Policy};
pub use report::{preview, CallReport, ForwardedCall, Outcome, Report, Source};

use crate::error::Error;
use crate::ids::MessageId;
use load::Lock;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, PgPool, Row};
use std::collections::HashMap;

/// The tool the worker can run itself.
pub const SAVE_MEMORY: &str = "save_memory";
/// The outcome a moderation message carries when recovery failed for good (not a ledger
/// outcome: nothing was recorded).
pub const FAILED: &str = "failed";
/// What a recovered call appends to `tools_used`.
pub const RECOVERED_TOOL_MARK: &str = "save_memory (recovered)";

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

/// One ask of recovery, the front door every way in goes through: which message, who
/// asked, and what a pass that records something owes the broker (written to the outbox
/// in the pass's transaction; none: `--no-publish`, or nothing to publish with). Taken by
/// [`recover`] (the pass alone, committed), [`recover_batch`] (several in one commit: the
/// group commit of [`committer::Committer`], which takes the same three things with the
/// envelope owned), [`recover_in`] (in the caller's transaction), [`what_if`] (rolled
/// back) and [`diagnose`] (read only, described).
pub struct Request<'a> {
    /// The message.
    pub message_id: MessageId,
    /// Who asked (recorded in the ledger).
    pub source: Source,
    /// What a recorded pass owes the broker (written to the outbox).
    pub envelope: Option<&'a dyn Envelope>,
}

impl<'a> Request<'a> {
    /// A request from `source` for `message_id` that owes the broker nothing.
    pub fn new(message_id: MessageId, source: Source) -> Self {
        Request {
            message_id,
            source,
            envelope: None,
        }
    }

    /// The same request, owing what `envelope` says (nothing without one).
    pub fn owing(mut self, envelope: Option<&'a dyn Envelope>) -> Self {
        self.envelope = envelope;
        self
    }
}

/// Runs the recovery pass of one message in one transaction and commits it. A pass that
/// records something (a ledger row) also writes, in the same transaction, what the
/// request's envelope says it owes the broker to the outbox; those rows come back in
/// [`Report::outbox`], for the caller to send after the commit.
///
/// Errors: [`crate::error::Poison::MissingMessage`] when the row does not exist; database errors
/// otherwise (see [`Error::kind`] for which are worth a retry). Nothing is written unless
/// the whole pass commits.
pub async fn recover(
    pool: &PgPool,
    policy: &Policy,
    request: Request<'_>,
) -> Result<Report, Error> {
    let mut conn = pool.acquire().await?;
    alone_on(&mut conn, policy, request).await
}

/// [`recover`] on a connection the caller holds (a committer keeps one while it has work).
async fn alone_on(
    conn: &mut PgConnection,
    policy: &Policy,
    request: Request<'_>,
) -> Result<Report, Error> {
    let mut tx = conn.begin().await?;
    let report = batch::one(&mut tx, policy, request, Lock::Wait).await?;
    tx.commit().await?;
    Ok(report)
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
        self.failed.is_some() && may_be_one_items(&self.error)
    }
}

/// Whether an error may be one message's own: anything but an unavailable database, and a
/// row another transaction holds (SQLSTATE 55P03, from `NOWAIT`).
fn may_be_one_items(error: &Error) -> bool {
    !error.is_transient() || error.has_sqlstate("55P03")
}

/// The recoveries of several messages in ONE transaction and one commit (group commit:
/// where the commit, not the work, is the cost). Each pass is exactly the pass of
/// [`recover`], and they run together: one statement per kind for the whole
/// batch (`batch.rs`). The reports come back in the order of `items`.
///
/// All or nothing: an error rolls back every pass and says which item failed
/// ([`BatchError`]); the others' passes are simply done again by the caller, which is
/// harmless because nothing of the batch was committed. A row another transaction holds
/// is not waited for here (`NOWAIT`): it fails the batch with that item (SQLSTATE 55P03),
/// for the caller to run alone. A statement of the batch that fails names no message; the
/// passes then run again one after another in a new transaction, which finds the first
/// item (in id order) that fails alone, or commits them all.
///
/// Rows are locked in message id order and never waited for, so two batches over the same
/// messages cannot deadlock on them: the later one fails at the first row the other holds.
/// A message named twice is passed twice, the second pass seeing the first (idempotent, as
/// across transactions).
pub async fn recover_batch(
    pool: &PgPool,
    policy: &Policy,
    items: Vec<Request<'_>>,
) -> Result<Vec<Report>, BatchError> {
    let mut conn = pool.acquire().await?;
    batch_on(&mut conn, policy, &items).await
}

/// [`recover_batch`] on a connection the caller holds.
async fn batch_on(
    conn: &mut PgConnection,
    policy: &Policy,
    items: &[Request<'_>],
) -> Result<Vec<Report>, BatchError> {
    match together(conn, policy, items).await {
        Err(e) if e.failed.is_none() && items.len() > 1 && may_be_one_items(&e.error) => {
            tracing::debug!(size = items.len(), error = %e.error, "a statement of the batch failed; its passes run one after another");
            one_after_another(conn, policy, items).await
        }
        result => result,
    }
}

/// The passes of `items` together, in one transaction.
async fn together(
    conn: &mut PgConnection,
    policy: &Policy,
    items: &[Request<'_>],
) -> Result<Vec<Report>, BatchError> {
    let mut tx = conn.begin().await?;
    match batch::run(&mut tx, policy, items, Lock::NoWait).await {
        Ok(reports) => {
            tx.commit().await?;
            Ok(reports)
        }
        Err(mut e) => {
            // Now, not when the connection is next used: the rows this transaction locked
            // before it failed are what the caller goes on with.
            let _ = tx.rollback().await;
            if items.len() == 1 {
                e.failed = e.failed.or(Some(0));
            }
            Err(e)
        }
    }
}

/// The passes of `items` one after another in one transaction, in id order: the first that
/// fails is named.
async fn one_after_another(
    conn: &mut PgConnection,
    policy: &Policy,
    items: &[Request<'_>],
) -> Result<Vec<Report>, BatchError> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].message_id);
    let mut reports: Vec<Option<Report>> = Vec::new();
    reports.resize_with(items.len(), || None);
    let mut tx = conn.begin().await?;
    for i in order {
        match batch::run(&mut tx, policy, &items[i..=i], Lock::NoWait).await {
            Ok(one) => reports[i] = one.into_iter().next(),
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(BatchError {
                    failed: Some(i),
                    error: e.error,
                });
            }
        }
    }
    tx.commit().await?;
    reports
        .into_iter()
        .map(|r| r.ok_or_else(|| Error::Bug("a batch item has no report".into()).into()))
        .collect()
}

/// The pass of [`recover`] on a connection already inside a transaction (for callers
/// that compose it with their own writes, or roll it back: [`what_if`]).
pub async fn recover_in(
    conn: &mut PgConnection,
    policy: &Policy,
    request: Request<'_>,
) -> Result<Report, Error> {
    batch::one(conn, policy, request, Lock::Wait).await
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
/// `unknown` for an orphan. Returns the ids named. The recovery pass runs it for the chats
/// of the messages it recovers; the backfill runs it over the whole history.
pub async fn repair_transcript(conn: &mut PgConnection, chat_id: i64) -> Result<Vec<i64>, Error> {
    Ok(repair_transcripts(conn, &[chat_id])
        .await?
        .remove(&chat_id)
        .unwrap_or_default())
}

/// [`repair_transcript`] of several chats in one statement; the ids named, ascending, by
/// chat (a chat with none is not in the map).
async fn repair_transcripts(
    conn: &mut PgConnection,
    chats: &[i64],
) -> Result<HashMap<i64, Vec<i64>>, Error> {
    let mut out: HashMap<i64, Vec<i64>> = HashMap::new();
    if chats.is_empty() {
        return Ok(out);
    }
    let rows = sqlx::query(repair_transcripts!("$1"))
        .bind(chats)
        .fetch_all(&mut *conn)
        .await?;
    for row in rows {
        out.entry(row.try_get("chat_id")?)
            .or_default()
            .push(row.try_get("id")?);
    }
    for ids in out.values_mut() {
        ids.sort_unstable();
    }
    Ok(out)
}
