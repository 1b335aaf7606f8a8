//! The pipeline, one delivery at a time, several at once:
//!
//! delivery -> its share of the byte budget -> [`event::decode`] -> detect on the event's
//! content -> (leak?) THE recovery pass, group-committed by [`recover::committer`] (it
//! writes what the pass owes to the outbox in the same transaction) -> publish the
//! forwarded calls and the moderation message, each confirmed -> ack.
//!
//! How many at once: the broker pushes a window of deliveries sized from the bodies seen
//! so that they fit the byte budget (`--max-in-flight-bytes`) beside what is held, at most
//! `--prefetch` (`worker/window.rs`, applied in `worker/consume.rs`), and each delivery
//! holds a share of the budget the size of its body while it is worked on
//! ([`crate::budget`]).
//!
//! A clean message costs a decode and a detection scan: no database work, and no place in
//! the committers' queue (recoveries go to one of `--concurrency` committers, which put up
//! to `--recoveries-per-commit` of them in one transaction: `recover::committer`), so a
//! database outage holds up only the leaks. Poison (and our own bugs) are published to the
//! dead-letter exchange with the reason in `x-tcr-reason`, then acked; a decoded event
//! whose recovery failed for good is first published for moderation as it is stored
//! (`recovery.outcome = "failed"`), and so is the message an event that cannot be examined
//! names (`oversized`, `unreadable`: `worker/unexamined.rs`), so every finalized message
//! reaches moderation. Transient failures are retried in-process with backoff, without
//! acking or requeueing; when the broker session breaks, unacked deliveries are left to
//! the broker to redeliver and a new session is built; a wait that shutdown stops leaves
//! its delivery unacked for the next worker. Nothing is acked that was not done. Acks are
//! sent by the session's acking task (`worker/acks.rs`), several finished deliveries to a
//! frame where one `multiple` ack says exactly that; a delivery is counted (events, model,
//! processing time) when its ack is handed to that task.
//!
//! Every processed event is counted by the model that wrote it (`model`: a label of the
//! configured list, computed with a few slices of the id, no allocation), on ack, like the
//! events counter; the leaks a recovery pass recorded are counted by model where the pass's
//! calls are.
//!
//! May depend on: everything below it (`event`, `ids`, `model`, `recover`, `outbound`,
//! `publish`, `amqp`, `budget`, `metrics`, `retry`, `shutdown`, `settings`, `error`,
//! `outbox`, `lapin`, `sqlx`, `tokio`); nothing depends on it but `startup`.

mod acks;
mod consume;
mod counters;
mod dead_letter;
mod outgoing;
mod retries;
mod unexamined;
mod window;

use crate::amqp::{self, Session};
use crate::budget::Budget;
use crate::error::{Error, ErrorKind};
use crate::event::{self, FinalizedEvent, Role};
use crate::ids::{EventId, MessageId, ModelId};
use crate::metrics::Metrics;
use crate::model::{Label, Models};
use crate::outbound::{self, ForEvent, ForOwnedEvent};
use crate::outbox::Marker;
use crate::publish::Exchanges;
use crate::recover::committer::Committer;
use crate::recover::Envelope;
use crate::recover::{self, Mode, Outcome, Policy, Source};
use crate::retry;
use crate::settings::Settings;
use crate::shutdown::Shutdown;
use acks::Acks;
use backon::Retryable;
use counters::{Clean, Counters};
use futures_util::FutureExt;
use lapin::message::Delivery;
use lapin::Consumer;
use sqlx::PgPool;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use toolcall_detect::Input;
use window::Window;

/// How long tasks of a broken session get to notice before they are dropped.
const BROKEN_SESSION_GRACE: Duration = Duration::from_secs(5);

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
    exchanges: Exchanges,
    marker: Marker,
    /// Whether the broker topology was declared (a reopen only checks it).
    topology: amqp::Topology,
    /// The recoveries: `--concurrency` transactions at once, up to
    /// `--recoveries-per-commit` messages each.
    committer: Committer<ForOwnedEvent>,
    /// The bytes of bodies worked on at once (`--max-in-flight-bytes`).
    budget: Budget,
    /// Bytes of deliveries taken in and not finished (waiting for the budget or worked on).
    held: AtomicUsize,
    /// Woken when a delivery is finished (the window may be waiting for room).
    finished: Notify,
    /// What is the same for every clean event, worked out once.
    clean: Clean,
    /// The per-event counters, looked up once.
    counters: Counters,
}

/// A delivery as taken in: its headers and tag, the book its ack goes to, and when it was
/// taken.
struct Delivered<'a> {
    delivery: &'a Delivery,
    acks: &'a Acks,
    started: Instant,
}

