//! The pipeline, one delivery at a time (several in flight):
//!
//! delivery -> [`event::decode`] -> detect on the event's content -> (leak?)
//! [`recover::recover_message`] -> publish tool calls and the moderation message, each
//! confirmed -> ack.
//!
//! A clean message costs a decode and a detection scan: no database work. Poison (and our
//! own bugs) are published to the dead-letter exchange with the reason in `x-tcr-reason`,
//! then acked. Transient failures are retried in-process with backoff, without acking or
//! requeueing; when the broker session breaks, unacked deliveries are left to the broker
//! to redeliver and a new session is built. Nothing is acked that was not done.
//!
//! Every processed event is counted by the model that wrote it (`model`: a label of the
//! configured list, computed with a few slices of the id, no allocation), on ack, like the
//! events counter; the leaks a recovery pass recorded are counted by model where the pass's
//! calls are.
//!
//! May depend on: everything below it (`event`, `ids`, `model`, `recover`, `outbound`,
//! `publish`, `amqp`, `metrics`, `retry`, `shutdown`, `settings`, `error`); nothing depends
//! on it but `startup`.

mod dead_letter;

use crate::amqp::{self, Session};
use crate::error::{Error, ErrorKind};
use crate::event::{self, FinalizedEvent, Role};
use crate::ids::{EventId, MessageId, ModelId};
use crate::metrics::Metrics;
use crate::model::{Label, Models};
use crate::outbound::{self, MODERATION_ROUTING_KEY, TOOL_CALLS_ROUTING_KEY};
use crate::publish;
use crate::recover::{self, Mode, Outcome, Policy, Report, Source};
use crate::retry;
use crate::settings::Settings;
use crate::shutdown::Shutdown;
use backon::Retryable;
use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::BasicAckOptions;
use lapin::types::FieldTable;
use lapin::Consumer;
use serde_json::Value;
use sqlx::PgPool;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use toolcall_detect::Input;

/// How long tasks of a broken session get to notice before they are dropped.
const BROKEN_SESSION_GRACE: Duration = Duration::from_secs(5);

/// How long opening a broker session (TCP, TLS, handshake, declarations) may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing a broker session may take before it is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The worker: settings, the pool, the detection policy, metrics, readiness.
pub struct Worker {
    settings: Settings,
    pool: PgPool,
    policy: Policy,
    models: Models,
    metrics: Arc<Metrics>,
    broker_ready: Arc<AtomicBool>,
}

/// What a delivery ended as, for the events metrics.
enum Done {
    Processed(Outcome, Mode, Label),
    DeadLettered,
}

impl Worker {
    /// A worker over these parts. `broker_ready` is set while a session is consuming.
    pub fn new(
        settings: Settings,
        pool: PgPool,
        metrics: Arc<Metrics>,
        broker_ready: Arc<AtomicBool>,
    ) -> Self {
        let policy = settings.policy();
        let models = settings.models.models.clone();
        Worker {
            settings,
            pool,
            policy,
            models,
            metrics,
            broker_ready,
        }
    }

