//! The broker: connecting (with a name, over TLS for `amqps://`), declaring the topology,
//! consuming, and publishing with confirms. A [`Session`] is one connection with a
//! consuming channel and a publishing channel in confirm mode; when anything on it fails
//! the session is marked broken and the worker builds a new one.
//!
//! The consumer's window (prefetch) changes at run time by consuming anew
//! ([`Session::stop_consuming`], [`Session::consume`]): RabbitMQ applies a `basic.qos` to the consumers started after it only,
//! not to the one running (measured on 3.10 with a quorum queue). The deliveries of the
//! cancelled consumer stay ours to ack.
//!
//! The session is one of the two lines of `publish` ([`publish::Line`]): its publishing
//! channel shares the consumer's connection, so that one broken session is one fault, and a
//! publish that fails in the broker breaks the session. Connecting and publishing are
//! `publish`'s.
//!
//! Opening a session is a row of steps (connect, channels, declarations, qos, consume),
//! each bounded by `--broker-step-timeout-secs`: a step that times out cuts the connection
//! and fails the attempt with [`Error::Timeout`] naming the step, and the worker tries again
//! with backoff, so a node that does not answer (frozen, half-open) holds no step longer
//! than that. The topology is declared by the first session; a reopen only checks it
//! (passive declarations, [`Topology`]): a full declaration takes write locks on every
//! node of the cluster, which a frozen node holds until the broker gives it up.
//!
//! May depend on: `publish` (connecting, the confirmed publish), `settings`, `error`,
//! `lapin`, `tokio`. Knows nothing about events or recovery.

use crate::error::Error;
use crate::publish::{self, bounded, Line, Message, Published, Socket};
use crate::settings::{Names, PublishSettings, Settings};
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Connection, Consumer, ExchangeKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Consumer tag prefix.
const CONSUMER_TAG: &str = "toolcall-recovery";

/// Whether a session is still usable; shared with the tasks working on its deliveries.
#[derive(Debug, Default)]
pub struct Health {
    broken: AtomicBool,
    /// The loss of the session was said, at WARN ([`Health::lost`]).
    said: AtomicBool,
    notify: Notify,
}

impl Health {
    /// Marks the session broken and wakes whoever waits on it.
    pub fn mark_broken(&self) {
        self.broken.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// The session is lost (the connection failed, the broker closed the consumer): marks
    /// it broken and says so, once per session at WARN, whichever part notices first (the
    /// connection's error and the end of its consumer are one fault, one line); what the
    /// other parts notice after it is a DEBUG line.
    pub fn lost(&self, what: &str, error: Option<&dyn std::fmt::Display>) {
        let error = error.map(|e| e.to_string());
        if self.said.swap(true, Ordering::SeqCst) {
            tracing::debug!(error, "{what} (the broker session was already lost)");
        } else {
            tracing::warn!(error, "{what}; the broker session is lost, reconnecting");
        }
        self.mark_broken();
    }

    /// Whether the session's loss was said ([`Health::lost`]).
    pub fn loss_said(&self) -> bool {
        self.said.load(Ordering::SeqCst)
    }
    /// Whether the session is broken.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }
    /// Waits until the session is marked broken.
    pub async fn broken(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_broken() {
                return;
            }
            notified.await;
        }
    }
}

/// Whether the topology was declared by an earlier session of this process: then a reopen
/// checks it with passive declarations (no locks, no write to the cluster's metadata)
/// instead of declaring it again. A check that finds something missing (deleted while the
/// worker ran) makes the next attempt declare it all again.
#[derive(Debug, Default)]
pub struct Topology {
    declared: AtomicBool,
}

/// What each step of opening a session says when it times out ([`Error::Timeout`]).
pub mod step {
    /// Opening a channel.
    pub const CHANNEL: &str = "opening the broker session: channel";
    /// Putting the publishing channel in confirm mode.
    pub const CONFIRM_SELECT: &str = "opening the broker session: confirm.select";
    /// Declaring the topology (the first session).
    pub const DECLARE: &str = "opening the broker session: declare";
    /// Checking the topology with passive declarations (a reopen).
    pub const CHECK: &str = "opening the broker session: declare (passive)";
    /// Setting the consumer's window.
    pub const QOS: &str = "opening the broker session: qos";
    /// Starting the consumer.
    pub const CONSUME: &str = "opening the broker session: consume";
    /// Connecting: TCP, TLS and the AMQP handshake.
    pub const CONNECT: &str = crate::publish::STEP_CONNECT;
}

/// One broker connection with its two channels.
pub struct Session {
    connection: Connection,
    socket: Socket,
    step_timeout: Duration,
    consume: Channel,
    publish: Channel,
    queue: String,
    consumer_tag: Mutex<String>,
    /// Shared health flag.
    pub health: Arc<Health>,
}

