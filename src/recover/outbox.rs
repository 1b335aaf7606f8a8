//! The write side of the outbox (`migrations/0006_create_outbox.sql`): what a pass owes the
//! broker, written in the pass's own transaction, so a failure between the commit and the
//! broker's confirm loses nothing. Which bodies a pass owes is the caller's [`Envelope`]
//! (the worker's event, or a stand-in event of the backfill, the admin API, a revert);
//! sending them, marking them sent and relaying what stayed pending is `publish`'s.
//!
//! May depend on: the parent `recover` (the report), `error`, `sqlx`. No broker.

use super::revert::RevertReport;
use super::Report;
use crate::error::Error;
use crate::ids::MessageId;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

/// Which output exchange a row goes to; the exchange names are configuration, resolved
/// when the row is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The moderation exchange (routing key `message.ready`).
    Moderation,
    /// The tool-calls exchange (routing key `tool_call.recovered`).
    ToolCalls,
}

impl Target {
    /// The label stored in `outbox.target`.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Moderation => "moderation",
            Target::ToolCalls => "tool_calls",
        }
    }

    /// The target of a stored label.
    pub fn from_label(label: &str) -> Option<Target> {
        match label {
            "moderation" => Some(Target::Moderation),
            "tool_calls" => Some(Target::ToolCalls),
            _ => None,
        }
    }
}

/// One message owed to the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Where it goes.
    pub target: Target,
    /// Its AMQP message id (deterministic, so consumers can drop duplicates).
    pub key: String,
    /// The JSON body, sent byte for byte.
    pub body: String,
}

/// An [`Outgoing`] with its outbox row, not yet sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// `outbox.id`.
    pub id: i64,
    /// What to send.
    pub outgoing: Outgoing,
}

/// What a pass owes the broker, given what it did. The worker's envelope builds the
/// moderation message from the delivered event; the others from a stand-in event.
pub trait Envelope: Sync {
    /// The messages owed for a recovery pass, in the order they must be sent.
    fn outgoing(&self, report: &Report) -> Result<Vec<Outgoing>, Error>;

    /// The messages owed for a revert (the restored message for moderation).
    fn restored(&self, _report: &RevertReport) -> Result<Vec<Outgoing>, Error> {
        Ok(Vec::new())
    }
}

/// Writes `rows` for a message (and the ledger row of the pass that owes them); returns the
/// rows still to send. A row owed before (same target and key: a repeated ask, a redelivery)
/// is not written twice: it comes back if it was never sent, and not at all once it was.
const ENQUEUE: &str = "INSERT INTO outbox (recovery_id, message_id, target, message_key, body) \
     SELECT $1, $2, t, k, b FROM unnest($3::text[], $4::text[], $5::text[]) \
       WITH ORDINALITY AS u(t, k, b, n) ORDER BY n \
     ON CONFLICT (target, message_key) DO UPDATE SET attempts = outbox.attempts \
     RETURNING id, target, message_key, body, sent_at IS NOT NULL AS sent";

/// Writes `rows` in the caller's transaction; returns the rows still to send, in order.
pub async fn enqueue(
    conn: &mut PgConnection,
    recovery_id: Option<i64>,
    message_id: MessageId,
    rows: Vec<Outgoing>,
) -> Result<Vec<Queued>, Error> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let targets: Vec<&str> = rows.iter().map(|r| r.target.as_str()).collect();
    let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    let bodies: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
    let written = sqlx::query(ENQUEUE)
        .bind(recovery_id)
        .bind(message_id.get())
        .bind(&targets)
        .bind(&keys)
        .bind(&bodies)
        .fetch_all(&mut *conn)
        .await?;
    let mut unsent = Vec::with_capacity(written.len());
    for row in written {
        if !row.try_get::<bool, _>("sent")? {
            unsent.push(row);
        }
    }
    Queued::from_rows(unsent)
}

impl Queued {
    /// Rows of `outbox` (`id`, `target`, `message_key`, `body`), in id order: RETURNING
    /// gives no order, and the ids are the order the rows were written in.
    pub fn from_rows(rows: Vec<PgRow>) -> Result<Vec<Queued>, Error> {
        let mut queued = Vec::with_capacity(rows.len());
        for row in rows {
            let label: String = row.try_get("target")?;
            let target = Target::from_label(&label)
                .ok_or_else(|| Error::Bug(format!("outbox target {label:?}")))?;
            queued.push(Queued {
                id: row.try_get("id")?,
                outgoing: Outgoing {
                    target,
                    key: row.try_get("message_key")?,
                    body: row.try_get("body")?,
                },
            });
        }
        queued.sort_by_key(|q| q.id);
        Ok(queued)
    }
}
