//! Sending to the broker: one persistent, mandatory publish that waits for the broker's
//! confirm ([`publish_confirmed`]), used by the worker's session and by the [`Publisher`]
//! of the backfill, the admin API and `revert`, and the counting of what was published
//! ([`count`]), so every way out of the process is measured the same.
//!
//! What is published (the bodies) is `outbound`'s; when, is the caller's.
//!
//! May depend on: `outbound`, `recover` (the reports it publishes), `metrics`, `settings`,
//! `error`, `lapin`. No HTTP, no database.

mod publisher;

pub use publisher::{PublishTarget, PublishedCounts, Publisher};

use crate::error::Error;
use crate::metrics::Metrics;
use lapin::options::BasicPublishOptions;
use lapin::publisher_confirm::Confirmation;
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel};

/// What a confirmed publish came back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Routed to at least one queue.
    Routed,
    /// Accepted but returned: no queue is bound for it.
    Unroutable,
}

/// Publishes a persistent JSON message with the mandatory flag on `channel` (in confirm
/// mode) and waits for the broker's confirm. A negative confirm is an error (retry); a
/// returned (unroutable) message is reported, not an error. The one publish of the crate:
/// the worker's session and the backfill/admin publisher both use it.
pub async fn publish_confirmed(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    message_id: Option<&str>,
    headers: FieldTable,
) -> Result<Published, Error> {
    let mut props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type(ShortString::from("application/json"))
        .with_app_id(ShortString::from("toolcall-recovery"))
        .with_headers(headers);
    if let Some(id) = message_id {
        props = props.with_message_id(ShortString::from(id.to_string()));
    }
    let options = BasicPublishOptions {
        mandatory: true,
        ..Default::default()
    };
    let confirmation = channel
        .basic_publish(exchange, routing_key, options, body, props)
        .await?
        .await?;
    match confirmation {
        Confirmation::Ack(None) | Confirmation::NotRequested => Ok(Published::Routed),
        Confirmation::Ack(Some(_)) => Ok(Published::Unroutable),
        Confirmation::Nack(_) => Err(Error::NotConfirmed(exchange.to_string())),
    }
}

/// Counts one confirmed publish to `exchange` (and, returned, as unroutable).
pub fn count(metrics: &Metrics, exchange: &str, published: Published) {
    metrics.published(exchange);
    if published == Published::Unroutable {
        metrics.unroutable(exchange);
        tracing::warn!(
            exchange,
            "published message was unroutable: no queue is bound"
        );
    }
}
