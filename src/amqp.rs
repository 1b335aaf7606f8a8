//! The broker: connecting (with a name, over TLS for `amqps://`), declaring the topology,
//! consuming, and publishing with confirms. A [`Session`] is one connection with a
//! consuming channel and a publishing channel in confirm mode; when anything on it fails
//! the session is marked broken and the worker builds a new one.
//!
//! May depend on: `settings`, `error`, `lapin`. Knows nothing about events or recovery.

use crate::error::Error;
use crate::publish::{self, Published};
use crate::settings::{Names, PublishSettings, SecretUrl, Settings};
use lapin::options::{
    BasicCancelOptions, BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, Connection, ConnectionProperties, Consumer, ExchangeKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The broker URL, parsed. lapin's own parse error quotes the whole URL, password
/// included, and a failed connection is logged on every retry: so the error here names the
/// URL masked and leaves lapin's text out.
pub fn uri(url: &SecretUrl) -> Result<lapin::uri::AMQPUri, Error> {
    url.expose().parse().map_err(|_| {
        Error::Startup(format!(
            "AMQP_URL {url} is not an AMQP URL (amqp://user:password@host:port/vhost, or \
             amqps:// for TLS)"
        ))
    })
}

/// Consumer tag prefix.
const CONSUMER_TAG: &str = "toolcall-recovery";

/// Whether a session is still usable; shared with the tasks working on its deliveries.
#[derive(Debug, Default)]
pub struct Health {
    broken: AtomicBool,
    notify: Notify,
}

impl Health {
    /// Marks the session broken and wakes whoever waits on it.
    pub fn mark_broken(&self) {
        self.broken.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
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
    consumer_tag: String,
    /// Shared health flag.
    pub health: Arc<Health>,
}

/// Connects and declares the topology; returns the session and the consumer.
pub async fn open(settings: &Settings) -> Result<(Session, Consumer), Error> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio)
        .with_connection_name(LongString::from(settings.connection_name.clone()));
    let connection = Connection::connect_uri(uri(&settings.publish.amqp_url)?, props).await?;
    let health = Arc::new(Health::default());
    {
        let h = health.clone();
        connection.on_error(move |e| {
            tracing::warn!(error = %e, "broker connection error");
            h.mark_broken();
        });
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
    consume
        .basic_qos(settings.prefetch.max(1), BasicQosOptions::default())
        .await?;
    let consumer_tag = format!("{CONSUMER_TAG}-{}", uuid::Uuid::new_v4());
    let consumer = consume
        .basic_consume(
            &settings.names.queue,
            &consumer_tag,
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok((
        Session {
            connection,
            consume,
            publish,
            consumer_tag,
            health,
        },
        consumer,
    ))
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
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for exchange in [
        &names.input_exchange,
        &publish.moderation_exchange,
        &publish.tool_calls_exchange,
    ] {
        ch.exchange_declare(
            exchange,
            ExchangeKind::Topic,
            durable,
            FieldTable::default(),
        )
        .await?;
    }
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

impl Session {
    /// [`publish::publish_confirmed`] on this session's publishing channel; a channel or
    /// connection error marks the session broken.
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        message_id: Option<&str>,
        headers: FieldTable,
    ) -> Result<Published, Error> {
        let result = publish::publish_confirmed(
            &self.publish,
            exchange,
            routing_key,
            body,
            message_id,
            headers,
        )
        .await;
        if matches!(&result, Err(Error::Broker(_))) {
            self.health.mark_broken();
        }
        result
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
        if let Err(e) = self
            .consume
            .basic_cancel(&self.consumer_tag, BasicCancelOptions::default())
            .await
        {
            tracing::debug!(error = %e, "cancelling the consumer failed");
        }
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
