//! `toolcall-recovery backfill`: recovery for the history that was written before the
//! worker ran. It walks `messages` by id ([`candidates`]: assistant messages whose content
//! holds a marker's anchor byte, keyset pages), examines each ([`examine`]: a detection
//! scan, then THE recovery transaction [`crate::recover::recover_message`], with
//! [`crate::recover::Source::Backfill`]), republishes what changed for moderation
//! ([`crate::publish::Publisher`]), and records how far it got every `--batch-size` candidates
//! ([`checkpoint`]).
//!
//! - Pages are read ahead, on a task of their own (`reader`); candidates finish in any
//!   order (a leak waits for its recovery, the clean ones around it do not), and are
//!   reported, counted and checkpointed in id order (`window`): a slow recovery holds the
//!   checkpoint, not the walk.
//! - A recover-mode run first revisits messages an observe-mode pass recorded
//!   ([`revisit`]).
//! - `--dry-run` runs the same transaction body and rolls it back: it reports exactly what a
//!   real run would do and writes nothing (not even the checkpoint).
//! - Resumable: Ctrl-C (or SIGTERM) stops taking messages, lets those in flight finish,
//!   saves the checkpoint and prints the summary; the next run starts after it. Running
//!   twice changes nothing the second time: recovery itself is idempotent.
//! - By model: the summary counts examined messages, leaks and unrecovered calls by the
//!   model that wrote them, read from the app's `messages` table when it has the column
//!   `--model-column` names ([`candidates::ModelColumn`]), labelled as the worker's metrics
//!   are (`--models`).
//! - Bounded: `--concurrency` transactions at once (default 2), each of up to
//!   `--recoveries-per-commit` leaks (group commit), on a pool of its own of
//!   `concurrency + 1` connections (and, when it publishes, one that marks publishes sent),
//!   so it never takes the live worker's connections; and,
//!   when asked, `--rate` recoveries per second ([`pace`]; rows that need no recovery are
//!   not paced; default: no cap).
//!
//! May depend on: `recover`, `publish`, `store`, `settings`, `metrics`, `http` (optional
//! `/metrics`), `shutdown`, `ids`, `error`, its submodules. Never on `admin` or `cmd`.

pub mod candidates;
pub mod checkpoint;
pub mod examine;
pub mod output;
pub mod pace;
mod reader;
pub mod revisit;
pub mod transcripts;
mod window;

pub use output::Summary;

use crate::error::Error;
use crate::metrics::Metrics;
use crate::publish::outbox::Marker;
use crate::publish::{PublishTarget, Publisher};
use crate::recover::committer::Committer;
use crate::recover::{Mode, Policy};
use crate::settings::{
    DatabaseSettings, HttpLimits, ModelSettings, PolicySettings, PublishSettings,
};
use crate::shutdown::{self, Shutdown};
use crate::{http, store};
use checkpoint::Step;
use examine::{Examined, Examiner, Passes};
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use output::Reporter;
use reader::{Read, Reader};
use sqlx::PgPool;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use toolcall_detect::Detection;
use window::{Slot, Window};

/// `application_name` of the backfill's database connections (tell them apart from the
/// worker's in `pg_stat_activity`).
pub const APPLICATION_NAME: &str = "toolcall-recovery-backfill";

