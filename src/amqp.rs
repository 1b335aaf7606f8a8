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
//! May depend on: `publish` (connecting, the confirmed publish), `settings`, `error`,
//! `lapin`, `tokio`. Knows nothing about events or recovery.

use crate::error::Error;
use crate::publish::{self, Line, Message, Published};
use crate::settings::{Names, PublishSettings, Settings};
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Connection, Consumer, ExchangeKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

/// One broker connection with its two channels.
pub struct Session {
    connection: Connection,
    consume: Channel,
    publish: Channel,
    queue: String,
    consumer_tag: Mutex<String>,
    /// Shared health flag.
    pub health: Arc<Health>,
}

/// Connects and declares the topology; returns the session and the consumer, whose window
/// is `prefetch` deliveries.
pub async fn open(settings: &Settings, prefetch: u16) -> Result<(Session, Consumer), Error> {
    let connection =
        publish::connect(&settings.publish.amqp_url, &settings.connection_name).await?;
    let health = Arc::new(Health::default());
    {
        let h = health.clone();
        connection.on_error(move |e| h.lost("broker connection error", Some(&e)));
    }
    let consume = connection.create_channel().await?;
    let publish = connection.create_channel().await?;
    publish
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    declare_topology(
        &consume,
        &settings.names,
        &settings.publish,
        settings.delivery_limit,
    )
    .await?;
    let (consumer_tag, consumer) =
        start_consumer(&consume, &settings.names.queue, prefetch).await?;
    Ok((
        Session {
            connection,
            consume,
            publish,
            queue: settings.names.queue.clone(),
            consumer_tag: Mutex::new(consumer_tag),
            health,
        },
        consumer,
    ))
}

/// A consumer of `queue` with a window of `prefetch` deliveries, under a fresh tag.
async fn start_consumer(
    ch: &Channel,
    queue: &str,
    prefetch: u16,
) -> Result<(String, Consumer), Error> {
    ch.basic_qos(prefetch.max(1), BasicQosOptions::default())
        .await?;
    let tag = format!("{CONSUMER_TAG}-{}", uuid::Uuid::new_v4());
    let consumer = ch
        .basic_consume(
            queue,
            &tag,
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok((tag, consumer))
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
        match start_consumer(&self.consume, &self.queue, prefetch).await {
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
    pub async fn close(&self) {
        if self.connection.status().connected() {
            let _ = self.publish.close(200, "closing").await;
            let _ = self.consume.close(200, "closing").await;
            let _ = self.connection.close(200, "closing").await;
        }
    }
}
