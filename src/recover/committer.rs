//! Group commit: `committers` tasks, each one database transaction at a time, take the
//! recoveries waiting for them, up to `per_commit` at once, and run them in one transaction
//! ([`super::recover_batch`]). The worker and the backfill recover through one of these.
//!
//! Nothing waits to fill a batch: a committer takes what is queued when it becomes free, so
//! a lone leak is one transaction of its own, and batches grow only when leaks arrive
//! faster than `committers` transactions commit. Then one commit (one `fsync`, one
//! BEGIN/COMMIT round trip) serves several messages, which is where the dirty path's time
//! goes (BENCHMARKS.md §2, §3).
//!
//! A batch that fails is rolled back whole. When one message's pass failed for reasons of
//! its own (its row is missing or held by another transaction, its content is refused),
//! that message is taken out to run alone and the rest is committed without it; so a
//! message's error is its own and never another's, and the callers' retries and
//! dead-lettering see exactly what they saw without batching. When the database failed
//! (connection, deadlock), every message of the batch gets the error at once, to retry
//! with its caller's backoff, instead of trying each one alone against a database that is
//! down.
//!
//! May depend on: the rest of `recover`, `ids`, `error`, `tokio`, `sqlx`. No broker.

use super::{alone_on, batch_on, Envelope, Policy, Report, Request, Source};
use crate::error::Error;
use crate::ids::MessageId;
use futures_util::FutureExt;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot, Mutex};

/// The most a batch weighs ([`Envelope::weight`]) before it is cut: a batch holds every
/// message in it at once, several copies each (the content read, the cleaned text, the
/// ledger's before and after, the outbox body, the statement's parameters), so sixty-four large
/// messages in one transaction would hold sixty-four times what one does. Ordinary replies
/// (a few KB) never reach it; a message heavier than it is a batch of its own.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// Called after every commit with the number of recoveries it held (for a metric).
pub type OnCommit = Arc<dyn Fn(usize) + Send + Sync>;

/// One recovery waiting for a committer.
struct Job<E> {
    message_id: MessageId,
    source: Source,
    envelope: Option<E>,
    reply: oneshot::Sender<Result<Report, Error>>,
}

/// What the committers share.
struct Shared<E> {
    pool: PgPool,
    policy: Policy,
    per_commit: usize,
    on_commit: OnCommit,
    queue: Mutex<mpsc::UnboundedReceiver<Job<E>>>,
    warm: Warm,
}

/// A handle on the committers; they stop when it is dropped. `E` says what a recorded pass
/// owes the broker (written to the outbox in the same transaction).
pub struct Committer<E> {
    jobs: mpsc::UnboundedSender<Job<E>>,
}

impl<E: Envelope + Send + 'static> Committer<E> {
    /// Starts `committers` committers (the database transactions at once) that put up to
    /// `per_commit` recoveries in one transaction. Call it on the runtime.
    ///
    /// The queue needs no bound of its own: its callers bound what they hand it (the
    /// broker's prefetch window, the backfill's leaks in flight).
    pub fn start(
        pool: PgPool,
        policy: Policy,
        committers: usize,
        per_commit: usize,
        on_commit: OnCommit,
    ) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            pool,
            policy,
            per_commit: per_commit.max(1),
            on_commit,
            queue: Mutex::new(queue),
            warm: Warm::default(),
        });
        for _ in 0..committers.max(1) {
            tokio::spawn(run(shared.clone()));
        }
        Committer { jobs }
    }

    /// The recovery pass of `message_id`, committed (alone or with others), with the outbox
    /// rows `envelope` says it owes: [`super::recover`], group-committed (the three things
    /// of a [`super::Request`], the envelope owned: the pass runs on a committer's task).
    pub async fn recover(
        &self,
        message_id: MessageId,
        source: Source,
        envelope: Option<E>,
    ) -> Result<Report, Error> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            message_id,
            source,
            envelope,
            reply,
        };
        if self.jobs.send(job).is_err() {
            return Err(Error::Bug("the recovery committers have stopped".into()));
        }
        // A dropped reply means the committer panicked mid-batch (caught there); the
        // caller treats it like a panic of its own: a bug.
        answer
            .await
            .unwrap_or_else(|_| Err(Error::Bug("panic in a recovery committer".into())))
    }
}