/// A delivery being finished: the delivery, its body (moved out of it to be decoded), the
/// ids for the log lines.
struct Taken<'a> {
    delivered: &'a Delivered<'a>,
    body: &'a [u8],
    event_id: Option<EventId>,
    message_id: Option<MessageId>,
}

/// What a delivery ended as, for the events metrics.
enum Done {
    Processed(Outcome, Mode, Label),
    DeadLettered,
}

impl Worker {
    /// A worker over these parts. `broker_ready` is set while a session is consuming;
    /// `marker` writes the outbox's "sent" marks; `budget` bounds the bytes of bodies worked
    /// on (shared with the admin API). Starts the recovery committers, so it is
    /// called on the runtime.
    pub fn new(
        settings: Settings,
        pool: PgPool,
        metrics: Arc<Metrics>,
        broker_ready: Arc<AtomicBool>,
        marker: Marker,
        budget: Budget,
    ) -> Self {
        let policy = settings.policy();
        let models = settings.models.models.clone();
        let clean = Clean(
            outbound::written_once(&recover::empty_summary(Outcome::Clean, policy.mode)).ok(),
        );
        let counters = Counters::new(&metrics, &models);
        Worker {
            clean,
            counters,
            exchanges: Exchanges::from_settings(&settings.publish),
            budget,
            held: AtomicUsize::new(0),
            finished: Notify::new(),
            committer: Committer::start(
                pool.clone(),
                policy.clone(),
                settings.concurrency,
                settings.recoveries_per_commit,
                {
                    let metrics = metrics.clone();
                    Arc::new(move |n| metrics.committed(n))
                },
            ),
            settings,
            pool,
            policy,
            models,
            metrics,
            broker_ready,
            marker,
            topology: amqp::Topology::default(),
        }
    }

