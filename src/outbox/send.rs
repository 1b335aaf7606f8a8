//! The send side of the outbox (the write side is `write.rs`): marking rows sent
//! once the broker confirmed them, recording why a row is still pending, parking a direct
//! publish that came back unroutable, and claiming pending rows for the relay (`publish::Relay`).
//!
//! Marking sent is off the hot path: the worker hands ids to a [`Marker`], which writes
//! them in batches on a connection of its own with `synchronous_commit = off`. Losing a
//! mark (a crash before the WAL is flushed) only means the relay sends the row again under
//! the same message id, which consumers drop; losing a row is what the outbox prevents,
//! and rows are written by the recovery transaction itself, synchronously.
//!
//! May depend on: the parent `outbox` (the row types), `ids`, `error`, `sqlx`, `tokio`.

use super::{Outgoing, Queued};
use crate::error::Error;
use crate::ids::MessageId;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use std::time::Duration;
use tokio::sync::mpsc;

/// Found by primary key only. With `sent_at IS NULL` in its `WHERE` the planner may take
/// `outbox_pending_idx` (its predicate), and that index holds an entry for every row marked
/// since the last vacuum: a mark then walked every row sent so far (3.4 ms for 20 rows after
/// 16,000 recoveries, the dirty path's costliest statement). A row already sent keeps its
/// time and count. Unprepared, so the plan is made for the table as it is, not cached from
/// when it was empty.
const MARK_SENT: &str = "UPDATE outbox SET sent_at = coalesce(sent_at, now()), \
       attempts = attempts + (sent_at IS NULL)::int, last_error = NULL \
     WHERE id = ANY($1)";
/// A failed or unroutable attempt: try again after a backoff that doubles per attempt,
/// from 5 s to at most 5 min.
const NOTE_FAILURE: &str = "UPDATE outbox SET attempts = attempts + 1, last_error = $2, \
       next_attempt_at = now() + least(interval '5 minutes', \
         interval '5 seconds' * power(2, least(attempts, 6))) \
     WHERE id = $1 AND sent_at IS NULL";
/// What `last_error` says of an attempt that came back unroutable (a prefix: [`PENDING`]
/// counts rows whose last attempt did apart).
pub(crate) const UNROUTABLE: &str = "unroutable: no queue is bound";
const PARK: &str = "INSERT INTO outbox (message_id, target, message_key, body, attempts, \
       last_error, next_attempt_at) \
     VALUES ($1, $2, $3, $4, 1, 'unroutable: no queue is bound', now() + interval '5 seconds') \
     ON CONFLICT (target, message_key) DO NOTHING";
/// Rows due, oldest first, leased for `$3` so that another relay skips them meanwhile; a
/// row younger than `$2` is left to the process that wrote it (it is sending it now).
const CLAIM: &str = "UPDATE outbox SET next_attempt_at = now() + $3::interval \
     WHERE id IN (SELECT id FROM outbox \
       WHERE sent_at IS NULL AND next_attempt_at <= now() \
         AND created_at <= now() - $2::interval \
       ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) \
     RETURNING id, target, message_key, body";
/// Rows not yet sent: those not confirmed (never tried, the broker failed), and those
/// whose last attempt came back unroutable (parked until a queue is bound).
const PENDING: &str = "SELECT count(*) FILTER (WHERE last_error IS NULL \
         OR last_error NOT LIKE 'unroutable%'), \
       count(*) FILTER (WHERE last_error LIKE 'unroutable%') \
     FROM outbox WHERE sent_at IS NULL";

/// Marks rows sent.
pub(crate) async fn mark_sent(pool: &PgPool, ids: &[i64]) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(MARK_SENT)
        .bind(ids)
        .persistent(false)
        .execute(pool)
        .await?;
    Ok(())
}

/// Records a failed or unroutable attempt at a row; it stays pending, due again later.
pub(crate) async fn note_failure(pool: &PgPool, id: i64, why: &str) -> Result<(), Error> {
    let why: String = why.chars().take(500).collect();
    sqlx::query(NOTE_FAILURE)
        .bind(id)
        .bind(why)
        .execute(pool)
        .await?;
    Ok(())
}

/// Keeps a message whose direct publish (a clean message, nothing written for it) came
/// back unroutable, so the relay sends it once a queue is bound instead of dropping it.
pub(crate) async fn park(
    pool: &PgPool,
    message_id: MessageId,
    out: &Outgoing,
) -> Result<(), Error> {
    sqlx::query(PARK)
        .bind(message_id.get())
        .bind(out.target.as_str())
        .bind(&out.key)
        .bind(&out.body)
        .execute(pool)
        .await?;
    Ok(())
}

/// Claims up to `limit` pending rows older than `grace`, leasing them for `lease`.
pub(crate) async fn claim(
    pool: &PgPool,
    limit: i64,
    grace: Duration,
    lease: Duration,
) -> Result<Vec<Queued>, Error> {
    let rows = sqlx::query(CLAIM)
        .bind(limit)
        .bind(interval(grace))
        .bind(interval(lease))
        .fetch_all(pool)
        .await?;
    Queued::from_rows(rows)
}

/// Rows not yet sent: `(pending, unroutable)`, those not confirmed and those parked
/// because their last publish came back unroutable.
pub(crate) async fn pending(pool: &PgPool) -> Result<(i64, i64), Error> {
    Ok(sqlx::query_as(PENDING).fetch_one(pool).await?)
}

fn interval(d: Duration) -> String {
    format!("{} milliseconds", d.as_millis())
}

/// Writes "sent" marks in batches, off the path of the delivery that sent them.
#[derive(Clone)]
pub struct Marker {
    tx: mpsc::UnboundedSender<i64>,
}

/// Marks written in one statement at most.
const MARK_BATCH: usize = 512;

impl Marker {
    /// Starts the marking task on a connection of its own to the database of `options`.
    /// The task ends once every [`Marker`] is dropped and the last marks are written.
    pub fn start(options: PgConnectOptions) -> (Marker, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(mark_batches(options, rx));
        (Marker { tx }, task)
    }

    /// Marks a row sent (eventually).
    pub fn sent(&self, id: i64) {
        // The task outlives every sender but for a panic; a lost mark is a resend.
        let _ = self.tx.send(id);
    }
}

async fn mark_batches(options: PgConnectOptions, mut rx: mpsc::UnboundedReceiver<i64>) {
    let options = options.options([("synchronous_commit", "off")]);
    let mut conn: Option<PgConnection> = None;
    let mut batch = Vec::with_capacity(MARK_BATCH);
    while rx.recv_many(&mut batch, MARK_BATCH).await > 0 {
        for attempt in 0..3 {
            if conn.is_none() {
                conn = options.connect().await.ok();
            }
            let Some(c) = conn.as_mut() else {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                continue;
            };
            match sqlx::query(MARK_SENT)
                .bind(&batch)
                .persistent(false)
                .execute(&mut *c)
                .await
            {
                Ok(_) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "marking outbox rows sent failed; retrying");
                    if let Some(c) = conn.take() {
                        let _ = c.close().await;
                    }
                }
            }
        }
        // Marks that could not be written leave their rows pending: the relay sends them
        // again under the same ids.
        batch.clear();
    }
    if let Some(c) = conn {
        let _ = c.close().await;
    }
}
