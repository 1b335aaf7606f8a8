//! `toolcall-recovery backfill`: recovery for the history that was written before the
//! worker ran. It walks `messages` by id ([`candidates`]: assistant messages whose content
//! holds a marker's anchor byte, keyset pages), examines each ([`examine`]: a detection
//! scan, then the recovery pass, asked for with [`crate::recover::Source::Backfill`]
//! through a group committer ([`crate::recover::committer`]), or rolled back in a dry run), republishes what changed for moderation
//! ([`crate::publish::Publisher`]), and records how far it got every `--batch-size` candidates
//! ([`checkpoint`]).
//!
//! - Pages are read ahead, on a task of their own (`reader`); candidates finish in any
//!   order (a leak waits for its recovery, the clean ones around it do not), and are
//!   reported, counted and checkpointed in id order (`window`): a slow recovery holds the
//!   checkpoint, not the walk. The loop is a type, `walk::Walk`, its state between turns.
//! - Progress (the bar, the `backfill progress` log line every 10 s, the
//!   `toolcall_recovery_backfill_progress` gauge) is shown every `--batch-size` candidates
//!   and every second, so it moves whatever `--rate`.
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
//! `/metrics`), `shutdown`, `ids`, `error`, `outbox` (the marker), `outbound` (the stand-in
//! envelope), `model`, `retry`, `sqlx`, `tokio`, its submodules. Never on `admin` or `cmd`.

pub mod candidates;
pub mod checkpoint;
pub mod examine;
pub mod output;
pub mod pace;
mod reader;
pub mod revisit;
mod summary;
pub mod transcripts;
mod walk;
mod window;

pub use summary::{ModelSummary, Summary};

use crate::error::Error;
use crate::metrics::Metrics;
use crate::outbox::Marker;
use crate::publish::{PublishTarget, Publisher};
use crate::recover::committer::Committer;
use crate::recover::{Mode, Policy};
use crate::settings::{
    DatabaseSettings, HttpLimits, ModelSettings, PolicySettings, PublishSettings,
};
use crate::shutdown::{self, Shutdown};
use crate::{http, store};
use examine::{Examiner, Passes};
use output::Reporter;
use reader::{Read, Reader};
use sqlx::PgPool;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use walk::{Walk, Walked, With};

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
    /// 64, as the worker's: fuller commits cost the database less per recovery.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=256))]
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

/// The run after its start: the revisit of observed messages (recover mode), the walk,
/// then what a finished run does, and the summary.
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
    let examiner = examiner(args, pool, metrics, publisher, stop.clone()).await?;
    let pacer = (args.rate > 0.0).then(|| pace::Pacer::new(args.rate));
    let mut summary = Summary {
        dry_run: args.dry_run,
        ..Summary::default()
    };
    let floor = args.since_id.map_or(0, |s| s.saturating_sub(1));
    if examiner.policy.mode == Mode::Recover && after > floor {
        let range = (floor, after.min(until));
        let concurrency = args.concurrency as usize;
        let pacer = pacer.as_ref();
        revisit::observed(
            &examiner,
            range,
            concurrency,
            pacer,
            &mut summary,
            &mut reporter,
        )
        .await?;
    }
    let reader = Reader::start(
        examiner.clone(),
        after,
        until,
        args.limit.unwrap_or(u64::MAX),
        u64::from(args.batch_size),
    );
    let with = With {
        args,
        examiner: &examiner,
        metrics,
        pacer: pacer.as_ref(),
        checkpoint: &name,
    };
    let walked = Walk::new(with, stop.clone(), (after, reader), summary, reporter)
        .run()
        .await;
    conclude(args, pool, walked, &stop, started).await
}

/// Everything examining a message needs: the dry run's bound or the run's committer.
async fn examiner(
    args: &BackfillArgs,
    pool: &PgPool,
    metrics: &Arc<Metrics>,
    publisher: Option<Arc<Publisher>>,
    stop: Shutdown,
) -> Result<Arc<Examiner>, Error> {
    let passes = if args.dry_run {
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
    };
    Ok(Arc::new(Examiner {
        model_column: candidates::ModelColumn::find(pool, &args.model_column).await?,
        models: args.models.models.clone(),
        passes,
        pool: pool.clone(),
        policy: args.policy(),
        publisher,
        metrics: metrics.clone(),
        stop,
    }))
}

/// How the walk ended, in the summary; a finished run's transcript repair and finished
/// checkpoint; the summary printed.
async fn conclude(
    args: &BackfillArgs,
    pool: &PgPool,
    walked: Walked<'_>,
    stop: &Shutdown,
    started: Instant,
) -> Result<Summary, Error> {
    let Walked {
        mut summary,
        mut reporter,
        fatal,
        interrupted,
        read_all,
    } = walked;
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
        checkpoint::finish(pool, &args.checkpoint_name()).await?;
    }
    summary.elapsed_secs = started.elapsed().as_secs_f64();
    reporter.finish(&summary);
    match fatal {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}
