//! Sending outbox rows, the one way every caller sends them: over a [`Line`] (a confirm-mode
//! channel and what a broker failure does to it), each row routed by its target, published
//! persistent and mandatory under its message id, confirmed, and counted ([`super::count`]).
//! [`Sender::deliver`] sends the rows a pass wrote and marks them sent;
//! [`Sender::send_direct`] sends what a pass that wrote nothing owes, parking in the outbox
//! what came back unroutable.
//!
//! The two lines: the worker's session (`amqp::Session`: a failure breaks the session, and
//! the worker builds a new one) and a [`super::Publisher`] (a connection of its own: a
//! failure drops it, and the next send reconnects).
//!
//! May depend on: the parent `publish`, `outbox` (the rows, marking, parking), `ids`,
//! `metrics`, `error`, `lapin`, `sqlx`.

use super::{count, Exchanges, Message, Published};
use crate::error::Error;
use crate::ids::MessageId;
use crate::metrics::Metrics;
use crate::outbox::{self, Marker, Outgoing, Queued, Target};
use lapin::types::FieldTable;
use sqlx::PgPool;
use std::future::Future;

/// A confirm-mode channel to publish on.
pub(crate) trait Line: Sync {
    /// [`super::publish_confirmed`] on the line's channel. A broker failure (the channel or
    /// the connection is gone) also puts the line out of use: the next user opens a new one.
    fn publish(
        &self,
        message: Message<'_>,
    ) -> impl Future<Output = Result<Published, Error>> + Send;
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

/// Outbox rows sent over a line to the two output exchanges, counted in `metrics`.
pub(crate) struct Sender<'a, L> {
    /// Where they are published.
    pub(crate) line: &'a L,
    /// The exchange of each target.
    pub(crate) exchanges: &'a Exchanges,
    /// Where every confirmed publish is counted.
    pub(crate) metrics: &'a Metrics,
}

impl<L: Line> Sender<'_, L> {
    /// One row, persistent, mandatory and confirmed, under its message id; counted.
    pub(crate) async fn send(&self, out: &Outgoing) -> Result<Published, Error> {
        let (exchange, routing_key) = self.exchanges.route(out.target);
        let published = self
            .line
            .publish(Message {
                exchange,
                routing_key,
                body: out.body.as_bytes(),
                message_id: Some(&out.key),
                headers: FieldTable::default(),
            })
            .await?;
        count(self.metrics, exchange, published);
        Ok(published)
    }

    /// Sends the outbox rows a pass wrote (in order, each confirmed by the broker) and
    /// marks those confirmed sent: through `marker` (batched, off the caller's path; a lost
    /// mark is a resend under the same id), or without one in a statement on `pool`. A row
    /// the broker returned as unroutable stays pending (counted, noted, and sent again by
    /// the relay once a queue is bound). A broker failure stops the sending: what was not
    /// confirmed stays pending in the outbox, and the error says so.
    pub(crate) async fn deliver(
        &self,
        pool: &PgPool,
        rows: &[Queued],
        marker: Option<&Marker>,
    ) -> Result<PublishedCounts, Error> {
        let mut counts = PublishedCounts::default();
        let mut sent = Vec::with_capacity(rows.len());
        let result = self.send_rows(pool, rows, &mut sent, &mut counts).await;
        match marker {
            Some(marker) => sent.iter().for_each(|&id| marker.sent(id)),
            None => outbox::mark_sent(pool, &sent).await?,
        }
        result.map(|()| counts)
    }

    async fn send_rows(
        &self,
        pool: &PgPool,
        rows: &[Queued],
        sent: &mut Vec<i64>,
        counts: &mut PublishedCounts,
    ) -> Result<(), Error> {
        for row in rows {
            match self.send(&row.outgoing).await {
                Ok(Published::Routed) => {
                    sent.push(row.id);
                    counts.add(row.outgoing.target);
                }
                Ok(Published::Unroutable) => {
                    counts.unroutable += 1;
                    outbox::note_failure(pool, row.id, outbox::UNROUTABLE).await?;
                }
                Err(e) => {
                    counts.pending = rows.len() - sent.len() - counts.unroutable;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Sends what a pass that wrote nothing owes (a clean message's moderation, say). A
    /// publish the broker returns as unroutable is parked in the outbox, so the relay sends
    /// it once a queue is bound: a finalized message is never dropped on the floor.
    pub(crate) async fn send_direct(
        &self,
        pool: &PgPool,
        message_id: MessageId,
        owed: impl IntoIterator<Item = Outgoing>,
    ) -> Result<(), Error> {
        for out in owed {
            if self.send(&out).await? == Published::Unroutable {
                outbox::park(pool, message_id, &out).await?;
            }
        }
        Ok(())
    }
}
