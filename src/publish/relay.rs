//! The outbox relay: every worker sends, now and then, the outbox rows that stayed pending
//! (the process that wrote them died before sending, the broker failed, the publish came
//! back unroutable), oldest first, each confirmed, and keeps the pending count on
//! `/metrics`. Rows younger than the grace period are left to the process that wrote them.
//! Several replicas relay side by side: a claimed row is leased, and the others skip it.
//!
//! May depend on: the parent `publish` (the publisher), `outbox` (claiming, marking),
//! `metrics`, `shutdown`, `error`, `sqlx`, `tokio`.

use super::{Published, Publisher};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::outbox;
use crate::shutdown::Shutdown;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

/// Rows claimed per round trip.
const BATCH: i64 = 100;
/// How long a claimed row is left to the relay that claimed it.
const LEASE: Duration = Duration::from_secs(60);

/// The relay of one process.
pub struct Relay {
    /// The database holding the outbox.
    pub pool: PgPool,
    /// Its own publisher (a connection of its own).
    pub publisher: Publisher,
    /// Where the pending count and the relayed rows are counted.
    pub metrics: Arc<Metrics>,
    /// Time between sweeps.
    pub interval: Duration,
    /// Age below which a pending row is left to the process that wrote it.
    pub grace: Duration,
}

impl Relay {
    /// Sweeps every `interval` until shutdown, then closes its publisher.
    pub async fn run(self, mut shutdown: Shutdown) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = shutdown.wait() => break,
            }
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %e, "outbox relay sweep failed; trying again later");
            }
        }
        self.publisher.close().await;
    }

    /// Sends what is due, batch by batch, and updates the pending count. Returns the rows
    /// confirmed.
    pub async fn sweep(&self) -> Result<usize, Error> {
        let mut confirmed = 0;
        loop {
            let rows = outbox::claim(&self.pool, BATCH, self.grace, LEASE).await?;
            if rows.is_empty() {
                break;
            }
            let mut sent = Vec::with_capacity(rows.len());
            let mut broker_failed = None;
            for row in &rows {
                match self.publisher.send(&row.outgoing).await {
                    Ok(Published::Routed) => {
                        sent.push(row.id);
                        self.metrics.outbox_relayed("sent");
                    }
                    Ok(Published::Unroutable) => {
                        self.metrics.outbox_relayed("unroutable");
                        outbox::note_failure(&self.pool, row.id, outbox::UNROUTABLE).await?;
                    }
                    Err(e) => {
                        self.metrics.outbox_relayed("failed");
                        outbox::note_failure(&self.pool, row.id, &e.to_string()).await?;
                        broker_failed = Some(e);
                        break;
                    }
                }
            }
            outbox::mark_sent(&self.pool, &sent).await?;
            confirmed += sent.len();
            if let Some(e) = broker_failed {
                // The rest of the batch stays leased and is tried again after the lease.
                self.refresh_pending().await;
                return Err(e);
            }
            if rows.len() < BATCH as usize {
                break;
            }
        }
        self.refresh_pending().await;
        if confirmed > 0 {
            tracing::info!(confirmed, "outbox relay sent pending messages");
        }
        Ok(confirmed)
    }

    async fn refresh_pending(&self) {
        match outbox::pending(&self.pool).await {
            Ok((pending, unroutable)) => self.metrics.outbox_pending(pending, unroutable),
            Err(e) => tracing::debug!(error = %e, "counting pending outbox rows failed"),
        }
    }
}
