//! The publisher of the passes that did not come from a delivery (the backfill, the admin
//! API, `revert`): the cleaned message for moderation and the forwarded calls for the app,
//! each confirmed by the broker, with the bodies the worker publishes (`outbound`); and a
//! revert's restored message for moderation.
//!
//! There is no source event, so a stand-in one is built from the message row; its id is
//! derived from the ledger row (`recovery:{id}`, `revert:{id}`), which makes the
//! moderation message id deterministic too: publishing the same recovery twice publishes
//! the same ids, and consumers drop the duplicate.
//!
//! The publisher owns one connection with one confirm-mode channel, opened on first use
//! and reopened after a failure. It only declares the two exchanges it publishes to (the
//! same idempotent declares the worker makes); it never touches the worker's queues. Every
//! confirmed publish is counted ([`super::count`]).
//!
//! May depend on: `outbound`, `recover` (the reports), `metrics`, `settings`, `error`,
//! `lapin`.

use super::{count, publish_confirmed};
use crate::error::Error;
use crate::event::FinalizedEvent;
use crate::metrics::Metrics;
use crate::outbound::{self, MODERATION_ROUTING_KEY, TOOL_CALLS_ROUTING_KEY};
use crate::recover::revert::{RevertOutcome, RevertReport};
use crate::recover::{self, Mode, Outcome, Report};
use crate::settings::{PublishSettings, SecretUrl};
use lapin::options::{ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, LongString};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::Mutex;

/// Where and as whom to publish.
#[derive(Debug, Clone)]
pub struct PublishTarget {
    /// RabbitMQ URL.
    pub amqp_url: SecretUrl,
    /// `connection_name` of the connection.
    pub connection_name: String,
    /// Topic exchange of moderation messages (routing key `message.ready`).
    pub moderation_exchange: String,
    /// Topic exchange of forwarded calls (routing key `tool_call.recovered`).
    pub tool_calls_exchange: String,
}

impl PublishTarget {
    /// The target of a one-off command's settings, on a connection named `connection_name`.
    pub fn from_settings(settings: &PublishSettings, connection_name: &str) -> Self {
        PublishTarget {
            amqp_url: settings.amqp_url.clone(),
            connection_name: connection_name.to_string(),
            moderation_exchange: settings.moderation_exchange.clone(),
            tool_calls_exchange: settings.tool_calls_exchange.clone(),
        }
    }
}

/// What publishing one report did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishedCounts {
    /// Moderation messages confirmed (0 or 1).
    pub moderation: u64,
    /// Forwarded calls confirmed.
    pub tool_calls: u64,
}

/// A confirm-mode publisher, shared by reference (its methods take `&self`).
pub struct Publisher {
    target: PublishTarget,
    metrics: Arc<Metrics>,
    link: Mutex<Option<Link>>,
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
        }
    }

    /// Connects now (to fail before any work when the broker is unreachable).
    pub async fn connect(&self) -> Result<(), Error> {
        self.channel().await.map(|_| ())
    }

    /// Publishes what a pass that changed a message owes the outside: the forwarded calls,
    /// then the cleaned message for moderation (when its content is not blank). A pass that
    /// changed nothing publishes nothing.
    pub async fn publish_report(
        &self,
        report: &Report,
        origin: &str,
    ) -> Result<PublishedCounts, Error> {
        let mut counts = PublishedCounts::default();
        let Some(recovery_id) = report.recovery_id else {
            return Ok(counts);
        };
        if !report.content_changed() {
            return Ok(counts);
        }
        let event = outbound::stand_in_event(report, recovery_id, origin);
        for call in &report.forward {
            let body = outbound::tool_call_body(report, call, event.event_id);
            let id = call.event_id.to_string();
            self.publish(
                &self.target.tool_calls_exchange,
                TOOL_CALLS_ROUTING_KEY,
                &body,
                &id,
            )
            .await?;
            counts.tool_calls += 1;
        }
        if let Some(content) = report.content.as_deref().filter(|c| !c.trim().is_empty()) {
            self.publish_moderation(&event, content, &report.tools_used, &report.summary)
                .await?;
            counts.moderation = 1;
        }
        Ok(counts)
    }

    /// Publishes a reverted message for moderation: moderation approved the cleaned text,
    /// and must see the restored one. The `recovery` object says `reverted` and which
    /// ledger row was undone. Also for `already_reverted` while the message is still as the
    /// revert left it: a publish that failed after the revert committed is not lost, and
    /// the id (`revert:{row}`) is the same, so consumers drop a duplicate. Publishes nothing
    /// otherwise.
    pub async fn publish_restored(
        &self,
        report: &RevertReport,
        origin: &str,
    ) -> Result<PublishedCounts, Error> {
        let mut counts = PublishedCounts::default();
        let (
            RevertOutcome::Reverted | RevertOutcome::AlreadyReverted,
            Some(recovery_id),
            true,
            false,
        ) = (
            report.outcome,
            report.recovery_id,
            report.restored,
            report.dry_run,
        )
        else {
            return Ok(counts);
        };
        let Some(content) = report.content.as_deref().filter(|c| !c.trim().is_empty()) else {
            return Ok(counts);
        };
        let event = outbound::restored_event(report, recovery_id, origin);
        let mut summary = recover::empty_summary(Outcome::Reverted, Mode::Recover);
        summary["reverted_recovery_id"] = json!(recovery_id);
        self.publish_moderation(&event, content, &report.tools_used, &summary)
            .await?;
        counts.moderation = 1;
        Ok(counts)
    }

    /// The moderation message of a stand-in event, under the id derived from it.
    async fn publish_moderation(
        &self,
        event: &FinalizedEvent,
        content: &str,
        tools_used: &[String],
        summary: &Value,
    ) -> Result<(), Error> {
        let body = outbound::moderation_body(event, content, tools_used, summary);
        let id = event.event_id.moderation_event_id().to_string();
        self.publish(
            &self.target.moderation_exchange,
            MODERATION_ROUTING_KEY,
            &body,
            &id,
        )
        .await
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
        let connection = Connection::connect(self.target.amqp_url.expose(), props).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        for exchange in [
            &self.target.moderation_exchange,
            &self.target.tool_calls_exchange,
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

    /// One persistent, mandatory publish, waiting for the broker's confirm
    /// ([`publish_confirmed`]), counted. A returned (unroutable) message is counted and
    /// logged, not an error: nobody has bound a queue yet.
    async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &Value,
        id: &str,
    ) -> Result<(), Error> {
        let bytes = serde_json::to_vec(body).map_err(|e| Error::Bug(e.to_string()))?;
        let channel = self.channel().await?;
        let published = publish_confirmed(
            &channel,
            exchange,
            routing_key,
            &bytes,
            Some(id),
            FieldTable::default(),
        )
        .await;
        match published {
            Ok(published) => {
                count(&self.metrics, exchange, published);
                Ok(())
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
}