/// How long a connection a committer gave back when it went to wait stays warm: the next
/// batch, whichever committer takes it, uses the freshest warm connection as it is, with no
/// checkout and no liveness ping (at a few leaks in a hundred each leak comes alone, and the
/// checkout with its ping was about a fifth of its cost). An older one goes back to the
/// pool, whose checkout pings. A warm connection that died meanwhile fails its batch, which
/// the callers retry, on a fresh one.
const KEEP_WARM: Duration = Duration::from_secs(1);

/// One committer: waits for a recovery, takes the others already waiting (up to the batch
/// size), commits them, answers each. It keeps its database connection while it has work
/// (no checkout, no liveness ping per batch) and leaves it warm ([`KEEP_WARM`]) when it
/// waits.
async fn run<E: Envelope + Send + 'static>(shared: Arc<Shared<E>>) {
    let mut held: Option<PoolConnection<Postgres>> = None;
    // A job taken that would have made the batch too heavy: the first of the next one.
    let mut carried: Option<Job<E>> = None;
    loop {
        let batch = match carried.take() {
            // Due now: it never waits on the queue (whoever holds the queue's lock may wait
            // for jobs that do not come); it takes company only if the queue is free.
            Some(first) => {
                let mut batch = Batch::new(first);
                if let Ok(mut queue) = shared.queue.try_lock() {
                    carried = batch.fill(&mut queue, shared.per_commit);
                }
                batch.jobs
            }
            None => {
                // One committer at a time waits on the queue; the others wait for the lock,
                // so whoever is free takes everything queued so far. Whoever waits leaves
                // its connection warm for whoever goes next.
                let mut queue = match shared.queue.try_lock() {
                    Ok(queue) => queue,
                    Err(_) => {
                        shared.warm.leave(held.take());
                        shared.queue.lock().await
                    }
                };
                let first = match queue.try_recv() {
                    Ok(job) => job,
                    Err(TryRecvError::Disconnected) => return,
                    Err(TryRecvError::Empty) => {
                        shared.warm.leave(held.take());
                        let Some(job) = queue.recv().await else {
                            return;
                        };
                        job
                    }
                };
                let mut batch = Batch::new(first);
                carried = batch.fill(&mut queue, shared.per_commit);
                batch.jobs
            }
        };
        if held.is_none() {
            held = shared.warm.take();
        }
        // A panic (a bug in a pass) drops the batch's reply senders, which their waiters
        // report as a bug; the committer itself lives on, on a fresh connection.
        let done = AssertUnwindSafe(commit(&shared, &mut held, batch))
            .catch_unwind()
            .await;
        if done.is_err() {
            held = None;
        }
    }
}

/// The connections committers left when they went to wait, freshest last.
#[derive(Default)]
struct Warm(std::sync::Mutex<Vec<(PoolConnection<Postgres>, Instant)>>);

impl Warm {
    fn leave(&self, conn: Option<PoolConnection<Postgres>>) {
        if let (Some(conn), Ok(mut warm)) = (conn, self.0.lock()) {
            warm.retain(|(_, left)| left.elapsed() <= KEEP_WARM);
            warm.push((conn, Instant::now()));
        }
    }

    /// The freshest connection left within [`KEEP_WARM`]; older ones go back to the pool.
    fn take(&self) -> Option<PoolConnection<Postgres>> {
        let mut warm = self.0.lock().ok()?;
        let fresh = warm.pop().filter(|(_, left)| left.elapsed() <= KEEP_WARM);
        warm.retain(|(_, left)| left.elapsed() <= KEEP_WARM);
        fresh.map(|(conn, _)| conn)
    }
}

/// The jobs of one transaction, and what they weigh.
struct Batch<E> {
    jobs: Vec<Job<E>>,
    weight: usize,
}

impl<E: Envelope> Batch<E> {
    fn new(first: Job<E>) -> Self {
        Batch {
            weight: weight_of(&first),
            jobs: vec![first],
        }
    }

