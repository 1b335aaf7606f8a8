//! Group commit for the worker's recoveries: `--concurrency` committers, each one database
//! transaction at a time, take the leaks waiting for them, up to
//! `--recoveries-per-commit` at once, and run them in one transaction
//! ([`recover::recover_batch`]).
//!
//! Nothing waits to fill a batch: a committer takes what is queued when it becomes free, so
//! a lone leak is one transaction of its own, as before, and batches grow only when leaks
//! arrive faster than `--concurrency` transactions commit. Then one commit (one `fsync`,
//! one BEGIN/COMMIT round trip) serves several messages, which is where the dirty path's
//! time goes (BENCHMARKS.md §2).
//!
//! A batch that fails is rolled back whole and each of its messages is run alone, so a
//! message's error is its own (a missing row, a poison content) and never another's; the
//! caller's retries and dead-lettering see exactly what they saw without batching.
//!
//! May depend on: `recover`, `outbound`, `event`, `metrics`, `error`. No broker.

use crate::error::Error;
use crate::event::FinalizedEvent;
use crate::metrics::Metrics;
use crate::outbound::ForEvent;
use crate::recover::{self, BatchItem, Policy, Report, Source};
use futures_util::FutureExt;
use sqlx::PgPool;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

/// One leak waiting for a committer.
struct Job {
    event: FinalizedEvent,
    reply: oneshot::Sender<Result<Report, Error>>,
}

/// What the committers share.
struct Shared {
    pool: PgPool,
    policy: Policy,
    metrics: Arc<Metrics>,
    per_commit: usize,
    queue: Mutex<mpsc::UnboundedReceiver<Job>>,
}

/// The worker's handle on its committers.
pub(super) struct Committer {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Committer {
    /// Starts `committers` committers (the database transactions at once) that put up to
    /// `per_commit` recoveries in one transaction. They stop when the handle is dropped.
    ///
    /// The queue needs no bound of its own: every job is a delivery the broker handed out,
    /// and the broker hands out at most `--prefetch` unacked ones.
    pub(super) fn start(
        pool: PgPool,
        policy: Policy,
        metrics: Arc<Metrics>,
        committers: usize,
        per_commit: usize,
    ) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            pool,
            policy,
            metrics,
            per_commit: per_commit.max(1),
            queue: Mutex::new(queue),
        });
        for _ in 0..committers.max(1) {
            tokio::spawn(run(shared.clone()));
        }
        Committer { jobs }
    }

    /// The recovery pass of the event's message, committed (alone or with others), with the
    /// outbox rows it owes.
    pub(super) async fn recover(&self, event: &FinalizedEvent) -> Result<Report, Error> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            event: event.clone(),
            reply,
        };
        if self.jobs.send(job).is_err() {
            return Err(Error::Bug("the recovery committers have stopped".into()));
        }
        // A dropped reply means the committer panicked mid-batch (caught there); the
        // delivery is dead-lettered as a bug, like a panic on the delivery's own task.
        answer
            .await
            .unwrap_or_else(|_| Err(Error::Bug("panic in a recovery committer".into())))
    }
}

/// One committer: waits for a leak, takes the others already waiting (up to the batch
/// size), commits them, answers each.
async fn run(shared: Arc<Shared>) {
    loop {
        let batch = {
            // One committer at a time waits on the queue; the others wait for the lock, so
            // whoever is free takes everything queued so far.
            let mut queue = shared.queue.lock().await;
            let Some(first) = queue.recv().await else {
                return;
            };
            let mut batch = vec![first];
            while batch.len() < shared.per_commit {
                match queue.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        // A panic (a bug in a pass) drops the batch's reply senders, which their waiters
        // report as a bug; the committer itself lives on.
        let _ = AssertUnwindSafe(commit(&shared, batch))
            .catch_unwind()
            .await;
    }
}

async fn commit(shared: &Shared, batch: Vec<Job>) {
    if batch.len() > 1 {
        let envelopes = batch
            .iter()
            .map(|job| ForEvent(&job.event))
            .collect::<Vec<_>>();
        let items = batch
            .iter()
            .zip(&envelopes)
            .map(|(job, envelope)| BatchItem {
                message_id: job.event.message.id,
                source: source_of(&job.event),
                envelope: Some(envelope as &dyn recover::outbox::Envelope),
            })
            .collect::<Vec<_>>();
        let result = recover::recover_batch(&shared.pool, &shared.policy, items).await;
        match result {
            Ok(reports) => {
                shared.metrics.committed(reports.len());
                for (job, report) in batch.into_iter().zip(reports) {
                    let _ = job.reply.send(Ok(report));
                }
                return;
            }
            Err(e) => {
                tracing::debug!(size = batch.len(), error = %e, "batch rolled back; running its recoveries one by one");
            }
        }
    }
    for job in batch {
        let result = recover::recover_with_outbox(
            &shared.pool,
            job.event.message.id,
            &shared.policy,
            source_of(&job.event),
            Some(&ForEvent(&job.event)),
        )
        .await;
        if result.is_ok() {
            shared.metrics.committed(1);
        }
        let _ = job.reply.send(result);
    }
}

fn source_of(event: &FinalizedEvent) -> Source {
    Source::Event {
        event_id: event.event_id,
        model: event.message.model_id.clone(),
    }
}
