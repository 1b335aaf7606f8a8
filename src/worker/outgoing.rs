//! What the worker sends on its session, through `publish`'s one way of sending
//! ([`Sender`] over the session's line): the outbox rows a recovery wrote (confirmed, then
//! marked sent in the background), the messages of a pass that wrote nothing (confirmed
//! before the ack; an unroutable one is parked in the outbox rather than dropped), and the
//! moderation message of an event whose recovery failed for good; the read of a message as
//! stored, for that moderation and for an unexamined event's.
//!
//! May depend on: the parent `worker`, `amqp`, `event`, `outbound`, `publish`, `outbox`,
//! `recover`, `shutdown`, `ids`, `error`, `sqlx`.

use super::Worker;
use crate::amqp::Session;
use crate::error::Error;
use crate::event::FinalizedEvent;
use crate::ids::{AgentId, ChatId, MessageId};
use crate::outbound::{self, StoredMessage};
use crate::outbox::{Outgoing, Queued};
use crate::publish::Sender;
use crate::recover;
use crate::shutdown::Shutdown;
use sqlx::Row;

/// The message as stored, for the moderation of a failed recovery or of an event that
/// could not be examined (no lock: it is read, not changed).
const STORED_MESSAGE: &str = "SELECT chat_id, agent_id, role, content, tools_used, updated_at \
     FROM messages WHERE id = $1";

impl Worker {
    /// The worker's way to send: over the session, to its exchanges, counted in its metrics.
    fn sender<'a>(&'a self, session: &'a Session) -> Sender<'a, Session> {
        Sender {
            line: session,
            exchanges: &self.exchanges,
            metrics: &self.metrics,
        }
    }

    /// Sends rows a recovery wrote to the outbox ([`Sender::deliver`]): a confirmed row is
    /// marked sent in the background (a lost mark is a resend under the same id), an
    /// unroutable one stays pending for the relay. Any error leaves the delivery unacked:
    /// the rows are safe in the outbox whatever happens next.
    pub(super) async fn send_queued(
        &self,
        session: &Session,
        rows: &[Queued],
    ) -> Result<(), Error> {
        self.sender(session)
            .deliver(&self.pool, rows, Some(&self.marker))
            .await
            .map(|_| ())
    }

    /// Sends what a pass that wrote nothing owes ([`Sender::send_direct`]: an unroutable
    /// publish is parked in the outbox, never dropped).
    pub(super) async fn send_direct(
        &self,
        session: &Session,
        message_id: MessageId,
        owed: impl IntoIterator<Item = Outgoing>,
    ) -> Result<(), Error> {
        self.sender(session)
            .send_direct(&self.pool, message_id, owed)
            .await
    }

    /// Moderation of an event whose recovery failed for good (the database refused it, a
    /// bug, a message that never appeared): the content as stored (or, when it cannot be
    /// read, as the event carried it), with `recovery.outcome = "failed"` and the reason,
    /// under the event's moderation id, so a later success is the same message to
    /// moderation. Retried while transient; an error leaves the delivery unacked.
    pub(super) async fn moderate_failed(
        &self,
        session: &Session,
        event: &FinalizedEvent,
        error: &Error,
        shutdown: &Shutdown,
    ) -> Result<(), Error> {
        let (content, tools_used) = match self.stored_message(event.message.id).await {
            Ok(Some(stored)) => (stored.content, stored.tools_used),
            Ok(None) | Err(_) => (
                event.content().map(|c| c.into_owned()),
                event.message.tools_used.clone(),
            ),
        };
        let summary = recover::failed_summary(self.policy.mode, error.dead_letter_reason());
        let owed = outbound::moderation(event, content.as_deref(), &tools_used, &summary)?;
        self.publish_with_retries(
            session,
            shutdown,
            "the moderation of a failed recovery",
            || self.send_direct(session, event.message.id, owed.clone()),
        )
        .await
    }

    /// The message as stored; `None` when it is not in the database.
    pub(super) async fn stored_message(
        &self,
        id: MessageId,
    ) -> Result<Option<StoredMessage>, Error> {
        let Some(row) = sqlx::query(STORED_MESSAGE)
            .bind(id.get())
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let tools_used: sqlx::types::Json<serde_json::Value> = row.try_get("tools_used")?;
        Ok(Some(StoredMessage {
            chat_id: ChatId::new(row.try_get("chat_id")?),
            agent_id: row.try_get::<Option<i64>, _>("agent_id")?.map(AgentId::new),
            role: row.try_get("role")?,
            content: row.try_get("content")?,
            tools_used: string_entries(&tools_used.0),
            updated_at: row.try_get("updated_at")?,
        }))
    }
}

/// The string entries of a stored `tools_used` (anything else in it is not a tool name).
fn string_entries(tools_used: &serde_json::Value) -> Vec<String> {
    tools_used
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
