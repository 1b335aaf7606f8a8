//! The outbox (`migrations/0006_create_outbox.sql`): what a pass owes the broker, kept in
//! the database so a failure between a commit and the broker's confirm loses nothing. One
//! room for both of its sides:
//!
//! - the write side ([`enqueue`], `write.rs`): the rows a recovery or a revert owes,
//!   written in that pass's own transaction;
//! - the send side (`send.rs`): marking rows sent once the broker confirmed them
//!   ([`Marker`], off the delivery's path), noting a failed attempt, parking a direct
//!   publish that came back unroutable, and claiming what stayed pending for the relay.
//!
//! What a pass owes (which bodies) is the caller's envelope (`recover::Envelope`,
//! `recover::revert::RevertEnvelope`); sending is `publish`'s. The outbox knows neither:
//! it stores and hands back rows.
//!
//! May depend on: `ids`, `error`, `sqlx`, `tokio`. No broker, no recovery.

mod send;
mod write;

pub use send::Marker;
pub(crate) use send::{claim, mark_sent, note_failure, park, pending, UNROUTABLE};
pub(crate) use write::{enqueue, enqueue_all, Owed};

use crate::error::Error;
use sqlx::postgres::PgRow;
use sqlx::Row;

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

impl Queued {
    /// Rows of `outbox` (`id`, `target`, `message_key`, `body`), in id order: RETURNING
    /// gives no order, and the ids are the order the rows were written in.
    pub(crate) fn from_rows(rows: Vec<PgRow>) -> Result<Vec<Queued>, Error> {
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
