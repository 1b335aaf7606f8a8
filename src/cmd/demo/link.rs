//! The demo's broker side: one connection, one confirm-mode channel; the event published
//! with the crate's one confirmed publish; and a queue of its own (exclusive, server-named,
//! gone when the demo disconnects) on the moderation exchange, to show what moderation
//! gets. It declares no exchange: the two it uses must be the running worker's (checked
//! passively), so that a demo against the wrong names leaves nothing on the broker.
//!
//! May depend on: `publish` (the connection, the one confirmed publish), `settings`,
//! `error`, `lapin`, `serde_json`, `tokio`.

use crate::error::Error;
use crate::publish::{confirm_channel, publish_confirmed, BrokerUrl, Message, Published};
use crate::settings::{Names, PublishSettings};
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ExchangeKind};
use serde_json::Value;
use std::time::Duration;

/// The routing key moderation messages are published with (docs/contract.md).
const MODERATION_KEY: &str = "message.ready";

/// The demo's connection to the broker.
pub struct Link {
    connection: Connection,
    channel: Channel,
    moderation_queue: String,
}

impl Link {
    /// Connects, checks that the input and moderation exchanges are there (the worker
    /// declared them) and binds the demo's own queue to the moderation exchange.
    pub async fn open(
        url: &BrokerUrl,
        connection_name: &str,
        names: &Names,
        publish: &PublishSettings,
    ) -> Result<Link, Error> {
        let (connection, channel) = confirm_channel(url, connection_name).await?;
        for exchange in [&names.input_exchange, &publish.moderation_exchange] {
            let there = ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            };
            let declared = channel
                .exchange_declare(exchange, ExchangeKind::Topic, there, FieldTable::default())
                .await;
            if let Err(e) = declared {
                let _ = connection.close(200, "done").await;
                return Err(Error::Startup(format!(
                    "the exchange {exchange} is not on the broker ({e}): the worker declares \
                     it at start, so the worker answering at --metrics-url runs with other \
                     exchange names or on another broker. Give the demo the worker's flags \
                     (--amqp-url, --input-exchange, --moderation-exchange); nothing was \
                     written or published"
                )));
            }
        }
        let own = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        };
        let queue = channel
            .queue_declare("", own, FieldTable::default())
            .await?;
        let moderation_queue = queue.name().as_str().to_string();
        channel
            .queue_bind(
                &moderation_queue,
                &publish.moderation_exchange,
                MODERATION_KEY,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(Link {
            connection,
            channel,
            moderation_queue,
        })
    }

    /// Publishes the event, confirmed; `Unroutable` when no queue takes it (no worker).
    pub async fn publish(
        &self,
        names: &Names,
        event_id: &str,
        body: &[u8],
    ) -> Result<Published, Error> {
        let message = Message {
            exchange: &names.input_exchange,
            routing_key: &names.input_routing_key,
            body,
            message_id: Some(event_id),
            headers: FieldTable::default(),
        };
        publish_confirmed(&self.channel, message).await
    }

    /// The moderation message published for the event `source_event_id`, waiting for it
    /// at most `wait` (the worker publishes it right after its commit).
    pub async fn moderation_for(
        &self,
        source_event_id: &str,
        wait: Duration,
    ) -> Result<Option<Value>, Error> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let got = self
                .channel
                .basic_get(&self.moderation_queue, BasicGetOptions { no_ack: true })
                .await?;
            match got {
                Some(m) => {
                    let body: Option<Value> = serde_json::from_slice(&m.delivery.data).ok();
                    if let Some(body) = body.filter(|b| b["source_event_id"] == source_event_id) {
                        return Ok(Some(body));
                    }
                }
                None if tokio::time::Instant::now() >= deadline => return Ok(None),
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Closes the channel (its queue goes with it) and the connection.
    pub async fn close(self) {
        let _ = self.channel.close(200, "done").await;
        let _ = self.connection.close(200, "done").await;
    }
}
