//! `toolcall-recovery backfill`: recovery for the history that was written before the
//! worker ran. It walks `messages` by id ([`candidates`]: assistant messages whose content
//! holds a marker's anchor byte, keyset pages), examines each ([`examine`]: a detection
//! scan, then THE recovery transaction [`crate::recover::recover_message`], with
//! [`crate::recover::Source::Backfill`]), republishes what changed for moderation
//! ([`republish`]), and records how far it got after every page ([`checkpoint`]).
//!
//! - `--dry-run` runs the same transaction body and rolls it back: it reports exactly what a
//!   real run would do and writes nothing (not even the checkpoint).
//! - Resumable: Ctrl-C (or SIGTERM) stops taking messages, lets those in flight finish,
//!   saves the checkpoint and prints the summary; the next run starts after it. Running
//!   twice changes nothing the second time: recovery itself is idempotent.
//! - Bounded: `--rate` messages per second ([`pace`]), `--concurrency` transactions at
//!   once, on a pool of its own of `concurrency + 1` connections, so it never takes the
//!   live worker's connections.
//!
//! May depend on: `recover`, `store`, `settings`, `metrics`, `http` (optional `/metrics`),
//! `shutdown`, `event`, `amqp` (names), `error`, its submodules.

pub mod candidates;
pub mod checkpoint;
pub mod examine;
pub mod output;
pub mod pace;
pub mod republish;
pub mod revisit;
pub mod transcripts;

pub use examine::what_if;
pub use output::Summary;

use crate::error::Error;
use crate::metrics::Metrics;
use crate::recover::{Mode, Policy};
use crate::settings::{DatabaseSettings, LogFormat, PolicySettings, PublishSettings};
use crate::shutdown::{self, Shutdown};
use crate::{http, store};
use checkpoint::Step;
use examine::Examiner;
use futures_util::{stream, StreamExt};
use output::Reporter;
use republish::{PublishTarget, Publisher};
use sqlx::PgPool;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

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

    /// Messages examined per second at most; 0 for no limit.
    #[arg(long, default_value_t = 50.0, value_parser = non_negative)]
    pub rate: f64,

    /// Messages recovered at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub concurrency: u32,

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

    /// Log format (logs go to stderr; the report to stdout).
    #[arg(long, env = "TCR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
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
    let publisher = open_publisher(&args).await?;
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
    if let Some(h) = http {
        h.abort();
    }
    pool.close().await;
    result
}

/// Candidates examined ahead of the oldest unfinished one. Output and checkpoint stay in id
/// order (`buffered`); recoveries are bounded separately by `--concurrency`. With a window
/// of `--concurrency` alone, leaks a few hundred candidates apart were recovered one after
/// the other, each stalling the walk for a transaction.
const EXAMINE_AHEAD: usize = 1024;

async fn serve_metrics(
    addr: Option<SocketAddr>,
    metrics: &Arc<Metrics>,
    pool: &PgPool,
) -> Result<Option<tokio::task::JoinHandle<()>>, Error> {
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
        let _ = axum::serve(listener, app).await;
    })))
}

/// The publisher of a real run that publishes, connected before any work so an
/// unreachable broker stops the run before it changes anything.
async fn open_publisher(args: &BackfillArgs) -> Result<Option<Arc<Publisher>>, Error> {
    if args.dry_run || args.no_publish {
        return Ok(None);
    }
    let publisher = Publisher::new(PublishTarget::from_settings(
        &args.publish,
        &args.connection_name,
    ));
    publisher.connect().await?;
    Ok(Some(Arc::new(publisher)))
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
    let mut after = start_after(args, pool).await?;
    let mut reporter = Reporter::new(
        out,
        args.json,
        after,
        candidates::last_id(pool, until).await?,
    );
    let examiner = Examiner {
        recoveries: Arc::new(Semaphore::new(args.concurrency.max(1) as usize)),
        pool: pool.clone(),
        policy: args.policy(),
        dry_run: args.dry_run,
        publisher,
        metrics: metrics.clone(),
        pacer: pace::Pacer::new(args.rate),
        stop: stop.clone(),
    };
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
            &stop,
            &mut summary,
            &mut reporter,
        )
        .await?;
    }
    let mut remaining = args.limit.unwrap_or(u64::MAX);
    let batch = u64::from(args.batch_size);
    // The next page is read while this one's recoveries run: a page with a few leaks would
    // otherwise pay their transaction latencies and the next read one after the other.
    let mut prefetched: Option<Result<Vec<candidates::Candidate>, Error>> = None;
    let result = loop {
        if stop.is_shutdown() {
            summary.interrupted = true;
            break Ok(());
        }
        if remaining == 0 {
            summary.limit_reached = true;
            break Ok(());
        }
        let want = remaining.min(batch) as i64;
        let page = match prefetched.take() {
            Some(page) => page,
            None => {
                examiner
                    .retrying(|| candidates::page(pool, after, until, want))
                    .await
            }
        };
        let page = match page {
            Ok(page) => page,
            Err(e) => break Err(e),
        };
        if page.is_empty() {
            summary.finished = true;
            break Ok(());
        }
        let read = page.len();
        let next_after = page.last().map_or(after, |c| c.id);
        let next_want = remaining.saturating_sub(read as u64).min(batch) as i64;
        let examine = examine_page(&examiner, page, args, &stop, &mut summary, &mut reporter);
        let read_next = async {
            if next_want == 0 {
                return None;
            }
            Some(
                examiner
                    .retrying(|| candidates::page(pool, next_after, until, next_want))
                    .await,
            )
        };
        let ((step, fatal), next) = tokio::join!(examine, read_next);
        prefetched = next;
        if step.examined > 0 {
            after = step.last_message_id;
            if !args.dry_run {
                checkpoint::save(pool, &name, step, args.since_id, args.until_id).await?;
            }
            metrics.backfill_progress(after);
        }
        reporter.progress(after, &summary);
        if let Some(e) = fatal {
            break Err(e);
        }
        if (step.examined as usize) < read {
            summary.interrupted = true;
            break Ok(());
        }
        remaining = remaining.saturating_sub(read as u64);
    };
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
    result.map(|()| summary)
}

/// Examines one page, `--concurrency` at a time, results taken in id order so the
/// checkpoint only ever covers a prefix that is entirely done. On Ctrl-C no further
/// message is started; those in flight finish.
async fn examine_page(
    examiner: &Examiner,
    page: Vec<candidates::Candidate>,
    args: &BackfillArgs,
    stop: &Shutdown,
    summary: &mut Summary,
    reporter: &mut Reporter<'_>,
) -> (Step, Option<Error>) {
    let mut step = Step {
        last_message_id: 0,
        examined: 0,
        changed: 0,
    };
    let mut stopped = stop.clone();
    let mut results = stream::iter(page)
        .take_until(Box::pin(async move { stopped.wait().await }))
        .map(|c| examiner.examine(c))
        .buffered(EXAMINE_AHEAD.max(args.concurrency as usize));
    while let Some(r) = results.next().await {
        match r {
            Ok(e) => {
                step.last_message_id = e.message_id;
                step.examined += 1;
                step.changed += i64::from(e.changed);
                summary.add(&e);
                reporter.message(&e);
            }
            Err(e) => return (step, Some(e)),
        }
    }
    (step, None)
}
