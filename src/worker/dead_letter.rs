//! Dead-lettering a delivery that can never succeed: the original body, published to the
//! dead-letter exchange with the reason in `x-tcr-reason` (and the error, the event id,
//! the message id when the worker knew it, and the origin in other `x-tcr-*` headers),
//! confirmed before the delivery is acked.
//!
//! May depend on: the parent `worker`, `amqp`, `error`, `retry`, `publish`, `shutdown`,
//! `ids`, `lapin`.

use super::{truncate, Worker};
use crate::amqp::{self, Session};
use crate::error::Error;
use crate::ids::{EventId, MessageId};
use crate::publish::{Line, Message, Published};
use crate::retry;
use crate::shutdown::Shutdown;
use backon::Retryable;
use lapin::message::Delivery;
use lapin::types::AMQPValue;

impl Worker {
    /// Dead-letters with retries of transient failures while the session is usable.
    pub(super) async fn dead_letter_with_retries(
        &self,
        session: &Session,
        delivery: &Delivery,
        body: &[u8],
        error: &Error,
        ids: (Option<EventId>, Option<MessageId>),
        shutdown: &Shutdown,
    ) -> Result<(), Error> {
        self.publish_with_retries(session, shutdown, "dead-lettering", || {
            self.dead_letter(session, delivery, body, error, ids)
        })
        .await
    }

    /// A publish on the session, retried while it fails transiently, the session is usable
    /// and the worker is not shutting down.
    pub(super) async fn publish_with_retries<F, Fut>(
        &self,
        session: &Session,
        shutdown: &Shutdown,
        what: &'static str,
        publish: F,
    ) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), Error>>,
    {
        let stop = shutdown.clone();
        let mut retries = 0u32;
        publish
            .retry(retry::policy())
            .sleep(retry::sleeper(shutdown.clone()))
            .when(|e: &Error| {
                e.is_transient() && !session.health.is_broken() && !stop.is_shutdown()
            })
            .notify(|e: &Error, after| {
                self.metrics.transient_error("broker");
                retries += 1;
                if retries == 1 {
                    tracing::warn!(what, error = %e, retry_in = ?after, "publishing failed; retrying");
                } else {
                    tracing::debug!(what, error = %e, retry_in = ?after, retries, "still failing; retrying");
                }
            })
            .await
    }

    /// Publishes the original body (`body`: moved out of the delivery to be decoded) to the
    /// dead-letter exchange with the reason in headers. `ids`: the event's and the
    /// message's, as far as the worker knew them (decoded, or found by the lenient scan of
    /// a body that did not decode), so `dead-letters list` shows what it knew.
    async fn dead_letter(
        &self,
        session: &Session,
        delivery: &Delivery,
        body: &[u8],
        error: &Error,
        (event_id, message_id): (Option<EventId>, Option<MessageId>),
    ) -> Result<(), Error> {
        let mut headers = delivery.properties.headers().clone().unwrap_or_default();
        headers.insert(
            "x-tcr-reason".into(),
            amqp::string_value(error.dead_letter_reason()),
        );
        headers.insert(
            "x-tcr-error".into(),
            amqp::string_value(&truncate(&error.to_string(), 500)),
        );
        if let Some(id) = event_id {
            headers.insert("x-tcr-event-id".into(), amqp::string_value(&id.to_string()));
        }
        if let Some(id) = message_id {
            headers.insert("x-tcr-message-id".into(), AMQPValue::LongLongInt(id.get()));
        }
        headers.insert(
            "x-tcr-original-exchange".into(),
            amqp::string_value(delivery.exchange.as_str()),
        );
        headers.insert(
            "x-tcr-original-routing-key".into(),
            amqp::string_value(delivery.routing_key.as_str()),
        );
        headers.insert(
            "x-tcr-dead-lettered-at".into(),
            amqp::string_value(&chrono::Utc::now().to_rfc3339()),
        );
        headers.insert(
            "x-tcr-redelivered".into(),
            AMQPValue::Boolean(delivery.redelivered),
        );
        let names = &self.settings.names;
        match session
            .publish(Message {
                exchange: &names.dead_letter_exchange,
                routing_key: &names.dead_letter_queue,
                body,
                message_id: None,
                headers,
            })
            .await?
        {
            Published::Routed => Ok(()),
            Published::Unroutable => {
                // Never ack what could not be kept. The dead-letter queue or its binding
                // is gone: drop the session, so the next one declares the topology again
                // and the broker redelivers this delivery.
                tracing::error!(
                    queue = %names.dead_letter_queue,
                    exchange = %names.dead_letter_exchange,
                    "dead letter unroutable; rebuilding the session to redeclare the topology"
                );
                session.health.mark_broken();
                Err(Error::NotConfirmed(names.dead_letter_exchange.clone()))
            }
        }
    }
}