/// Flags of `toolcall-recovery backfill`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackfillArgs {
    /// The database. `--db-max-connections` caps the backfill's own pool, which holds at
    /// most `--concurrency` + 1 connections.
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// Where recovered messages and forwarded calls are republished.
    #[command(flatten)]
    pub publish: PublishSettings,

    /// Name of the backfill's broker connection.
    #[arg(long, default_value = "toolcall-recovery-backfill")]
    pub connection_name: String,

    /// The recovery policy, as for `run`: memory types, `--mode` (an observe-mode backfill
    /// records what it would do and changes nothing else), family switches.
    #[command(flatten)]
    pub policy: PolicySettings,

    /// The models the summary's breakdown by model keeps apart (as for `run`).
    #[command(flatten)]
    pub models: ModelSettings,

    /// Column of the app's `messages` table that names the model which wrote each message
    /// (read as text, normalised like an event's model_id), for the summary's breakdown by
    /// model and the ledger. Used only when the table has it (checked once at start);
    /// otherwise, or when empty, every message's model is `unknown`.
    #[arg(long, env = "TCR_MODEL_COLUMN", default_value = "model_id")]
    pub model_column: String,

    /// Report what would happen; write nothing, publish nothing, keep the checkpoint.
    #[arg(long)]
    pub dry_run: bool,

    /// Machine-readable output: one JSON object per message that is not clean, then
    /// `{"summary": ...}`.
    #[arg(long)]
    pub json: bool,

    /// Do not publish recovered messages for moderation, nor forwarded calls (the ledger
    /// keeps both).
    #[arg(long)]
    pub no_publish: bool,

    /// First message id to examine (inclusive).
    #[arg(long)]
    pub since_id: Option<i64>,

    /// Last message id to examine (inclusive).
    #[arg(long)]
    pub until_id: Option<i64>,

    /// Messages read per page (and per checkpoint save).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_size: u32,

    /// Recoveries started per second at most (the transactions that write: what costs the
    /// live database); rows that need none, most of them, are not limited. 0 (the default):
    /// no cap beyond `--concurrency`, so a run goes as fast as its transactions commit.
    #[arg(long, default_value_t = 0.0, value_parser = non_negative)]
    pub rate: f64,

    /// Recovery transactions at once: the bound on the backfill's load on the database
    /// (its own pool holds one more connection). With group commit, 2 already goes faster
    /// than the bare one-per-commit recovery transaction at its best (BENCHMARKS.md §3).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub concurrency: u32,

    /// Most leaks one recovery transaction holds when leaks queue up (group commit: one
    /// commit for several); a lone leak is never held back. 1 commits each alone.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub recoveries_per_commit: u32,

    /// Stop after examining this many messages (the checkpoint keeps the place).
    #[arg(long)]
    pub limit: Option<u64>,

    /// Name of the checkpoint. Default: `default` for a run over all ids, `ids-<since>-<until>`
    /// for a bounded one, so a bounded run never moves the checkpoint of the full walk.
    #[arg(long)]
    pub checkpoint: Option<String>,

    /// Ignore (and, unless dry, delete) the checkpoint and start from `--since-id`.
    #[arg(long)]
    pub restart: bool,

    /// Also name every `role='tool'` message with an empty `tool_name`, across all chats.
    #[arg(long)]
    pub repair_transcripts: bool,

    /// Serve `/metrics` on this address while running (e.g. `127.0.0.1:9091`).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of messages per second (0 = no limit)"
        )),
    }
}

impl BackfillArgs {
    /// The checkpoint this run reads and writes.
    pub fn checkpoint_name(&self) -> String {
        if let Some(name) = &self.checkpoint {
            return name.clone();
        }
        let bound = |b: Option<i64>, open: &str| b.map_or(open.to_string(), |i| i.to_string());
        match (self.since_id, self.until_id) {
            (None, None) => "default".to_string(),
            (a, b) => format!("ids-{}-{}", bound(a, "start"), bound(b, "end")),
        }
    }

    /// The recovery policy.
    pub fn policy(&self) -> Policy {
        self.policy.policy()
    }
}

/// Runs the backfill until done, `--limit`, or Ctrl-C / SIGTERM; prints to stdout.
pub async fn run(args: BackfillArgs) -> Result<Summary, Error> {
    let (trigger, stop) = shutdown::channel();
    let signals = tokio::spawn(shutdown::on_signals(trigger));
    let mut stdout = std::io::stdout();
    let result = run_with(args, stop, &mut stdout).await;
    signals.abort();
    result
}

