//! The publisher of the passes that did not come from a delivery (the backfill, the admin
//! API, `revert`) and of the outbox relay: it sends outbox rows (the bodies `outbound`
//! built, under their deterministic message ids), each confirmed by the broker, and marks
//! them sent.
//!
//! The publisher owns one connection with one confirm-mode channel, opened on first use
//! and reopened after a failure. It only declares the two exchanges it publishes to (the
//! same idempotent declares the worker makes); it never touches the worker's queues. Every
//! confirmed publish is counted ([`super::count`]).
//!
//! May depend on: `outbox` (the rows), `metrics`, `settings`, `amqp` (the URL,
//! parsed without quoting its password), `error`, `lapin`, `sqlx`.

use super::{count, publish_confirmed, Exchanges, Published};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::outbox::{self, Marker, Outgoing, Queued, Target};
use crate::settings::{PublishSettings, SecretUrl};
use lapin::options::{ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, LongString};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use sqlx::PgPool;
use std::sync::Arc;
use tokio::sync::Mutex;

/// Where and as whom to publish.
#[derive(Debug, Clone)]
pub struct PublishTarget {
    /// RabbitMQ URL.
    pub amqp_url: SecretUrl,
    /// `connection_name` of the connection.
    pub connection_name: String,
    /// The two output exchanges.
    pub exchanges: Exchanges,
}

impl PublishTarget {
    /// The target of these settings, on a connection named `connection_name`.
    pub fn from_settings(settings: &PublishSettings, connection_name: &str) -> Self {
        PublishTarget {
            amqp_url: settings.amqp_url.clone(),
            connection_name: connection_name.to_string(),
            exchanges: Exchanges::from_settings(settings),
        }
    }
}

/// What delivering a pass's outbox rows did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishedCounts {
    /// Moderation messages confirmed (0 or 1).
    pub moderation: u64,
    /// Forwarded calls confirmed.
    pub tool_calls: u64,
    /// Confirmed but returned (no queue bound): pending in the outbox.
    pub unroutable: usize,
    /// Not confirmed (the broker failed): pending in the outbox.
    pub pending: usize,
}

impl PublishedCounts {
    fn add(&mut self, target: Target) {
        match target {
            Target::Moderation => self.moderation += 1,
            Target::ToolCalls => self.tool_calls += 1,
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

    /// Sends the outbox rows a pass wrote (in order, each confirmed by the broker) and
    /// marks them sent. A row the broker returned as unroutable stays pending (counted,
    /// noted, and sent again by the relay once a queue is bound). A broker failure stops
    /// the sending: what was not confirmed stays pending, and the error says so.
    pub async fn deliver(&self, pool: &PgPool, rows: &[Queued]) -> Result<PublishedCounts, Error> {
        let mut counts = PublishedCounts::default();
        let mut sent = Vec::with_capacity(rows.len());
        let mut result = Ok(());
        for row in rows {
            match self.send(&row.outgoing).await {
                Ok(Published::Routed) => {
                    sent.push(row.id);
                    counts.add(row.outgoing.target);
                }
                Ok(Published::Unroutable) => {
                    counts.unroutable += 1;
                    outbox::note_failure(pool, row.id, "unroutable: no queue is bound").await?;
                }
                Err(e) => {
                    counts.pending = rows.len() - sent.len() - counts.unroutable;
                    result = Err(e);
                    break;
                }
            }
        }
        match &self.marker {
            Some(marker) => sent.iter().for_each(|&id| marker.sent(id)),
            None => outbox::mark_sent(pool, &sent).await?,
        }
        result.map(|()| counts)
    }

    /// One outbox row, persistent, mandatory and confirmed, under its message id; counted.
    pub async fn send(&self, out: &Outgoing) -> Result<Published, Error> {
        let (exchange, routing_key) = self.target.exchanges.route(out.target);
        let channel = self.channel().await?;
        let published = publish_confirmed(
            &channel,
            exchange,
            routing_key,
            out.body.as_bytes(),
            Some(&out.key),
            FieldTable::default(),
        )
        .await;
        match published {
            Ok(p) => {
                count(&self.metrics, exchange, p);
                Ok(p)
            }
            Err(e) => {
                if matches!(e, Error::Broker(_)) {
                    // Drop the link so the next publish reconnects.
                    self.link.lock().await.take();
                }
                Err(e)
            }
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
        let fresh = self.open().await?;
        let channel = fresh.channel.clone();
        *link = Some(fresh);
        Ok(channel)
    }

    async fn open(&self) -> Result<Link, Error> {
        let props = ConnectionProperties::default()
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio)
            .with_connection_name(LongString::from(self.target.connection_name.clone()));
        let connection =
            Connection::connect_uri(crate::amqp::uri(&self.target.amqp_url)?, props).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        for exchange in [
            &self.target.exchanges.moderation,
            &self.target.exchanges.tool_calls,
        ] {
            channel
                .exchange_declare(
                    exchange,
                    ExchangeKind::Topic,
                    durable,
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(Link {
            connection,
            channel,
        })
    }
}