    /// Consumes until shutdown: builds a session, consumes on it until it breaks, builds
    /// the next. Returns once in-flight deliveries are drained (or the drain timeout
    /// passed) and the session is closed.
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        let mut connected_before = false;
        // The last session's loss was said at WARN: the same outage goes on.
        let mut loss_said = false;
        let mut window = Window::new(
            self.budget.total(),
            self.settings.max_body_bytes,
            self.settings.prefetch,
        );
        while !shutdown.is_shutdown() {
            let opened = self.connect(&shutdown, window.current(), loss_said).await;
            let Some((session, consumer)) = opened else {
                break;
            };
            self.metrics.delivery_window(window.current());
            if connected_before {
                self.metrics.connection_recovered("broker");
                tracing::info!("broker session re-established; consuming again");
            } else {
                tracing::info!(queue = %self.settings.names.queue, "consuming");
            }
            connected_before = true;
            let session = Arc::new(session);
            let acks = Arc::new(Acks::default());
            let acking = tokio::spawn(acks.clone().run(session.clone()));
            self.broker_ready.store(true, Ordering::SeqCst);
            self.consume(session.clone(), consumer, &acks, &mut window, &mut shutdown)
                .await;
            self.broker_ready.store(false, Ordering::SeqCst);
            // What the drained deliveries finished is acked before the session closes.
            acks.close();
            match tokio::time::timeout(CLOSE_TIMEOUT, acking).await {
                Ok(Ok(sent)) => tracing::debug!(
                    deliveries = sent.deliveries,
                    frames = sent.frames,
                    "acks of the session"
                ),
                Ok(Err(e)) => tracing::error!(error = %e, "the acking task failed"),
                // On a session whose loss was said, part of the same fault.
                Err(_) if session.health.loss_said() => {
                    tracing::debug!("the last acks of the lost session timed out")
                }
                Err(_) => tracing::warn!("the last acks of the session timed out"),
            }
            loss_said = session.health.loss_said();
            if tokio::time::timeout(CLOSE_TIMEOUT, session.close())
                .await
                .is_err()
            {
                if loss_said {
                    tracing::debug!("closing the lost broker session timed out");
                } else {
                    tracing::warn!("closing the broker session timed out");
                }
            }
        }
        tracing::info!("worker stopped");
    }

    /// Opens a session, retrying until it opens or shutdown. The first failure is a WARN,
    /// but `after_loss` (the lost session was said at WARN, [`amqp::Health::lost`]: the
    /// same outage goes on), when it is an INFO line; the retries after it are DEBUG lines.
    async fn connect(
        &self,
        shutdown: &Shutdown,
        window: u16,
        after_loss: bool,
    ) -> Option<(Session, Consumer)> {
        let metrics = self.metrics.clone();
        let stop = shutdown.clone();
        let mut retries = 0u32;
        let attempt = || async {
            // Each step bounded by --broker-step-timeout-secs (amqp::open).
            amqp::open(&self.settings, window, &self.topology).await
        };
        let opened = attempt
            .retry(retry::policy())
            .sleep(retry::sleeper(shutdown.clone()))
            .when(move |_| !stop.is_shutdown())
            .notify(move |e, after| {
                metrics.transient_error("broker");
                // One WARN per outage, not one per retry (the metric counts every retry).
                retries += 1;
                if retries == 1 && !after_loss {
                    tracing::warn!(error = %e, retry_in = ?after, "cannot open the broker session");
                } else if retries == 1 {
                    tracing::info!(error = %e, retry_in = ?after, "cannot reopen the broker session yet; retrying");
                } else {
                    tracing::debug!(error = %e, retry_in = ?after, retries, "still cannot open the broker session");
                }
            });
        let mut s = shutdown.clone();
        tokio::select! {
            r = opened => r.ok(),
            _ = s.wait() => None,
        }
    }

    /// One delivery: its share of the byte budget, then decoded and processed (or, when it
    /// does not decode, [`Self::unexamined`]), then finished. A delivery still waiting for
    /// its share when shutdown begins is left unacked: the session's close returns it.
    async fn handle(
        &self,
        session: &Session,
        acks: &Acks,
        mut delivery: Delivery,
        shutdown: Shutdown,
    ) {
        let started = Instant::now();
        let size = delivery.data.len();
        self.metrics.in_flight(1);
        let mut stop = shutdown.clone();
        let share = tokio::select! {
            biased;
            share = self.budget.take(size) => Some(share),
            _ = stop.wait() => None,
        };
        if let Some(_share) = share {
            let body = std::mem::take(&mut delivery.data);
            let delivered = Delivered {
                delivery: &delivery,
                acks,
                started,
            };
            match event::decode(body, self.settings.max_body_bytes) {
                Ok(event) => {
                    self.examine(session, &delivered, Arc::new(event), &shutdown)
                        .await
                }
                Err(undecoded) => {
                    self.unexamined(session, &delivered, undecoded, &shutdown)
                        .await
                }
            }
        }
        drop(delivery);
        self.held.fetch_sub(size, Ordering::SeqCst);
        self.metrics.in_flight_bytes(-(size as i64));
        self.metrics.in_flight(-1);
        self.finished.notify_one();
    }

    /// A decoded event: processed with retries; when that fails for good, moderated as
    /// stored and dead-lettered.
    async fn examine(
        &self,
        session: &Session,
        delivered: &Delivered<'_>,
        event: Arc<FinalizedEvent>,
        shutdown: &Shutdown,
    ) {
        let model = self.model(&event);
        // A panic (a bug in detection, say) must not leave the delivery unacked forever,
        // holding a prefetch slot: it is caught here, where the delivery is still ours, and
        // handled like any other bug.
        let attempt = AssertUnwindSafe(self.process_with_retries(session, &event, shutdown))
            .catch_unwind()
            .await;
        let result = match attempt.unwrap_or_else(|panic| Err(bug_of(panic))) {
            Ok((outcome, mode)) => Ok((outcome, mode, model)),
            Err(e) if e.kind() != ErrorKind::Transient => {
                // Recovery failed for good: moderation still sees the message, once,
                // before the event is dead-lettered.
                match self.moderate_failed(session, &event, &e, shutdown).await {
                    Ok(()) => Err(e),
                    Err(publish) => Err(publish),
                }
            }
            Err(e) => Err(e),
        };
        let taken = Taken {
            delivered,
            body: event.body(),
            event_id: Some(event.event_id),
            message_id: Some(event.message.id),
        };
        self.finish(session, taken, result, shutdown).await;
    }

    /// Dead-letters what failed for good, acks what is done (in the session's next round of
    /// acks, [`acks`]), leaves the rest unacked.
    async fn finish(
        &self,
        session: &Session,
        taken: Taken<'_>,
        result: Result<(Outcome, Mode, Label), Error>,
        shutdown: &Shutdown,
    ) {
        let Taken {
            delivered,
            body,
            event_id,
            message_id,
        } = taken;
        let delivery = delivered.delivery;
        // The worker's mode; a processed event's line says the mode its pass ran in (a
        // family may be observed while the worker recovers).
        let mode = self.policy.mode.as_str();
        let result = match result {
            Err(e) if e.kind() != ErrorKind::Transient => {
                let reason = e.dead_letter_reason();
                if e.kind() == ErrorKind::Bug {
                    tracing::error!(event_id = %show(event_id), message_id = %show(message_id), mode, reason, error = %e, "bug while processing a delivery; dead-lettering it");
                } else {
                    tracing::warn!(event_id = %show(event_id), message_id = %show(message_id), mode, reason, error = %truncate(&e.to_string(), 300), "poison delivery; dead-lettering it");
                }
                self.dead_letter_with_retries(
                    session,
                    delivery,
                    body,
                    &e,
                    (event_id, message_id),
                    shutdown,
                )
                .await
                .map(|()| {
                    self.metrics.dead_lettered(reason);
                    Done::DeadLettered
                })
            }
            other => other.map(|(outcome, mode, model)| Done::Processed(outcome, mode, model)),
        };
        match result {
            Ok(done) => {
                delivered.acks.done(delivery.delivery_tag);
                if let Done::Processed(outcome, mode, model) = done {
                    let name = self.models.name(model);
                    self.counters
                        .count(&self.metrics, outcome, mode, name, model);
                    // In observe mode the outcome says what would have happened.
                    let (logged, mode) = (outcome.logged(mode), mode.as_str());
                    if outcome == Outcome::Clean {
                        tracing::debug!(event_id = %show(event_id), message_id = %show(message_id), mode, outcome = logged, "event processed");
                    } else {
                        tracing::info!(event_id = %show(event_id), message_id = %show(message_id), mode, outcome = logged, "event processed");
                    }
                }
                self.metrics.processed_in(delivered.started.elapsed());
            }
            Err(e) => {
                tracing::info!(event_id = %show(event_id), message_id = %show(message_id), mode, error = %e, "delivery left unacked; the broker will redeliver it");
            }
        }
    }

    /// [`Self::process`] with retries ([`Self::with_retries`]).
    async fn process_with_retries(
        &self,
        session: &Session,
        event: &Arc<FinalizedEvent>,
        shutdown: &Shutdown,
    ) -> Result<(Outcome, Mode), Error> {
        let ids = (Some(event.event_id), event.message.id);
        self.with_retries(session, shutdown, ids, || self.process(session, event))
            .await
    }

    /// One attempt: detect; a clean message is published for moderation as it is, a leak
    /// goes through THE recovery transaction (which writes what it owes to the outbox), and
    /// what it owes is sent, each publish confirmed.
    async fn process(
        &self,
        session: &Session,
        event: &Arc<FinalizedEvent>,
    ) -> Result<(Outcome, Mode), Error> {
        // The content is read (unescaped, when it must be) for detection only, and let go
        // before anything waits: a clean message is moderated with its content copied as
        // received, and a leak's pass reads the message from the database.
        let content = event.content();
        if !self.needs_recovery(event, content.as_deref()) {
            let blank = content.as_deref().is_none_or(|c| c.trim().is_empty());
            drop(content);
            let owed = match &self.clean.0 {
                Some(summary) => outbound::moderation_unchanged(event, blank, &**summary)?,
                None => {
                    let summary = recover::empty_summary(Outcome::Clean, self.policy.mode);
                    outbound::moderation_unchanged(event, blank, &summary)?
                }
            };
            self.send_direct(session, event.message.id, owed).await?;
            return Ok((Outcome::Clean, self.policy.mode));
        }
        drop(content);
        // Boxed: the recovery's future is large, and every event's task would carry (and
        // move) its room; only a leak allocates it.
        Box::pin(self.recover(session, event)).await
    }

    /// A leak: THE recovery transaction through a committer, then what it owes sent.
    async fn recover(
        &self,
        session: &Session,
        event: &Arc<FinalizedEvent>,
    ) -> Result<(Outcome, Mode), Error> {
        let source = Source::Event {
            event_id: event.event_id,
            model: event.message.model_id.clone(),
        };
        let envelope = ForOwnedEvent(event.clone());
        let report = self
            .committer
            .recover(event.message.id, source, Some(envelope))
            .await?;
        self.metrics.recovery_pass(
            report.mode.as_str(),
            report.call_labels(),
            report.memories_created,
        );
        self.metrics
            .model_pass(self.models.name(self.model(event)), report.call_labels());
        if report.recorded() {
            self.send_queued(session, &report.outbox).await?;
        } else {
            // The pass wrote nothing (clean after all, no agent, done before): nothing
            // committed can be lost, and the delivery is not acked before the confirm.
            self.send_direct(
                session,
                event.message.id,
                ForEvent(event).outgoing(&report)?,
            )
            .await?;
        }
        Ok((report.outcome, report.mode))
    }

    /// The `model` label of the event's model id.
    fn model(&self, event: &FinalizedEvent) -> Label {
        self.models
            .label(event.message.model_id.as_ref().map(ModelId::as_str))
    }

    /// Whether the event's content may hold a leak, so the database must be consulted: a
    /// leak found without knowing the agent's tools, or a verdict that consulted the tools
    /// (then only the agent's real tools can decide).
    fn needs_recovery(&self, event: &FinalizedEvent, content: Option<&str>) -> bool {
        let m = &event.message;
        let (Role::Assistant, Some(content)) = (&m.role, content) else {
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
}

/// The error of a caught panic.
fn bug_of(panic: Box<dyn std::any::Any + Send>) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    Error::Bug(format!("panic: {what}"))
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