    /// Consumes until shutdown: builds a session, consumes on it until it breaks, builds
    /// the next. Returns once in-flight deliveries are drained (or the drain timeout
    /// passed) and the session is closed.
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        let mut connected_before = false;
        while !shutdown.is_shutdown() {
            let Some((session, consumer)) = self.connect(&shutdown).await else {
                break;
            };
            if connected_before {
                self.metrics.connection_recovered("broker");
                tracing::info!("broker session re-established; consuming again");
            } else {
                tracing::info!(queue = %self.settings.names.queue, "consuming");
            }
            connected_before = true;
            let session = Arc::new(session);
            self.broker_ready.store(true, Ordering::SeqCst);
            self.consume(session.clone(), consumer, &mut shutdown).await;
            self.broker_ready.store(false, Ordering::SeqCst);
            if tokio::time::timeout(CLOSE_TIMEOUT, session.close())
                .await
                .is_err()
            {
                tracing::warn!("closing the broker session timed out");
            }
        }
        tracing::info!("worker stopped");
    }

    async fn connect(&self, shutdown: &Shutdown) -> Option<(Session, Consumer)> {
        let metrics = self.metrics.clone();
        let stop = shutdown.clone();
        let attempt = || async {
            tokio::time::timeout(OPEN_TIMEOUT, amqp::open(&self.settings))
                .await
                .map_err(|_| Error::Timeout("opening the broker session"))?
        };
        let opened = attempt
            .retry(retry::policy())
            .sleep(retry::sleeper(shutdown.clone()))
            .when(move |_| !stop.is_shutdown())
            .notify(move |e, after| {
                metrics.transient_error("broker");
                tracing::warn!(error = %e, retry_in = ?after, "cannot open the broker session");
            });
        let mut s = shutdown.clone();
        tokio::select! {
            r = opened => r.ok(),
            _ = s.wait() => None,
        }
    }

    async fn consume(
        self: &Arc<Self>,
        session: Arc<Session>,
        mut consumer: Consumer,
        shutdown: &mut Shutdown,
    ) {
        let permits = Arc::new(Semaphore::new(self.settings.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown.wait() => break,
                _ = session.health.broken() => break,
            };
            let next = tokio::select! {
                d = consumer.next() => d,
                _ = shutdown.wait() => break,
                _ = session.health.broken() => break,
            };
            match next {
                Some(Ok(delivery)) => {
                    let worker = self.clone();
                    let session = session.clone();
                    let shutdown = shutdown.clone();
                    tasks.spawn(async move {
                        worker.handle(&session, delivery, shutdown).await;
                        drop(permit);
                    });
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "consumer failed; rebuilding the session");
                    session.health.mark_broken();
                    break;
                }
                None => {
                    tracing::warn!("consumer closed by the broker; rebuilding the session");
                    session.health.mark_broken();
                    break;
                }
            }
        }
        while tasks.try_join_next().is_some() {}
        // Not ready from here on: the session is draining or gone.
        self.broker_ready.store(false, Ordering::SeqCst);
        let limit = if shutdown.is_shutdown() {
            session.cancel_consumer().await;
            tracing::info!(in_flight = tasks.len(), "draining in-flight deliveries");
            self.settings.drain_timeout()
        } else {
            BROKEN_SESSION_GRACE
        };
        let drained =
            tokio::time::timeout(limit, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                abandoned = tasks.len(),
                "in-flight deliveries did not finish in time; they stay unacked and will be redelivered"
            );
            tasks.abort_all();
        }
    }

    async fn handle(&self, session: &Session, delivery: Delivery, shutdown: Shutdown) {
        let started = Instant::now();
        self.metrics.in_flight(1);
        // A panic (a bug in detection, say) must not leave the delivery unacked forever,
        // holding a prefetch slot: it is caught here, where the delivery is still ours, and
        // handled like any other bug.
        let attempt = AssertUnwindSafe(self.decode_and_process(session, &delivery, &shutdown))
            .catch_unwind()
            .await;
        let (result, event_id, message_id) = attempt.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            (Err(Error::Bug(format!("panic: {what}"))), None, None)
        });
        let result = match result {
            Err(e) if e.kind() != ErrorKind::Transient => {
                let reason = e.dead_letter_reason();
                if e.kind() == ErrorKind::Bug {
                    tracing::error!(event_id = %show(event_id), message_id = %show(message_id), reason, error = %e, "bug while processing a delivery; dead-lettering it");
                } else {
                    tracing::warn!(event_id = %show(event_id), message_id = %show(message_id), reason, error = %truncate(&e.to_string(), 300), "poison delivery; dead-lettering it");
                }
                self.dead_letter_with_retries(session, &delivery, &e, event_id, &shutdown)
                    .await
                    .map(|()| {
                        self.metrics.dead_lettered(reason);
                        Done::DeadLettered
                    })
            }
            other => other.map(|(outcome, mode, model)| Done::Processed(outcome, mode, model)),
        };
        match result {
            Ok(done) => match delivery.acker.ack(BasicAckOptions::default()).await {
                Ok(()) => {
                    if let Done::Processed(outcome, mode, model) = done {
                        self.metrics.event(outcome.as_str(), mode.as_str());
                        self.metrics.message_seen(self.models.name(model));
                        if outcome == Outcome::Clean {
                            tracing::debug!(event_id = %show(event_id), message_id = %show(message_id), outcome = outcome.as_str(), "event processed");
                        } else {
                            tracing::info!(event_id = %show(event_id), message_id = %show(message_id), outcome = outcome.as_str(), "event processed");
                        }
                    }
                    self.metrics.processed_in(started.elapsed());
                }
                Err(e) => {
                    tracing::warn!(event_id = %show(event_id), error = %e, "ack failed; the broker will redeliver (idempotent)");
                    session.health.mark_broken();
                }
            },
            Err(e) => {
                tracing::info!(event_id = %show(event_id), error = %e, "delivery left unacked; the broker will redeliver it");
            }
        }
        self.metrics.in_flight(-1);
    }

    async fn decode_and_process(
        &self,
        session: &Session,
        delivery: &Delivery,
        shutdown: &Shutdown,
    ) -> (
        Result<(Outcome, Mode, Label), Error>,
        Option<EventId>,
        Option<MessageId>,
    ) {
        match event::decode(&delivery.data, self.settings.max_body_bytes) {
            Ok(event) => {
                let model = self.model(&event);
                let r = self
                    .process_with_retries(session, &event, shutdown)
                    .await
                    .map(|(outcome, mode)| (outcome, mode, model));
                (r, Some(event.event_id), Some(event.message.id))
            }
            Err((poison, event_id)) => (Err(Error::Poison(poison)), event_id, None),
        }
    }

    /// [`Self::process`] with retries of transient failures, for as long as the session is
    /// usable and the worker is not shutting down.
    async fn process_with_retries(
        &self,
        session: &Session,
        event: &FinalizedEvent,
        shutdown: &Shutdown,
    ) -> Result<(Outcome, Mode), Error> {
        let db_failed = AtomicBool::new(false);
        let stop = shutdown.clone();
        let result = (|| self.process(session, event))
            .retry(retry::policy())
            .sleep(retry::sleeper(shutdown.clone()))
            .when(|e: &Error| e.is_transient() && !session.health.is_broken() && !stop.is_shutdown())
            .notify(|e: &Error, after| {
                let dependency = match e {
                    Error::Database(_) => {
                        db_failed.store(true, Ordering::SeqCst);
                        "database"
                    }
                    _ => "broker",
                };
                self.metrics.transient_error(dependency);
                tracing::warn!(event_id = %event.event_id, message_id = %event.message.id, dependency, error = %e, retry_in = ?after, "transient failure; retrying");
            })
            .await;
        if result.is_ok() && db_failed.load(Ordering::SeqCst) {
            self.metrics.connection_recovered("database");
        }
        result
    }

    /// One attempt: detect, recover when needed, publish, each publish confirmed.
    async fn process(
        &self,
        session: &Session,
        event: &FinalizedEvent,
    ) -> Result<(Outcome, Mode), Error> {
        let (content, tools_used, summary, outcome, report) = if self.needs_recovery(event) {
            let source = Source::Event {
                event_id: event.event_id,
                model: event.message.model_id.clone(),
            };
            let report =
                recover::recover_message(&self.pool, event.message.id, &self.policy, source)
                    .await?;
            self.metrics.recovery_pass(
                report.mode.as_str(),
                report.call_labels(),
                report.memories_created,
            );
            self.metrics
                .model_pass(self.models.name(self.model(event)), report.call_labels());
            (
                report.content.clone(),
                report.tools_used.clone(),
                report.summary.clone(),
                report.outcome,
                Some(report),
            )
        } else {
            (
                event.message.content.clone(),
                event.message.tools_used.clone(),
                recover::empty_summary(Outcome::Clean, self.policy.mode),
                Outcome::Clean,
                None,
            )
        };
        let mode = report.as_ref().map_or(self.policy.mode, |r| r.mode);
        if let Some(report) = &report {
            self.publish_tool_calls(session, report, event.event_id)
                .await?;
        }
        match content.as_deref() {
            Some(c) if !c.trim().is_empty() => {
                let body = outbound::moderation_body(event, c, &tools_used, &summary);
                let id = event.event_id.moderation_event_id().to_string();
                self.publish(
                    session,
                    &self.settings.publish.moderation_exchange,
                    MODERATION_ROUTING_KEY,
                    &body,
                    &id,
                )
                .await?;
            }
            _ => {}
        }
        Ok((outcome, mode))
    }

    /// The `model` label of the event's model id.
    fn model(&self, event: &FinalizedEvent) -> Label {
        self.models
            .label(event.message.model_id.as_ref().map(ModelId::as_str))
    }

    /// Whether the event's content may hold a leak, so the database must be consulted: a
    /// leak found without knowing the agent's tools, or a verdict that consulted the tools
    /// (then only the agent's real tools can decide).
    fn needs_recovery(&self, event: &FinalizedEvent) -> bool {
        let m = &event.message;
        let (Role::Assistant, Some(content)) = (&m.role, &m.content) else {
            return false;
        };
        let detection = toolcall_detect::detect(
            &Input {
                content,
                tools_used: &m.tools_used,
                enabled_tools: &[],
            },
            &self.policy.detect,
        );
        !detection.is_clean() || detection.depends_on_tools
    }

    async fn publish_tool_calls(
        &self,
        session: &Session,
        report: &Report,
        source: EventId,
    ) -> Result<(), Error> {
        for call in &report.forward {
            let body = outbound::tool_call_body(report, call, source);
            self.publish(
                session,
                &self.settings.publish.tool_calls_exchange,
                TOOL_CALLS_ROUTING_KEY,
                &body,
                &call.event_id.to_string(),
            )
            .await?;
        }
        Ok(())
    }

    async fn publish(
        &self,
        session: &Session,
        exchange: &str,
        routing_key: &str,
        body: &Value,
        id: &str,
    ) -> Result<(), Error> {
        let bytes = serde_json::to_vec(body).map_err(|e| Error::Bug(e.to_string()))?;
        let published = session
            .publish(
                exchange,
                routing_key,
                &bytes,
                Some(id),
                FieldTable::default(),
            )
            .await?;
        publish::count(&self.metrics, exchange, published);
        Ok(())
    }
}

/// An optional id for a log field: the id, or `-`.
fn show<T: std::fmt::Display>(id: Option<T>) -> String {
    id.map_or_else(|| "-".to_string(), |i| i.to_string())
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}
