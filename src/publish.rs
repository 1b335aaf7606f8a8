//! Sending to the broker, every way out of the process in one place: connecting
//! ([`connect`], [`confirm_channel`]), one persistent, mandatory publish that waits for
//! the broker's confirm ([`publish_confirmed`]), sending outbox rows over a [`Line`] the
//! one way ([`Sender`]: routed, confirmed, marked sent, parked when unroutable), and the
//! counting of what was published ([`count`]), so every way out is measured the same (an
//! unroutable burst is said once: `unroutable`).
//!
//! Two kinds of line, a connection per purpose: the worker's session (`amqp::Session`,
//! whose publishing channel shares the connection of its consumer, so a broken session is
//! one fault) and the [`Publisher`] of the backfill, the admin API, `revert` and the outbox
//! [`Relay`] (a connection of its own: their confirms never wait behind the worker's). The
//! `dead-letters` and `demo` commands publish with [`publish_confirmed`] on a
//! [`confirm_channel`] of their own.
//!
//! What is published (the bodies) is `outbound`'s; what a pass owes is written to the
//! outbox by the recovery transaction itself; the rows are the `outbox`'s.
//!
//! May depend on: `outbound` (routing keys), `outbox` (the rows), `ids`, `metrics`,
//! `settings`, `shutdown`, `error`, `lapin`, `sqlx`, `tokio`. No HTTP.

mod publisher;
mod relay;
mod sender;
mod unroutable;

pub use publisher::{PublishTarget, Publisher};
pub use relay::Relay;
pub use sender::PublishedCounts;
pub(crate) use sender::{Line, Sender};

use crate::error::Error;
use crate::metrics::Metrics;
use crate::outbound::{MODERATION_ROUTING_KEY, TOOL_CALLS_ROUTING_KEY};
use crate::outbox::Target;
use crate::settings::{PublishSettings, SecretUrl};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::publisher_confirm::Confirmation;
use lapin::types::{FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};

/// The broker URL, parsed. lapin's own parse error quotes the whole URL, password
/// included, and a failed connection is logged on every retry: so the error here names the
/// URL masked and leaves lapin's text out.
pub(crate) fn uri(url: &SecretUrl) -> Result<lapin::uri::AMQPUri, Error> {
    url.expose().parse().map_err(|_| {
        Error::Startup(format!(
            "AMQP_URL {url} is not an AMQP URL (amqp://user:password@host:port/vhost, or \
             amqps:// for TLS)"
        ))
    })
}

/// A broker connection named `name` (as `rabbitmqctl list_connections` shows it), over TLS
/// for `amqps://`, on the process's tokio runtime.
pub(crate) async fn connect(url: &SecretUrl, name: &str) -> Result<Connection, Error> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio)
        .with_connection_name(LongString::from(name.to_string()));
    Ok(Connection::connect_uri(uri(url)?, props).await?)
}

/// A connection named `name` with one channel in confirm mode: a publisher's own line.
pub(crate) async fn confirm_channel(
    url: &SecretUrl,
    name: &str,
) -> Result<(Connection, Channel), Error> {
    let connection = connect(url, name).await?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok((connection, channel))
}

/// Declares durable topic exchanges (idempotent: the same declares wherever they are made).
pub(crate) async fn declare_topic_exchanges<'a>(
    channel: &Channel,
    exchanges: impl IntoIterator<Item = &'a String>,
) -> Result<(), Error> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for exchange in exchanges {
        channel
            .exchange_declare(
                exchange,
                ExchangeKind::Topic,
                durable,
                FieldTable::default(),
            )
            .await?;
    }
    Ok(())
}

/// What a confirmed publish came back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Routed to at least one queue.
    Routed,
    /// Accepted but returned: no queue is bound for it.
    Unroutable,
}

/// One message to publish: where it goes, its body, its AMQP message id (deterministic
/// where consumers drop duplicates by it) and headers.
pub struct Message<'a> {
    /// The exchange.
    pub exchange: &'a str,
    /// The routing key.
    pub routing_key: &'a str,
    /// The JSON body, sent byte for byte.
    pub body: &'a [u8],
    /// The AMQP `message_id`, if any.
    pub message_id: Option<&'a str>,
    /// The headers (empty but for dead letters and their replays).
    pub headers: FieldTable,
}

/// Publishes a persistent JSON message with the mandatory flag on `channel` (in confirm
/// mode) and waits for the broker's confirm. A negative confirm is an error (retry); a
/// returned (unroutable) message is reported, not an error. The one publish of the crate:
/// every [`Line`] publishes with it, and so do the `dead-letters` and `demo` commands.
pub async fn publish_confirmed(
    channel: &Channel,
    message: Message<'_>,
) -> Result<Published, Error> {
    let Message {
        exchange,
        routing_key,
        body,
        message_id,
        headers,
    } = message;
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