/// [`run`] with the stop signal and the output given (for tests and embedding).
pub async fn run_with(
    args: BackfillArgs,
    stop: Shutdown,
    out: &mut (dyn Write + Send),
) -> Result<Summary, Error> {
    let started = Instant::now();
    if let (Some(a), Some(b)) = (args.since_id, args.until_id) {
        if a > b {
            return Err(Error::Startup(format!(
                "--since-id {a} is above --until-id {b}"
            )));
        }
    }
    let pool =
        store::connect_command(&args.database, APPLICATION_NAME, args.concurrency + 1).await?;
    store::ensure_migrated(&pool, false).await?;
    let metrics = Arc::new(Metrics::new());
    let http = serve_metrics(args.metrics_addr, &metrics, &pool).await?;
    let (publisher, marking) = open_publisher(&args, &metrics).await?;
    let result = walk(
        &args,
        &pool,
        &metrics,
        publisher.clone(),
        stop,
        out,
        started,
    )
    .await;
    if let Some(p) = publisher {
        p.close().await;
    }
    if let Some(marking) = marking {
        // The publisher and its marker are gone: the marking task writes the last marks
        // and ends. A mark lost here only means a worker's relay sends the row again.
        let _ = tokio::time::timeout(Duration::from_secs(5), marking).await;
    }
    if let Some(h) = http {
        h.abort();
    }
    pool.close().await;
    result
}

/// Candidates started ahead of the oldest unfinished one, at most. A finished one waits
/// here (its result, about 150 bytes) until everything before it is done, so output,
/// summary and checkpoint follow id order while the walk goes on past a slow recovery.
/// Clean candidates are examined at a few hundred thousand a second, so this is tens of
/// milliseconds of walk: several recovery transactions.
const WINDOW: usize = 16_384;

/// Leaks being examined at once, at most: each waits for one of the `--concurrency`
/// recoveries on a task of its own (a few KiB). Enough to keep the recoveries busy; beyond
/// it the walk waits, as it does at a full [`WINDOW`].
const LEAKS_IN_FLIGHT: usize = 128;

/// Candidates started per turn of the walk, and finished examinations taken per turn: a
/// clean candidate finishes on its first poll, so this bounds how many wait at once.
const PER_TURN: usize = 256;

async fn serve_metrics(
    addr: Option<SocketAddr>,
    metrics: &Arc<Metrics>,
    pool: &PgPool,
) -> Result<Option<JoinHandle<()>>, Error> {
    let Some(addr) = addr else { return Ok(None) };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Startup(format!("cannot listen on {addr}: {e}")))?;
    let addr = listener.local_addr().unwrap_or(addr);
    let app = http::router(http::AppState {
        metrics: metrics.clone(),
        pool: pool.clone(),
        broker_ready: Arc::new(AtomicBool::new(true)),
    });
    tracing::info!(%addr, "backfill metrics on /metrics");
    Ok(Some(tokio::spawn(async move {
        // Never fired: the run aborts the task when it ends. Held here, since a dropped
        // trigger means shutdown.
        let (_keep, never) = shutdown::channel();
        http::serve(listener, app, HttpLimits::default(), never).await;
    })))
}

/// The publisher of a real run that publishes, connected before any work so an
/// unreachable broker stops the run before it changes anything, and the task that marks
/// what it sent (batched, on one more connection with `synchronous_commit = off`, as the
/// worker does), to await at the end of the run.
async fn open_publisher(
    args: &BackfillArgs,
    metrics: &Arc<Metrics>,
) -> Result<(Option<Arc<Publisher>>, Option<JoinHandle<()>>), Error> {
    if args.dry_run || args.no_publish {
        return Ok((None, None));
    }
    let (marker, marking) =
        Marker::start(store::connect_options(&args.database)?.application_name(APPLICATION_NAME));
    let publisher = Publisher::new(
        PublishTarget::from_settings(&args.publish, &args.connection_name),
        metrics.clone(),
    )
    .marking_with(marker);
    publisher.connect().await?;
    Ok((Some(Arc::new(publisher)), Some(marking)))
}

