//! The publisher of the passes that did not come from a delivery (the backfill, the admin
//! API, `revert`) and of the outbox relay: a [`Line`] of its own, over which it sends outbox
//! rows (the bodies `outbound` built, under their deterministic message ids) the one way
//! every caller sends them ([`super::Sender`]).
//!
//! The publisher owns one connection with one confirm-mode channel, opened on first use
//! and reopened after a failure. It only declares the two exchanges it publishes to (the
//! same idempotent declares the worker makes); it never touches the worker's queues.
//!
//! May depend on: the parent `publish`, `outbox` (the rows, the marker), `metrics`,
//! `settings`, `error`, `lapin`, `sqlx`, `tokio`.

use super::{
    confirm_channel, declare_topic_exchanges, publish_confirmed, BrokerUrl, Exchanges, Line,
    Message, Published, PublishedCounts, Sender,
};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::outbox::{Marker, Outgoing, Queued};
use crate::settings::PublishSettings;
use lapin::{Channel, Connection};
use sqlx::PgPool;
use std::sync::Arc;
use tokio::sync::Mutex;

/// Where and as whom to publish.
#[derive(Debug, Clone)]
pub struct PublishTarget {
    /// RabbitMQ URL, heartbeat and step timeout.
    pub broker: BrokerUrl,
    /// `connection_name` of the connection.
    pub connection_name: String,
    /// The two output exchanges.
    pub exchanges: Exchanges,
}

impl PublishTarget {
    /// The target of these settings, on a connection named `connection_name`.
    pub fn from_settings(settings: &PublishSettings, connection_name: &str) -> Self {
        PublishTarget {
            broker: settings.broker(),
            connection_name: connection_name.to_string(),
            exchanges: Exchanges::from_settings(settings),
        }
    }
}

/// A confirm-mode publisher, shared by reference (its methods take `&self`).
pub struct Publisher {
    target: PublishTarget,
    metrics: Arc<Metrics>,
    link: Mutex<Option<Link>>,
    /// Where "sent" marks go; `None`: one statement on the caller's pool per delivery.
    marker: Option<Marker>,
}

struct Link {
    connection: Connection,
    channel: Channel,
}

impl Publisher {
    /// A publisher for `target`, counting what it publishes in `metrics`; connects on
    /// first use.
    pub fn new(target: PublishTarget, metrics: Arc<Metrics>) -> Self {
        Publisher {
            target,
            metrics,
            link: Mutex::new(None),
            marker: None,
        }
    }

    /// Marks what it sent through `marker` (batched, on a connection of its own, off the
    /// caller's path) instead of one statement per delivery on the caller's pool: for a
    /// caller that delivers many passes at once (the backfill).
    pub fn marking_with(mut self, marker: Marker) -> Self {
        self.marker = Some(marker);
        self
    }

    /// Connects now (to fail before any work when the broker is unreachable).
    pub async fn connect(&self) -> Result<(), Error> {
        self.channel().await.map(|_| ())
    }

    /// Sends the outbox rows a pass wrote and marks them sent: [`Sender::deliver`].
    pub async fn deliver(&self, pool: &PgPool, rows: &[Queued]) -> Result<PublishedCounts, Error> {
        self.sender()
            .deliver(pool, rows, self.marker.as_ref())
            .await
    }

    /// One outbox row, confirmed and counted: [`Sender::send`].
    pub async fn send(&self, out: &Outgoing) -> Result<Published, Error> {
        self.sender().send(out).await
    }

    fn sender(&self) -> Sender<'_, Self> {
        Sender {
            line: self,
            exchanges: &self.target.exchanges,
            metrics: &self.metrics,
        }
    }

    /// Closes the connection, if open.
    pub async fn close(&self) {
        if let Some(link) = self.link.lock().await.take() {
            let _ = link.channel.close(200, "closing").await;
            let _ = link.connection.close(200, "closing").await;
        }
    }

    async fn channel(&self) -> Result<Channel, Error> {
        let mut link = self.link.lock().await;
        if let Some(l) = link.as_ref() {
            if l.connection.status().connected() && l.channel.status().connected() {
                return Ok(l.channel.clone());
            }
        }
        let (connection, channel) =
            confirm_channel(&self.target.broker, &self.target.connection_name).await?;
        let exchanges = &self.target.exchanges;
        declare_topic_exchanges(&channel, [&exchanges.moderation, &exchanges.tool_calls]).await?;
        *link = Some(Link {
            connection,
            channel: channel.clone(),
        });
        Ok(channel)
    }
}

impl Line for Publisher {
    async fn publish(&self, message: Message<'_>) -> Result<Published, Error> {
        let channel = self.channel().await?;
        let published = publish_confirmed(&channel, message).await;
        if matches!(published, Err(Error::Broker(_))) {
            // Drop the link so the next publish reconnects.
            self.link.lock().await.take();
        }
        published
    }
}
