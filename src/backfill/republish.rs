//! Publishing a recovery that did not come from a delivery (the backfill, the admin API):
//! the cleaned message for moderation and the forwarded calls for the app, each confirmed
//! by the broker, with the same bodies the worker publishes; and a revert's restored
//! message for moderation (the `revert` command, the admin API).
//!
//! There is no source event, so a stand-in one is built from the message row; its id is
//! derived from the ledger row (`recovery:{id}`, `revert:{id}`), which makes the
//! moderation message id deterministic too: publishing the same recovery twice publishes
//! the same ids, and consumers drop the duplicate.
//!
//! The publisher owns one connection with one confirm-mode channel, opened on first use
//! and reopened after a failure. It only declares the two exchanges it publishes to (the
//! same idempotent declares the worker makes); it never touches the worker's queues.
//!
//! May depend on: `event`, `recover` (the report), `settings`, `error`, `lapin`.

use crate::amqp;
use crate::error::Error;
use crate::event::{
    self, AgentId, ChatId, EventId, EventMessage, FinalizedEvent, MessageId, Role, ID_NAMESPACE,
};
use crate::recover::revert::{RevertOutcome, RevertReport};
use crate::recover::{self, Mode, Outcome, Report};
use crate::settings::{PublishSettings, SecretUrl};
use lapin::options::{ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, LongString};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{json, Value};
use tokio::sync::Mutex;
use uuid::Uuid;

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
    link: Mutex<Option<Link>>,
}

struct Link {
    connection: Connection,
    channel: Channel,
}

/// The id of the stand-in source event of a ledger row.
pub fn source_event_id(recovery_id: i64) -> EventId {
    EventId::new(Uuid::new_v5(
        &ID_NAMESPACE,
        format!("recovery:{recovery_id}").as_bytes(),
    ))
}

/// The id of the stand-in source event of the revert of a ledger row (one per row: a
/// row is reverted at most once).
pub fn revert_event_id(recovery_id: i64) -> EventId {
    EventId::new(Uuid::new_v5(
        &ID_NAMESPACE,
        format!("revert:{recovery_id}").as_bytes(),
    ))
}

/// The message a stand-in event carries.
struct StandIn<'a> {
    message_id: MessageId,
    chat_id: ChatId,
    agent_id: Option<AgentId>,
    content: &'a Option<String>,
    tools_used: &'a [String],
}

/// The stand-in `message.finalized` event of a recovered message: the message as it is
/// after the pass, and `origin` (`backfill`, `admin`) saying who recovered it.
pub fn stand_in_event(report: &Report, recovery_id: i64, origin: &str) -> FinalizedEvent {
    stand_in(
        source_event_id(recovery_id),
        &StandIn {
            message_id: report.message_id,
            chat_id: report.chat_id,
            agent_id: report.agent_id,
            content: &report.content,
            tools_used: &report.tools_used,
        },
        origin,
    )
}

fn stand_in(event_id: EventId, m: &StandIn<'_>, origin: &str) -> FinalizedEvent {
    let occurred_at = chrono::Utc::now().fixed_offset();
    let raw = json!({
        "event_id": event_id.to_string(),
        "type": event::FINALIZED,
        "occurred_at": occurred_at.to_rfc3339(),
        "origin": origin,
        "message": {
            "id": m.message_id.get(),
            "chat_id": m.chat_id.get(),
            "agent_id": m.agent_id.map(|a| a.get()),
            "role": "assistant",
            "content": m.content,
            "tools_used": m.tools_used,
        },
    });
    let Value::Object(raw) = raw else {
        unreachable!("json! of an object literal is an object")
    };
    FinalizedEvent {
        event_id,
        occurred_at,
        message: EventMessage {
            id: m.message_id,
            chat_id: m.chat_id,
            agent_id: m.agent_id,
            role: Role::Assistant,
            content: m.content.clone(),
            tools_used: m.tools_used.to_vec(),
        },
        raw,
    }
}

impl Publisher {
    /// A publisher for `target`; connects on first use.
    pub fn new(target: PublishTarget) -> Self {
        Publisher {
            target,
            link: Mutex::new(None),
        }
    }

    /// The moderation and tool-calls exchanges, for metrics labels.
    pub fn exchanges(&self) -> (&str, &str) {
        (
            &self.target.moderation_exchange,
            &self.target.tool_calls_exchange,
        )
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
        let event = stand_in_event(report, recovery_id, origin);
        for call in &report.forward {
            let body = report.tool_call_body(call, event.event_id.get());
            let id = call.event_id.to_string();
            self.publish(
                &self.target.tool_calls_exchange,
                amqp::TOOL_CALLS_ROUTING_KEY,
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
        let event = stand_in(
            revert_event_id(recovery_id),
            &StandIn {
                message_id: report.message_id,
                chat_id: report.chat_id,
                agent_id: report.agent_id,
                content: &report.content,
                tools_used: &report.tools_used,
            },
            origin,
        );
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
        let body = event::moderation_body(event, content, tools_used, summary);
        let id = event.event_id.moderation_event_id().to_string();
        self.publish(
            &self.target.moderation_exchange,
            amqp::MODERATION_ROUTING_KEY,
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
    /// ([`amqp::publish_confirmed`]). A returned (unroutable) message is logged, not an
    /// error: nobody has bound a queue yet.
    async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &Value,
        id: &str,
    ) -> Result<(), Error> {
        let bytes = serde_json::to_vec(body).map_err(|e| Error::Bug(e.to_string()))?;
        let channel = self.channel().await?;
        let published = amqp::publish_confirmed(
            &channel,
            exchange,
            routing_key,
            &bytes,
            Some(id),
            FieldTable::default(),
        )
        .await;
        match published {
            Ok(amqp::Published::Routed) => Ok(()),
            Ok(amqp::Published::Unroutable) => {
                tracing::warn!(
                    exchange,
                    "published message was unroutable: no queue is bound"
                );
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
