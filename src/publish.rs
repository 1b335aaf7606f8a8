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
use crate::settings::{
    PublishSettings, SecretUrl, DEFAULT_HEARTBEAT_SECS, DEFAULT_STEP_TIMEOUT_SECS,
};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::publisher_confirm::Confirmation;
use lapin::tcp::{HandshakeResult, OwnedTLSConfig, TcpStream};
use lapin::types::{FieldTable, LongString, ShortString};
use lapin::uri::{AMQPScheme, AMQPUri};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::net::ToSocketAddrs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to reach the broker: the URL, the heartbeat asked for when the URL names none, and
/// how long each step of opening a connection may take ([`PublishSettings::broker`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerUrl {
    /// The URL (`heartbeat=` in its query wins over `heartbeat_secs`).
    pub url: SecretUrl,
    /// The heartbeat, in seconds, when the URL names none; 0 leaves it to the broker.
    pub heartbeat_secs: u16,
    /// How long one step (TCP connect, AMQP handshake, a channel, a declaration) may take.
    pub step_timeout: Duration,
}

impl BrokerUrl {
    /// `url` with the default heartbeat and step timeout of the settings.
    pub fn with_defaults(url: SecretUrl) -> Self {
        BrokerUrl {
            url,
            heartbeat_secs: DEFAULT_HEARTBEAT_SECS,
            step_timeout: Duration::from_secs(DEFAULT_STEP_TIMEOUT_SECS),
        }
    }

    /// The URL parsed, with the default heartbeat where it names none. lapin's own parse
    /// error quotes the whole URL, password included, and a failed connection is logged on
    /// every retry: so the error here names the URL masked and leaves lapin's text out.
    pub fn uri(&self) -> Result<AMQPUri, Error> {
        let mut uri: AMQPUri = self.url.expose().parse().map_err(|_| {
            Error::Startup(format!(
                "AMQP_URL {} is not an AMQP URL (amqp://user:password@host:port/vhost, or \
                 amqps:// for TLS)",
                self.url
            ))
        })?;
        if uri.query.heartbeat.is_none() {
            uri.query.heartbeat = Some(self.heartbeat_secs);
        }
        Ok(uri)
    }
}

impl PublishSettings {
    /// How to reach the broker these settings name.
    pub fn broker(&self) -> BrokerUrl {
        BrokerUrl {
            url: self.amqp_url.clone(),
            heartbeat_secs: self.amqp_heartbeat_secs,
            step_timeout: Duration::from_secs(self.broker_step_timeout_secs.max(1)),
        }
    }
}

/// The socket under a connection, kept to cut it: a connection given up on a node that
/// does not answer (frozen, half-open) would otherwise keep its I/O thread waiting, with
/// lapin, for a close or a handshake that never comes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Socket(Arc<SocketInner>);

#[derive(Debug, Default)]
pub(crate) struct SocketInner {
    stream: Mutex<Option<std::net::TcpStream>>,
    cut: AtomicBool,
}