/// Connects and declares the topology (or, when `topology` says an earlier session did,
/// checks it); returns the session and the consumer, whose window is `prefetch`
/// deliveries. Each step is bounded by the step timeout; on any failure the connection is
/// cut, so nothing of a failed attempt lingers on a node that does not answer.
pub async fn open(
    settings: &Settings,
    prefetch: u16,
    topology: &Topology,
) -> Result<(Session, Consumer), Error> {
    let broker = settings.publish.broker();
    let (connection, socket) = publish::connect(&broker, &settings.connection_name).await?;
    match session(
        settings,
        prefetch,
        topology,
        connection,
        socket.clone(),
        broker.step_timeout,
    )
    .await
    {
        Ok(opened) => Ok(opened),
        Err(e) => {
            socket.cut();
            Err(e)
        }
    }
}

/// The steps of [`open`] after connecting.
async fn session(
    settings: &Settings,
    prefetch: u16,
    topology: &Topology,
    connection: Connection,
    socket: Socket,
    step_timeout: Duration,
) -> Result<(Session, Consumer), Error> {
    let health = Arc::new(Health::default());
    {
        let h = health.clone();
        let ours = socket.clone();
        connection.on_error(move |e| {
            if ours.was_cut() {
                // We gave the connection up (a step timed out, or the session closed).
                tracing::debug!(error = %e, "broker connection cut");
                h.mark_broken();
            } else {
                h.lost("broker connection error", Some(&e));
            }
        });
    }
    let consume = bounded(step_timeout, step::CHANNEL, connection.create_channel()).await?;
    let publish = bounded(step_timeout, step::CHANNEL, connection.create_channel()).await?;
    bounded(
        step_timeout,
        step::CONFIRM_SELECT,
        publish.confirm_select(ConfirmSelectOptions::default()),
    )
    .await?;
    if topology.declared.load(Ordering::SeqCst) {
        let checked = bounded(
            step_timeout,
            step::CHECK,
            check_topology(&consume, &settings.names, &settings.publish),
        )
        .await;
        if let Err(Error::Broker(lapin::Error::ProtocolError(e))) = &checked {
            if e.get_id() == 404 {
                tracing::warn!(error = %e, "the broker topology is gone; declaring it again");
                topology.declared.store(false, Ordering::SeqCst);
            }
        }
        checked?;
    } else {
        bounded(
            step_timeout,
            step::DECLARE,
            declare_topology(
                &consume,
                &settings.names,
                &settings.publish,
                settings.delivery_limit,
            ),
        )
        .await?;
        topology.declared.store(true, Ordering::SeqCst);
    }
    let (consumer_tag, consumer) =
        start_consumer(&consume, &settings.names.queue, prefetch, step_timeout).await?;
    Ok((
        Session {
            connection,
            socket,
            step_timeout,
            consume,
            publish,
            queue: settings.names.queue.clone(),
            consumer_tag: Mutex::new(consumer_tag),
            health,
        },
        consumer,
    ))
}

/// A consumer of `queue` with a window of `prefetch` deliveries, under a fresh tag; qos
/// and consume each bounded by `step_timeout`.
async fn start_consumer(
    ch: &Channel,
    queue: &str,
    prefetch: u16,
    step_timeout: Duration,
) -> Result<(String, Consumer), Error> {
    bounded(
        step_timeout,
        step::QOS,
        ch.basic_qos(prefetch.max(1), BasicQosOptions::default()),
    )
    .await?;
    let tag = format!("{CONSUMER_TAG}-{}", uuid::Uuid::new_v4());
    let consumer = bounded(
        step_timeout,
        step::CONSUME,
        ch.basic_consume(
            queue,
            &tag,
            BasicConsumeOptions::default(),
            FieldTable::default(),
        ),
    )
    .await?;
    Ok((tag, consumer))
}

/// Checks that what [`declare_topology`] declared is still there, with passive
/// declarations: the exchanges and the two queues (the bindings are not checked: AMQP has
/// no passive bind). Fails with NOT_FOUND (404) when one is missing.
pub async fn check_topology(
    ch: &Channel,
    names: &Names,
    publish: &PublishSettings,
) -> Result<(), Error> {
    let passive = ExchangeDeclareOptions {
        passive: true,
        ..Default::default()
    };
    for (exchange, kind) in [
        (&names.input_exchange, ExchangeKind::Topic),
        (&publish.moderation_exchange, ExchangeKind::Topic),
        (&publish.tool_calls_exchange, ExchangeKind::Topic),
        (&names.dead_letter_exchange, ExchangeKind::Direct),
    ] {
        ch.exchange_declare(exchange, kind, passive, FieldTable::default())
            .await?;
    }
    let passive = QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    for queue in [&names.dead_letter_queue, &names.queue] {
        ch.queue_declare(queue, passive, FieldTable::default())
            .await?;
    }
    Ok(())
}