/// Where the walk starts: after the checkpoint, and not before `--since-id`.
async fn start_after(args: &BackfillArgs, pool: &PgPool) -> Result<i64, Error> {
    let name = args.checkpoint_name();
    let floor = args.since_id.map_or(0, |s| s.saturating_sub(1));
    if args.restart {
        if !args.dry_run {
            checkpoint::reset(pool, &name).await?;
        }
        return Ok(floor);
    }
    let resume = checkpoint::load(pool, &name).await?;
    if let Some(id) = resume {
        tracing::info!(checkpoint = %name, last_message_id = id, "resuming after the checkpoint");
    }
    Ok(resume.map_or(floor, |id| id.max(floor)))
}

#[allow(clippy::too_many_arguments)]
async fn walk(
    args: &BackfillArgs,
    pool: &PgPool,
    metrics: &Arc<Metrics>,
    publisher: Option<Arc<Publisher>>,
    stop: Shutdown,
    out: &mut (dyn Write + Send),
    started: Instant,
) -> Result<Summary, Error> {
    let name = args.checkpoint_name();
    let until = args.until_id.unwrap_or(i64::MAX);
    let after = start_after(args, pool).await?;
    let mut reporter = Reporter::new(
        out,
        args.json,
        after,
        candidates::last_id(pool, until).await?,
    );
    let model_column = candidates::ModelColumn::find(pool, &args.model_column).await?;
    let examiner = Arc::new(Examiner {
        model_column,
        models: args.models.models.clone(),
        passes: if args.dry_run {
            Passes::DryRun(Semaphore::new(args.concurrency.max(1) as usize))
        } else {
            let metrics = metrics.clone();
            Passes::Commit(Committer::start(
                pool.clone(),
                args.policy(),
                args.concurrency.max(1) as usize,
                args.recoveries_per_commit.max(1) as usize,
                Arc::new(move |n| metrics.committed(n)),
            ))
        },
        pool: pool.clone(),
        policy: args.policy(),
        publisher,
        metrics: metrics.clone(),
        stop: stop.clone(),
    });
    let pacer = (args.rate > 0.0).then(|| pace::Pacer::new(args.rate));
    let mut summary = Summary {
        dry_run: args.dry_run,
        ..Summary::default()
    };
    let floor = args.since_id.map_or(0, |s| s.saturating_sub(1));
    if examiner.policy.mode == Mode::Recover && after > floor {
        revisit::observed(
            &examiner,
            pool,
            (floor, after.min(until)),
            args.concurrency as usize,
            pacer.as_ref(),
            &stop,
            &mut summary,
            &mut reporter,
        )
        .await?;
    }
    let batch = u64::from(args.batch_size);
    let mut reader = Reader::start(
        examiner.clone(),
        after,
        until,
        args.limit.unwrap_or(u64::MAX),
        batch,
    );
    let save = |step: Step| {
        let examiner = &examiner;
        let name = &name;
        async move {
            examiner
                .retrying(|| checkpoint::save(pool, name, step, args.since_id, args.until_id))
                .await
        }
    };

    let mut window = Window::default();
    let mut running = FuturesUnordered::new();
    let mut leaks = 0;
    let mut finished = Vec::with_capacity(PER_TURN);
    let mut page = Vec::new().into_iter();
    // The leak taken from the page that waits for its rate slot: the walk paces what costs
    // the database (recoveries), not rows examined, and takes nothing past a waiting leak,
    // so candidates still start (and are checkpointed) in id order. A leak that waits has
    // not been started, and Ctrl-C does not wait for it.
    let mut waiting: Option<(candidates::Candidate, Detection)> = None;
    let mut read_all: Option<Read> = None;
    let mut taking = true;
    let mut interrupted = false;
    let mut fatal: Option<Error> = None;
    let mut tick: Option<Boxed<'_, ()>> = None;
    let mut paced = pacer.is_none();
    let mut saving: Option<Boxed<'_, Result<(), Error>>> = None;
    let mut unsaved = Step {
        last_message_id: after,
        examined: 0,
        changed: 0,
    };
    let mut unreported = 0u64;
    let mut stopped = stop.clone();
    loop {
        if taking && stop.is_shutdown() {
            taking = false;
            interrupted = read_all.is_none() || !page.as_slice().is_empty() || waiting.is_some();
        }
        let mut started = 0;
        while taking
            && started < PER_TURN
            && leaks < LEAKS_IN_FLIGHT
            && window.len() < WINDOW
            && (waiting.is_some() || !page.as_slice().is_empty())
        {
            let (c, detection) = match waiting.take() {
                Some(leak) => (leak.0, Some(leak.1)),
                None => {
                    let Some(c) = page.next() else { break };
                    let detection = examine::leaks(&c, &examiner.policy.detect);
                    (c, detection)
                }
            };
            if !paced && detection.is_some() {
                if let Some(p) = &pacer {
                    tick.get_or_insert_with(|| Box::pin(p.tick()));
                }
                waiting = detection.map(|d| (c, d));
                break;
            }
            if detection.is_some() {
                paced = pacer.is_none();
            }
            started += 1;
            let (examination, leak) = examine_one(&examiner, window.start(), c, detection);
            leaks += usize::from(leak);
            running.push(examination);
        }
        let read_to_end = read_all.is_some() && page.as_slice().is_empty() && waiting.is_none();
        if running.is_empty() && (!taking || read_to_end) {
            break;
        }
        let want_page =
            taking && read_all.is_none() && page.as_slice().is_empty() && waiting.is_none();
        // Biased, and the walk's own results last: the others are ready once each, and a
        // save or a rate tick must not wait behind a stream of clean candidates.
        tokio::select! {
            biased;
            () = stopped.wait(), if taking => {}
            saved = await_some(&mut saving), if saving.is_some() => {
                saving = None;
                if let Err(e) = saved {
                    taking = false;
                    keep_first(&mut fatal, e);
                }
            }
            () = await_some(&mut tick), if taking && tick.is_some() => {
                tick = None;
                paced = true;
            }
            read = reader.pages.recv(), if want_page => match read {
                Some(Ok(Read::Page(p))) => page = p.into_iter(),
                Some(Ok(end)) => read_all = Some(end),
                Some(Err(e)) => {
                    taking = false;
                    keep_first(&mut fatal, e);
                }
                None => {
                    taking = false;
                    keep_first(&mut fatal, Error::Bug("the page reader stopped".into()));
                }
            },
            () = take_finished(&mut running, &mut finished), if !running.is_empty() => {
                for (seq, leak, result) in finished.drain(..) {
                    leaks -= usize::from(leak);
                    match result {
                        Ok(e) => window.finish(seq, Slot::Done(e)),
                        Err(e) => {
                            window.finish(seq, Slot::Failed);
                            taking = false;
                            keep_first(&mut fatal, e);
                        }
                    }
                }
            }
            else => {
                keep_first(&mut fatal, Error::Bug("the walk had nothing to wait for".into()));
                break;
            }
        }
        while let Some(e) = window.pop_done() {
            summary.add(&e);
            reporter.message(&e);
            unsaved.last_message_id = e.message_id;
            unsaved.examined += 1;
            unsaved.changed += i64::from(e.changed);
            unreported += 1;
        }
        if unreported >= batch {
            unreported = 0;
            metrics.backfill_progress(unsaved.last_message_id);
            reporter.progress(unsaved.last_message_id, &summary);
        }
        if !args.dry_run && saving.is_none() && unsaved.examined as u64 >= batch {
            saving = Some(Box::pin(save(unsaved)));
            unsaved.examined = 0;
            unsaved.changed = 0;
        }
    }
    drop(reader);
    if let Some(saved) = saving.take() {
        if let Err(e) = saved.await {
            keep_first(&mut fatal, e);
        }
    }
    if unsaved.examined > 0 {
        if !args.dry_run {
            if let Err(e) = save(unsaved).await {
                keep_first(&mut fatal, e);
            }
        }
        metrics.backfill_progress(unsaved.last_message_id);
    }
    // Past a failed examination: done and reported, but not covered by the checkpoint.
    for e in window.done_past_failure() {
        summary.add(&e);
        reporter.message(&e);
    }
    reporter.progress(unsaved.last_message_id, &summary);
    if fatal.is_none() {
        summary.interrupted = interrupted;
        summary.finished = !interrupted && matches!(read_all, Some(Read::End));
        summary.limit_reached = !interrupted && matches!(read_all, Some(Read::Limit));
    }
    if summary.finished && args.repair_transcripts && !stop.is_shutdown() {
        let repaired =
            transcripts::repair_all(pool, i64::from(args.batch_size), args.dry_run).await?;
        summary.transcripts = Some(repaired);
    }
    if summary.finished && !args.dry_run && summary.examined > 0 {
        checkpoint::finish(pool, &name).await?;
    }
    summary.elapsed_secs = started.elapsed().as_secs_f64();
    reporter.finish(&summary);
    match fatal {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// The first error ends the run and is returned; later ones (the run is draining) are logged.
fn keep_first(fatal: &mut Option<Error>, e: Error) {
    match fatal {
        None => *fatal = Some(e),
        // The first is the run's error (said at ERROR as the run ends); later ones are the
        // same fault seen again while stopping.
        Some(_) => tracing::warn!(error = %e, "backfill: a further error while stopping"),
    }
}

/// One candidate's examination, tagged with its place in the [`Window`] and whether it
/// runs on a task of its own (a leak, by detection).
///
/// A leak is examined on a task of its own: its recovery is about ten round trips to the
/// database, and a task is polled on the runtime thread that receives its I/O, while the
/// walk is polled wherever its caller runs it (the binary's main thread), where each round
/// trip would cost two thread wake-ups. The others finish on their first poll, in the walk.
/// Either way the outcome is `examine`'s; detection here only chooses where it runs.
///
/// Boxed here, once: the future is a few KiB (it has room for a recovery), and
/// `FuturesUnordered` would otherwise copy it into its task several times.
fn examine_one(
    examiner: &Arc<Examiner>,
    seq: u64,
    c: candidates::Candidate,
    detection: Option<Detection>,
) -> (Boxed<'_, Examination>, bool) {
    let Some(detection) = detection else {
        return (
            Box::pin(async move { (seq, false, examiner.examine_detected(c, None).await) }),
            false,
        );
    };
    let examiner = examiner.clone();
    let task = tokio::spawn(async move { examiner.examine_detected(c, Some(detection)).await });
    let examination = Box::pin(async move {
        let result = task
            .await
            .unwrap_or_else(|e| Err(Error::Bug(format!("examining a message: {e}"))));
        (seq, true, result)
    });
    (examination, true)
}

/// A future of the walk's, boxed.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A finished examination: its place in the [`Window`], whether it was a leak on a task of
/// its own, and what came of it.
type Examination = (u64, bool, Result<Examined, Error>);

/// Waits until an examination has finished, then takes it and the others already finished
/// (up to [`PER_TURN`]): one wake-up of the walk serves many clean candidates.
fn take_finished<'a, F: Future>(
    running: &'a mut FuturesUnordered<F>,
    into: &'a mut Vec<F::Output>,
) -> impl Future<Output = ()> + 'a {
    std::future::poll_fn(move |cx| {
        while into.len() < PER_TURN {
            match running.poll_next_unpin(cx) {
                Poll::Ready(Some(out)) => into.push(out),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if into.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
}

/// The future in `slot`, awaited (for a `select!` branch enabled only while there is one).
async fn await_some<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    match slot {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