impl Socket {
    /// Shuts the socket down both ways: lapin's I/O loop sees the end and stops.
    pub(crate) fn cut(&self) {
        self.0.cut.store(true, Ordering::SeqCst);
        if let Ok(socket) = self.0.stream.lock() {
            if let Some(s) = socket.as_ref() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Whether [`Socket::cut`] was called: the connection error that follows is ours.
    pub(crate) fn was_cut(&self) -> bool {
        self.0.cut.load(Ordering::SeqCst)
    }

    fn keep(&self, stream: &std::net::TcpStream) {
        if let (Ok(clone), Ok(mut slot)) = (stream.try_clone(), self.0.stream.lock()) {
            *slot = Some(clone);
        }
    }
}

/// The TCP connection (and TLS for `amqps://`) lapin speaks AMQP over, each address of the
/// host tried for at most `timeout` (or the URL's `connection_timeout`), its socket kept
/// in `socket`. What lapin's own connector does, but for the bound and the socket.
#[allow(clippy::result_large_err)] // lapin's connector asks for this very type
fn tcp(uri: &AMQPUri, timeout: Duration, socket: &Socket) -> HandshakeResult {
    let timeout = uri
        .query
        .connection_timeout
        .map_or(timeout, Duration::from_millis);
    let addrs = (uri.authority.host.as_str(), uri.authority.port).to_socket_addrs()?;
    let mut last = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "the broker's host resolves to no address",
    );
    for addr in addrs {
        match std::net::TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                socket.keep(&stream);
                let stream = TcpStream::try_from(stream)?;
                let stream = match uri.scheme {
                    AMQPScheme::AMQP => stream,
                    AMQPScheme::AMQPS => {
                        stream.into_tls(&uri.authority.host, OwnedTLSConfig::default().as_ref())?
                    }
                };
                stream.set_nonblocking(true)?;
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(last.into())
}

/// A broker connection named `name` (as `rabbitmqctl list_connections` shows it), over TLS
/// for `amqps://`, on the process's tokio runtime, with its socket. TCP, TLS and the AMQP
/// handshake together take at most the step timeout: past it the socket is cut and the
/// error says `connect` timed out.
pub(crate) async fn connect(broker: &BrokerUrl, name: &str) -> Result<(Connection, Socket), Error> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio)
        .with_connection_name(LongString::from(name.to_string()));
    let uri = broker.uri()?;
    let socket = Socket::default();
    let kept = socket.clone();
    let timeout = broker.step_timeout;
    #[allow(clippy::result_large_err)] // lapin's connector asks for this very type
    let connector = Box::new(move |uri: &AMQPUri| tcp(uri, timeout, &kept));
    match tokio::time::timeout(timeout, Connection::connector(uri, connector, props)).await {
        Ok(connection) => Ok((connection?, socket)),
        Err(_) => {
            socket.cut();
            Err(Error::Timeout(STEP_CONNECT))
        }
    }
}

/// What a timed-out connect says: TCP, TLS and the AMQP handshake are one step.
pub const STEP_CONNECT: &str = "opening the broker session: connect (TCP, TLS, AMQP handshake)";

/// A connection named `name` with one channel in confirm mode: a publisher's own line.
/// Each step is bounded by the step timeout; one that times out gives the connection up.
pub(crate) async fn confirm_channel(
    broker: &BrokerUrl,
    name: &str,
) -> Result<(Connection, Channel), Error> {
    let (connection, socket) = connect(broker, name).await?;
    let step = broker.step_timeout;
    let opened = async {
        let channel = bounded(
            step,
            "opening a publishing channel",
            connection.create_channel(),
        )
        .await?;
        bounded(
            step,
            "opening a publishing channel: confirm.select",
            channel.confirm_select(ConfirmSelectOptions::default()),
        )
        .await?;
        Ok::<_, Error>(channel)
    };
    match opened.await {
        Ok(channel) => Ok((connection, channel)),
        Err(e) => {
            socket.cut();
            Err(e)
        }
    }
}

/// `step` bounded by `timeout`: past it, [`Error::Timeout`] naming the step.
pub(crate) async fn bounded<T, E: Into<Error>>(
    timeout: Duration,
    step: &'static str,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Error> {
    match tokio::time::timeout(timeout, f).await {
        Ok(r) => r.map_err(Into::into),
        Err(_) => Err(Error::Timeout(step)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        p: PublishSettings,
    }

    fn heartbeat(args: &[&str]) -> Option<u16> {
        let settings = P::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map(|p| p.p)
            .ok()?;
        settings.broker().uri().ok()?.query.heartbeat
    }

    #[test]
    fn the_heartbeat_defaults_to_seconds_and_the_urls_own_wins() {
        // No heartbeat in the URL: the setting's default, well under the broker's 60 s.
        assert_eq!(
            heartbeat(&["--amqp-url", "amqp://u:p@h:5672/%2f"]),
            Some(DEFAULT_HEARTBEAT_SECS)
        );
        assert!((5..=20).contains(&DEFAULT_HEARTBEAT_SECS));
        // The flag changes it.
        assert_eq!(
            heartbeat(&[
                "--amqp-url",
                "amqp://u:p@h:5672/%2f",
                "--amqp-heartbeat-secs",
                "12"
            ]),
            Some(12)
        );
        // An explicit heartbeat in the URL wins over the flag and the default, 0 included.
        for (url, expected) in [
            ("amqp://u:p@h:5672/%2f?heartbeat=30", 30),
            ("amqp://u:p@h:5672/%2f?frame_max=8192&heartbeat=0", 0),
        ] {
            assert_eq!(
                heartbeat(&["--amqp-url", url, "--amqp-heartbeat-secs", "7"]),
                Some(expected),
                "{url}"
            );
        }
    }
}