    /// Takes the jobs already queued, up to `per_commit` and [`MAX_BATCH_BYTES`]; returns
    /// the job that would have made it too heavy, to be the first of the next batch.
    fn fill(
        &mut self,
        queue: &mut mpsc::UnboundedReceiver<Job<E>>,
        per_commit: usize,
    ) -> Option<Job<E>> {
        while self.jobs.len() < per_commit && self.weight < MAX_BATCH_BYTES {
            let Ok(job) = queue.try_recv() else {
                return None;
            };
            let weight = weight_of(&job);
            if self.weight + weight > MAX_BATCH_BYTES {
                return Some(job);
            }
            self.weight += weight;
            self.jobs.push(job);
        }
        None
    }
}

fn weight_of<E: Envelope>(job: &Job<E>) -> usize {
    job.envelope.as_ref().map_or(0, Envelope::weight)
}

/// Commits `batch` on the held connection (checked out first if none is held). After an
/// error the connection is given back: the next batch checks a fresh one out.
async fn commit<E: Envelope>(
    shared: &Shared<E>,
    held: &mut Option<PoolConnection<Postgres>>,
    batch: Vec<Job<E>>,
) {
    let conn = match held {
        Some(conn) => conn,
        None => match shared.pool.acquire().await {
            Ok(conn) => held.insert(conn),
            Err(e) => {
                let error = Error::from(e);
                for job in batch {
                    let _ = job.reply.send(Err(again(&error)));
                }
                return;
            }
        },
    };
    if !commit_on(shared, conn, batch).await {
        *held = None;
    }
}

/// Commits `batch` on `conn`; false when something failed.
async fn commit_on<E: Envelope>(
    shared: &Shared<E>,
    conn: &mut PgConnection,
    mut batch: Vec<Job<E>>,
) -> bool {
    let mut clean = true;
    let mut alone = Vec::new();
    while batch.len() > 1 {
        let items: Vec<Request> = batch
            .iter()
            .map(|job| Request {
                message_id: job.message_id,
                source: job.source.clone(),
                envelope: job.envelope.as_ref().map(|e| e as &dyn Envelope),
            })
            .collect();
        let result = batch_on(conn, &shared.policy, &items).await;
        drop(items);
        match result {
            Ok(reports) => {
                (shared.on_commit)(reports.len());
                for (job, report) in batch.drain(..).zip(reports) {
                    let _ = job.reply.send(Ok(report));
                }
            }
            Err(e) if e.is_the_items_own() => {
                let i = e.failed.unwrap_or(0).min(batch.len() - 1);
                tracing::debug!(size = batch.len(), error = %e.error, "a recovery failed in its batch; it runs alone, the others again without it");
                alone.push(batch.remove(i));
            }
            Err(e) if e.error.is_transient() => {
                clean = false;
                tracing::debug!(size = batch.len(), error = %e.error, "batch rolled back; its recoveries are retried");
                for job in batch.drain(..) {
                    let _ = job.reply.send(Err(again(&e.error)));
                }
            }
            Err(e) => {
                clean = false;
                tracing::debug!(size = batch.len(), error = %e.error, "batch rolled back; running its recoveries one by one");
                alone.append(&mut batch);
            }
        }
    }
    // What is left of the batch (one recovery, or none) first: the ones taken out may wait
    // (a row the app holds), and must not hold up one that can go now.
    batch.append(&mut alone);
    for job in batch {
        let item = Request {
            message_id: job.message_id,
            source: job.source,
            envelope: job.envelope.as_ref().map(|e| e as &dyn Envelope),
        };
        let result = alone_on(conn, &shared.policy, item).await;
        match &result {
            Ok(_) => (shared.on_commit)(1),
            Err(_) => clean = false,
        }
        let _ = job.reply.send(result);
    }
    clean
}

/// The error of a batch for each of its recoveries (an error cannot be cloned): the same
/// kind (transient), the same dependency (database), the same text.
fn again(error: &Error) -> Error {
    Error::Database(sqlx::Error::Io(std::io::Error::other(format!(
        "{error} (in a batch of recoveries)"
    ))))
}
