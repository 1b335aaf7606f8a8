//! Sending to the broker: one persistent, mandatory publish that waits for the broker's
//! confirm ([`publish_confirmed`]), used by the worker's session and by the [`Publisher`]
//! of the backfill, the admin API, `revert` and the outbox [`Relay`]; the counting of what
//! was published ([`count`]), so every way out of the process is measured the same (an
//! unroutable burst is said once: `unroutable`). The rows it sends, marks and claims are
//! the `outbox`'s.
//!
//! What is published (the bodies) is `outbound`'s; what a pass owes is written to the
//! outbox by the recovery transaction itself.
//!
//! May depend on: `outbound` (routing keys), `outbox` (the rows), `metrics`,
//! `settings`, `amqp` (the URL), `shutdown`, `error`, `lapin`, `sqlx`. No HTTP.

mod publisher;
mod relay;
mod unroutable;

pub use publisher::{PublishTarget, PublishedCounts, Publisher};
pub use relay::Relay;

use crate::error::Error;
use crate::metrics::Metrics;
use crate::outbound::{MODERATION_ROUTING_KEY, TOOL_CALLS_ROUTING_KEY};
use crate::outbox::Target;
use crate::settings::PublishSettings;
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

/// The two output exchanges, by the outbox's [`Target`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanges {
    /// Topic exchange of moderation messages (routing key `message.ready`).
    pub moderation: String,
    /// Topic exchange of forwarded calls (routing key `tool_call.recovered`).
    pub tool_calls: String,
}

impl Exchanges {
    /// The exchanges of these settings.
    pub fn from_settings(settings: &PublishSettings) -> Self {
        Exchanges {
            moderation: settings.moderation_exchange.clone(),
            tool_calls: settings.tool_calls_exchange.clone(),
        }
    }

    /// The exchange and routing key of a target.
    pub fn route(&self, target: Target) -> (&str, &'static str) {
        match target {
            Target::Moderation => (&self.moderation, MODERATION_ROUTING_KEY),
            Target::ToolCalls => (&self.tool_calls, TOOL_CALLS_ROUTING_KEY),
        }
    }
}

/// Counts one confirmed publish to `exchange` (and, returned, as unroutable: said once per
/// burst, see [`unroutable`]).
pub fn count(metrics: &Metrics, exchange: &str, published: Published) {
    metrics.published(exchange);
    if published == Published::Unroutable {
        metrics.unroutable(exchange);
        unroutable::note(exchange);
    }
}
