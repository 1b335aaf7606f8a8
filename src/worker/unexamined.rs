//! A delivery the worker cannot examine (too large, not UTF-8, not JSON, not the event's
//! shape) that still names its message and shows it is a `message.finalized` event: the
//! message reaches moderation anyway, as it is stored, with `recovery.outcome` saying why
//! it was not examined (`oversized`, `unreadable`), and then the delivery is dead-lettered
//! for inspection.
//!
//! The ids and the type come from a lenient scan of the body ([`event::named`]), which
//! copies nothing; the content comes from the database by id, not from the body: what
//! reaches moderation is then always a well-formed message, the database is the truth
//! (contract §3, as for a failed recovery), and nothing of the body is parsed or copied,
//! however large or broken. A body that names no message, or does not show the type
//! `message.finalized` (another type, or none readable), is only dead-lettered.
//!
//! Moderation sees the message once per kind: every unexamined body of one message is
//! published under the one stand-in id of that message ([`crate::ids::unexamined_event_id`]),
//! whatever event id it shows, so a consumer drops the repeats by event id; and an
//! examined event of the same message is current over it, whichever comes first (the
//! rule is in docs/contract.md).
//!
//! The order is the one of a failed recovery: moderation confirmed, then the dead letter
//! confirmed, then the ack. A message not in the database is waited for like any other
//! (`--missing-message-retry-secs`); once the window runs out the delivery is dead-lettered
//! only.
//!
//! May depend on: the parent `worker`, `amqp`, `event`, `outbound`, `shutdown`,
//! `error`, `lapin`.

use super::{show, Delivered, Taken, Worker};
use crate::amqp::Session;
use crate::error::{Error, Poison};
use crate::event::{self, Kind, Named, Undecoded};
use crate::outbound;
use crate::shutdown::Shutdown;

impl Worker {
    /// Moderates the message a body that did not decode names (when the reason leaves it
    /// unexamined and the body names one), then dead-letters the delivery with `poison`.
    pub(super) async fn unexamined(
        &self,
        session: &Session,
        delivered: &Delivered<'_>,
        undecoded: Undecoded,
        shutdown: &Shutdown,
    ) {
        let Undecoded {
            poison,
            event_id,
            body,
        } = undecoded;
        let named = poison
            .unexamined_outcome()
            .and_then(|_| event::named(&body));
        let event_id = event_id.or(named.and_then(|n| n.event_id));
        let mode = self.policy.mode.as_str();
        let result = match named {
            None => Err(Error::Poison(poison)),
            Some(named) if named.kind != Kind::Finalized => {
                tracing::info!(event_id = %show(event_id), message_id = %named.message_id, mode, reason = poison.reason(), "not moderating the message of an unexamined event: the body does not show the type message.finalized");
                Err(Error::Poison(poison))
            }
            Some(named) => {
                let ids = (event_id, named.message_id);
                let moderated = self
                    .with_retries(session, shutdown, ids, || {
                        self.moderate_unexamined(session, named, &poison)
                    })
                    .await;
                match moderated {
                    Ok(()) => Err(Error::Poison(poison)),
                    Err(e) if e.is_transient() => Err(e),
                    Err(e) => {
                        tracing::warn!(event_id = %show(event_id), message_id = %named.message_id, mode, error = %e, "the message of an unexamined event cannot be moderated; dead-lettering the event only");
                        Err(Error::Poison(poison))
                    }
                }
            }
        };
        let taken = Taken {
            delivered,
            body: &body,
            event_id,
            message_id: named.map(|n| n.message_id),
        };
        self.finish(session, taken, result, shutdown).await;
    }

    /// One attempt: the message as stored, published for moderation (confirmed; parked in
    /// the outbox when unroutable). [`Poison::MissingMessage`] when it is not stored.
    async fn moderate_unexamined(
        &self,
        session: &Session,
        named: Named,
        poison: &Poison,
    ) -> Result<(), Error> {
        let stored = self
            .stored_message(named.message_id)
            .await?
            .ok_or(Poison::MissingMessage(named.message_id))?;
        let outcome = poison.unexamined_outcome().unwrap_or("unreadable");
        let summary = outbound::unexamined_summary(self.policy.mode, outcome, poison.reason());
        let owed = outbound::unexamined_moderation(named, stored, summary)?;
        if owed.is_some() {
            tracing::info!(event_id = %show(named.event_id), message_id = %named.message_id, mode = self.policy.mode.as_str(), outcome, "moderating the message of an event that was not examined, as stored");
        }
        self.send_direct(session, named.message_id, owed).await
    }
}
