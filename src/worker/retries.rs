//! Retrying one attempt at a delivery's work while it fails transiently, and waiting for a
//! message row that is not in the database yet.
//!
//! May depend on: the parent `worker`, `amqp`, `retry`, `shutdown`, `metrics`, `error`,
//! `ids`.

use super::{show, Worker};
use crate::amqp::Session;
use crate::error::{Error, Poison};
use crate::ids::{EventId, MessageId};
use crate::retry;
use crate::shutdown::Shutdown;
use backon::Retryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

impl Worker {
    /// `attempt` with retries of transient failures, for as long as the session is usable
    /// and the worker is not shutting down; a message not (yet) in the database is retried
    /// too, for `--missing-message-retry-secs`: the app may publish before its commit is
    /// visible, or the database read may be a lagging replica.
    ///
    /// Only the window running out makes a missing message final. A wait stopped by
    /// shutdown or a broken session is [`Error::Interrupted`] (and a transient failure
    /// stays what it is): the delivery stays unacked, the session's close returns it to
    /// the queue, and the next consumer takes it up. A restart never dead-letters it.
    pub(super) async fn with_retries<T, F, Fut>(
        &self,
        session: &Session,
        shutdown: &Shutdown,
        (event_id, message_id): (Option<EventId>, MessageId),
        attempt: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let db_failed = AtomicBool::new(false);
        let stop = shutdown.clone();
        let started = Instant::now();
        let missing_window = self.settings.missing_message_window();
        let worth_retrying = |e: &Error| {
            e.is_transient()
                || (matches!(e, Error::Poison(Poison::MissingMessage(_)))
                    && started.elapsed() < missing_window)
        };
        let mut retries = 0u32;
        let result = attempt
            .retry(retry::policy())
            .sleep(retry::sleeper(shutdown.clone()))
            .when(|e: &Error| {
                worth_retrying(e) && !session.health.is_broken() && !stop.is_shutdown()
            })
            .notify(|e: &Error, after| {
                retries += 1;
                let dependency = match e {
                    Error::Database(_) => {
                        db_failed.store(true, Ordering::SeqCst);
                        "database"
                    }
                    Error::Poison(_) => "missing_message",
                    _ => "broker",
                };
                self.metrics.transient_error(dependency);
                // One WARN per event and fault, not one per retry: a row that is not there yet
                // is retried for up to 30 s, an outage for as long as it lasts; the retries
                // after the first are counted in the metric.
                if retries == 1 {
                    tracing::warn!(event_id = %show(event_id), %message_id, mode = self.policy.mode.as_str(), dependency, error = %e, retry_in = ?after, "transient failure; retrying");
                } else {
                    tracing::debug!(event_id = %show(event_id), %message_id, mode = self.policy.mode.as_str(), dependency, error = %e, retry_in = ?after, retries, "still failing; retrying");
                }
            })
            .await;
        match result {
            Ok(done) => {
                if db_failed.load(Ordering::SeqCst) {
                    self.metrics.connection_recovered("database");
                }
                Ok(done)
            }
            Err(e) if worth_retrying(&e) && !e.is_transient() => {
                tracing::info!(event_id = %show(event_id), %message_id, mode = self.policy.mode.as_str(), "stopped waiting for the message row; the delivery goes back to the queue");
                Err(Error::Interrupted("waiting for the message row"))
            }
            Err(e) => Err(e),
        }
    }
}