/// Declares exchanges, the quorum queue with its dead-lettering, and the dead-letter
/// queue. Idempotent; fails (PRECONDITION_FAILED) when an existing queue was declared with
/// other arguments.
pub async fn declare_topology(
    ch: &Channel,
    names: &Names,
    publish: &PublishSettings,
    delivery_limit: u32,
) -> Result<(), Error> {
    publish::declare_topic_exchanges(
        ch,
        [
            &names.input_exchange,
            &publish.moderation_exchange,
            &publish.tool_calls_exchange,
        ],
    )
    .await?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        &names.dead_letter_exchange,
        ExchangeKind::Direct,
        durable,
        FieldTable::default(),
    )
    .await?;
    let queue_opts = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let mut dead_args = FieldTable::default();
    dead_args.insert("x-queue-type".into(), string_value("quorum"));
    ch.queue_declare(&names.dead_letter_queue, queue_opts, dead_args)
        .await?;
    ch.queue_bind(
        &names.dead_letter_queue,
        &names.dead_letter_exchange,
        &names.dead_letter_queue,
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), string_value("quorum"));
    args.insert(
        "x-dead-letter-exchange".into(),
        string_value(&names.dead_letter_exchange),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        string_value(&names.dead_letter_queue),
    );
    args.insert(
        "x-delivery-limit".into(),
        AMQPValue::LongLongInt(i64::from(delivery_limit)),
    );
    ch.queue_declare(&names.queue, queue_opts, args).await?;
    ch.queue_bind(
        &names.queue,
        &names.input_exchange,
        &names.input_routing_key,
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

/// An AMQP long-string value.
pub fn string_value(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.to_string()))
}

impl Line for Session {
    /// [`publish::publish_confirmed`] on this session's publishing channel; a channel or
    /// connection error marks the session broken.
    async fn publish(&self, message: Message<'_>) -> Result<Published, Error> {
        let result = publish::publish_confirmed(&self.publish, message).await;
        if matches!(&result, Err(Error::Broker(_))) {
            self.health.mark_broken();
        }
        result
    }
}

impl Drop for Session {
    /// Cuts the socket: whatever way a session ends (closed, or its close given up), its
    /// connection does not linger on a node that stopped answering.
    fn drop(&mut self) {
        self.socket.cut();
    }
}

impl Session {
    /// Acks the delivery `tag` of the consuming channel; with `multiple`, every delivery
    /// up to it. An error marks the session broken.
    pub async fn ack(&self, tag: u64, multiple: bool) -> Result<(), Error> {
        let result = self
            .consume
            .basic_ack(tag, BasicAckOptions { multiple })
            .await;
        result.map_err(|e| self.broken(e.into()))
    }

    /// Whether both channels are open.
    pub fn is_open(&self) -> bool {
        !self.health.is_broken()
            && self.connection.status().connected()
            && self.consume.status().connected()
            && self.publish.status().connected()
    }

    /// Stops the broker from sending more deliveries; those already sent stay ours to ack.
    pub async fn cancel_consumer(&self) {
        let tag = self.tag();
        if let Err(e) = self
            .consume
            .basic_cancel(&tag, BasicCancelOptions::default())
            .await
        {
            tracing::debug!(error = %e, "cancelling the consumer failed");
        }
    }

    /// Stops the running consumer (the window is changing, or the worker pauses until it
    /// holds less): once this returns, its stream holds the deliveries it still had, then
    /// ends; they stay ours to ack. An error marks the session broken.
    pub async fn stop_consuming(&self) -> Result<(), Error> {
        let tag = self.tag();
        let result = self
            .consume
            .basic_cancel(&tag, BasicCancelOptions::default())
            .await;
        result.map_err(|e| self.broken(e.into()))
    }

    /// Starts a consumer with a window of `prefetch` deliveries (the running one, if any,
    /// stopped first: [`Session::stop_consuming`]). An error marks the session broken.
    pub async fn consume(&self, prefetch: u16) -> Result<Consumer, Error> {
        match start_consumer(&self.consume, &self.queue, prefetch, self.step_timeout).await {
            Ok((tag, consumer)) => {
                if let Ok(mut t) = self.consumer_tag.lock() {
                    *t = tag;
                }
                Ok(consumer)
            }
            Err(e) => Err(self.broken(e)),
        }
    }

    fn broken(&self, e: Error) -> Error {
        self.health.mark_broken();
        e
    }

    fn tag(&self) -> String {
        self.consumer_tag
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    /// Closes the channels and the connection; unacked deliveries go back to the queue.
    /// A close the broker does not answer within the step timeout (a frozen node) cuts the
    /// connection instead: the broker returns the deliveries when it notices.
    pub async fn close(&self) {
        if self.connection.status().connected() {
            let closed = async {
                let _ = self.publish.close(200, "closing").await;
                let _ = self.consume.close(200, "closing").await;
                let _ = self.connection.close(200, "closing").await;
            };
            if tokio::time::timeout(self.step_timeout, closed)
                .await
                .is_err()
            {
                tracing::debug!("the broker did not answer the close; cutting the connection");
                self.socket.cut();
            }
        } else {
            self.socket.cut();
        }
    }
}
