//! The load harness: seeds PostgreSQL, publishes message-finalized events, waits until the
//! worker has moved all of them to the moderation exchange, and reports rate, latency,
//! the worker's CPU (utime + stime from /proc, in total and per event) and memory, and
//! database commits. The worker runs with its own defaults unless `--prefetch`/
//! `--concurrency` are given. Next to it, in the same run and on the same broker and
//! database, the ceilings, each the best the bare component reaches on this machine:
//! - `forwarder`: consume -> publish to a durable quorum queue with confirm -> ack after the
//!   confirm, no detection, no database (the clean-path ceiling), in a process of its own
//!   (this harness run again with `--forwarder-only`), so that its CPU is its own; swept over
//!   its window of deliveries in flight (`--forwarder-windows`); the best window is the
//!   ceiling;
//! - `txn`: the worker's recovery transaction alone, no broker (the dirty-path ceiling), swept
//!   over client counts (`--txn-clients`); the best count is the ceiling. One recovery per
//!   commit (`recover::recover`, the outbox row included) and, for
//!   `--txn-per-commit 16`, 16 messages in one transaction, ids ascending, both with the
//!   statements of one message at a time (`per-message`) and with the statements of a
//!   batch (`batched`: `recover::recover_batch`, one `unnest` statement per kind).
//!
//! Two ways to feed the consumers (`--feeds`): `drain` queues every event first, then starts
//! the consumer and measures from the first moderation message to the last (time and CPU
//! over the drain: what a consumer costs per event with nothing else running); `live`
//! publishes while the consumer runs (from the first publish to the last arrival), the
//! load generator sharing the cores with it.
//!
//! ```sh
//! cargo build --release && cargo run --release --example load -- --events 20000 --leak-share 0.02
//! cargo run --example load -- --smoke      # CI: small runs of every workload, checks counts only
//! ```
//! Every run uses a fresh database and fresh exchange/queue names and drops nothing it
//! did not create. Every workload checks its exact effects (moderation messages, memories,
//! rows left dirty). Traffic goes only to the local services named by the URLs.

use clap::Parser;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;
use toolcall_recovery::ids::MessageId;
use toolcall_recovery::outbound::StandIn;
use toolcall_recovery::recover::{recover, recover_batch, recover_in, Source};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[derive(Parser, Debug, Clone)]
#[command(about = "Load harness for toolcall-recovery (see BENCHMARKS.md)")]
struct Args {
    /// Events per workload.
    #[arg(long, default_value_t = 20_000)]
    events: usize,
    /// Share of events whose message holds a leak (0.0-1.0).
    #[arg(long, default_value_t = 0.02)]
    leak_share: f64,
    /// Publish rate in events per second; 0 publishes as fast as confirms allow.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Worker processes on the one queue.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Worker prefetch; unset: the worker's default.
    #[arg(long)]
    prefetch: Option<u16>,
    /// Worker concurrency; unset: the worker's default.
    #[arg(long)]
    concurrency: Option<usize>,
    /// Worker recoveries per commit; unset: the worker's default.
    #[arg(long)]
    recoveries_per_commit: Option<usize>,
    /// Deliveries in flight the bare forwarder is run at; the best is the ceiling.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128,256,512")]
    forwarder_windows: Vec<usize>,
    /// Clients the bare recovery transaction is run at; the best is the ceiling.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    txn_clients: Vec<usize>,
    /// Recoveries per commit of the bare transaction: 1 is one message per transaction, more
    /// are that many messages in one transaction, ids ascending (the worker's group commit).
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    txn_per_commit: Vec<usize>,
    /// The statements of several recoveries in one transaction: `batched` (one statement per
    /// kind for all of them, what the worker does) and/or `per-message` (each message's
    /// statements in turn).
    #[arg(long, value_delimiter = ',', default_value = "batched,per-message")]
    txn_statements: Vec<Statements>,
    /// Messages per bare-transaction run (every one a leak).
    #[arg(long, default_value_t = 5_000)]
    txn_events: usize,
    /// Which workloads: worker, forwarder, txn (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "worker,forwarder,txn")]
    only: Vec<String>,
    /// How the worker and the forwarder are fed: `drain` (every event queued first) and/or
    /// `live` (published while they consume).
    #[arg(long, value_delimiter = ',', default_value = "drain,live")]
    feeds: Vec<Feed>,
    /// Internal: run only the bare forwarder, from `--forward-queue` to
    /// `--forward-exchange`, until killed (the harness starts itself this way).
    #[arg(long, hide = true)]
    forwarder_only: bool,
    #[arg(long, hide = true, default_value = "")]
    forward_queue: String,
    #[arg(long, hide = true, default_value = "")]
    forward_exchange: String,
    #[arg(long, hide = true, default_value_t = 256)]
    forward_window: usize,
    /// The worker binary.
    #[arg(long, default_value = "target/release/toolcall-recovery")]
    bin: String,
    /// Server URL of PostgreSQL, without a database name.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    /// RabbitMQ URL.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// RabbitMQ URL the workers connect to (default: `--amqp`): a proxy in front of a
    /// cluster, say, while the harness publishes and collects on one node
    /// (`ci/hung-node.sh`).
    #[arg(long)]
    worker_amqp: Option<String>,
    /// Print the workers' resident memory every this many seconds (0: never), to see it
    /// stay flat over a soak.
    #[arg(long, default_value_t = 0)]
    sample_rss_secs: u64,
    /// Emulates a slower disk: every synchronous commit of the run's database waits this
    /// many microseconds before its WAL flush (`commit_delay`, with `commit_siblings = 0`),
    /// as a cloud disk's 1-5 ms `fsync` would; concurrent commits still share a flush.
    #[arg(long, default_value_t = 0)]
    commit_delay_us: u32,
    /// A setting of each run's database (`NAME=VALUE`, repeatable), e.g.
    /// `plan_cache_mode=force_generic_plan`; what the worker would get from its role or
    /// its database.
    #[arg(long = "db-setting")]
    db_settings: Vec<String>,
    /// Smoke mode for CI: every workload small (3,000 events, 10% leaks, debug binary, one
    /// window, one client count); checks exact counts.
    #[arg(long)]
    smoke: bool,
    /// The workers' recovery mode (`TCR_MODE`): `observe` records every leak in the ledger
    /// and changes nothing, and the effects check expects exactly that.
    #[arg(long, default_value = "recover", value_parser = ["recover", "observe"])]
    mode: String,
    /// Pads every message's content to about this many bytes (0: ordinary replies of
    /// ~250 bytes): with `--events 400 --body-bytes 900000`, the burst of large replies of
    /// BENCHMARKS.md §6.
    #[arg(long, default_value_t = 0)]
    body_bytes: usize,
    /// Pads only the events from this index on (`--body-bytes`): ordinary replies first,
    /// then the large ones, as a burst after a long run of small messages.
    #[arg(long, default_value_t = 0)]
    large_from: usize,
    /// Holds `messages` locked (EXCLUSIVE: reads go on, every recovery waits) for this many
    /// seconds from the start of publishing, so the whole window of leaks waits on the
    /// database.
    #[arg(long, default_value_t = 0)]
    lock_messages_secs: u64,
}

/// How the events reach a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Feed {
    /// Every event queued before the consumer starts; measured over the drain.
    Drain,
    /// Published while the consumer runs.
    Live,
}

impl Feed {
    fn label(self) -> &'static str {
        match self {
            Feed::Drain => "drain",
            Feed::Live => "live",
        }
    }
}

/// How the bare transaction puts several recoveries in one commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Statements {
    /// `recover::recover_batch`: one statement per kind for the whole group.
    Batched,
    /// Each message's statements in turn (`recover::recover_in` one after another).
    PerMessage,
}

#[tokio::main]
async fn main() -> Res<()> {
    let mut args = Args::parse();
    if args.forwarder_only {
        return forward(&args).await;
    }
    if args.smoke {
        smoke(&mut args);
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let shown = |v: Option<String>| v.unwrap_or_else(|| "default".into());
    println!(
        "events={} leak_share={} rate={} workers={} prefetch={} concurrency={} \
         recoveries_per_commit={} commit_delay_us={} cores={cores} load average {}",
        args.events,
        args.leak_share,
        args.rate,
        args.workers,
        shown(args.prefetch.map(|p| p.to_string())),
        shown(args.concurrency.map(|c| c.to_string())),
        shown(args.recoveries_per_commit.map(|c| c.to_string())),
        args.commit_delay_us,
        load_average(),
    );
    println!("| workload | events/s | p50 ms | p95 ms | p99 ms | CPU s | CPU µs/event | peak RSS MB | db commits |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut results = Results::default();
    for what in args.only.clone() {
        match what.as_str() {
            "worker" => worker_case(&args, &mut results).await?,
            "forwarder" => forwarder_case(&args, &mut results).await?,
            "txn" => txn_case(&args, &mut results).await?,
            other => return Err(format!("unknown workload {other}").into()),
        }
    }
    results.print_ratios(args.leak_share);
    Ok(())
}

/// CI: every workload, small, in debug; counts are checked, figures mean nothing.
fn smoke(args: &mut Args) {
    args.events = 3_000;
    args.leak_share = 0.10;
    args.rate = 0;
    if args.bin == "target/release/toolcall-recovery" {
        args.bin = "target/debug/toolcall-recovery".into();
    }
    args.only = vec!["worker".into(), "forwarder".into(), "txn".into()];
    args.forwarder_windows = vec![256];
    args.txn_clients = vec![4];
    args.txn_events = 160;
}

/// The 1-minute load average, to print beside the figures (they mean little when others
/// share the cores).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// What one workload measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    /// Events (or recoveries) per second.
    rate: f64,
    /// CPU microseconds per event of the measured process, when known.
    cpu_per_event: Option<f64>,
}

/// The figures of this run, for the ratios printed at the end.
#[derive(Default)]
struct Results {
    worker: Vec<(Feed, Measured)>,
    forwarder: Vec<(Feed, usize, Measured)>,
    txn: Vec<(String, usize, Measured)>,
}

impl Results {
    /// The worker against the best of each ceiling of the same run.
    fn print_ratios(&self, leak_share: f64) {
        let pct = (leak_share * 100.0).round();
        for &(feed, w) in &self.worker {
            if let (true, Some(cpu)) = (leak_share >= 1.0, w.cpu_per_event) {
                println!("worker CPU per recovery ({}): {cpu:.1} µs", feed.label());
            }
            let best = self
                .forwarder
                .iter()
                .filter(|f| f.0 == feed)
                .max_by(|a, b| a.2.rate.total_cmp(&b.2.rate));
            if let Some(&(_, window, f)) = best {
                let cpu = match (w.cpu_per_event, f.cpu_per_event) {
                    (Some(a), Some(b)) => format!(", CPU per event {:.2}x the forwarder's", a / b),
                    _ => String::new(),
                };
                println!(
                    "ratio ({pct}% leaks, {}): worker {:.0}/s = {:.2} of the forwarder's best (window {window}, {:.0}/s){cpu}",
                    feed.label(), w.rate, w.rate / f.rate, f.rate
                );
            }
            for (kind, clients, t) in &self.txn {
                println!(
                    "ratio ({pct}% leaks, {}): worker {:.0}/s = {:.2} of the bare transaction, {kind}, best at {clients} clients ({:.0}/s)",
                    feed.label(), w.rate, w.rate / t.rate, t.rate
                );
            }
        }
    }
}

/// Names of one workload: nothing is shared between workloads or runs.
struct Names {
    tag: String,
    db: String,
    input: String,
    queue: String,
    moderation: String,
}

impl Names {
    fn new(kind: &str) -> Names {
        let tag = format!(
            "tcrload_{kind}_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Names {
            db: tag.clone(),
            input: format!("{tag}.events"),
            queue: format!("{tag}.finalized"),
            moderation: format!("{tag}.moderation"),
            tag,
        }
    }
}

/// A message to publish: its id, content, and whether it holds a leak.
struct Seeded {
    ids: Vec<(i64, bool)>,
    contents: Vec<String>,
}

fn content(i: usize, leak: bool, body_bytes: usize) -> String {
    let mut prose = format!(
        "Here is what I found about question {i}. The weather in Paris tomorrow looks mild, \
         around 14 degrees with light wind; take a light jacket. Let me know if you want the \
         week ahead as well."
    );
    // A pasted log or a long document: lines, no markup.
    let mut line = 0;
    while prose.len() < body_bytes {
        line += 1;
        prose.push_str(&format!(
            "\n{line:>6} the forecast for the week ahead, day by day"
        ));
    }
    if leak {
        format!("{{success: true, memory_type: \"journal\", content: \"note {i}: user likes tea\"}}{prose}")
    } else {
        prose
    }
}

/// The most database clients any workload of this run uses.
fn max_clients(args: &Args) -> usize {
    let txn = args.txn_clients.iter().copied().max().unwrap_or(1);
    txn.max(args.concurrency.unwrap_or(8))
}

async fn seed(args: &Args, names: &Names, leak_share: f64) -> Res<(PgPool, Seeded)> {
    seed_n(args, names, leak_share, args.events).await
}

async fn seed_n(
    args: &Args,
    names: &Names,
    leak_share: f64,
    events: usize,
) -> Res<(PgPool, Seeded)> {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&format!("{}/postgres", args.pg))
        .await?;
    admin
        .execute(format!("CREATE DATABASE \"{}\"", names.db).as_str())
        .await?;
    apply_db_settings(args, &admin, &names.db).await?;
    let pool = PgPoolOptions::new()
        .max_connections(max_clients(args) as u32 + 2)
        .connect(&format!("{}/{}", args.pg, names.db))
        .await?;
    toolcall_recovery::store::create_app_tables(&pool).await?;
    toolcall_recovery::store::migrate(&pool).await?;
    sqlx::query("INSERT INTO agents (id, name, enabled_tools) VALUES (1, 'load', '{save_memory}')")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO chats (id) SELECT g FROM generate_series(1, 100) g")
        .execute(&pool)
        .await?;
    let every = if leak_share > 0.0 {
        (1.0 / leak_share).round().max(1.0) as usize
    } else {
        usize::MAX
    };
    let mut ids = Vec::with_capacity(events);
    let mut contents = Vec::with_capacity(events);
    let rows_per_insert = match args.body_bytes {
        0 => 5_000,
        bytes => ((64 << 20) / bytes).clamp(1, 5_000),
    };
    for chunk in (0..events).collect::<Vec<_>>().chunks(rows_per_insert) {
        let (mut id, mut chat, mut text) = (vec![], vec![], vec![]);
        for &i in chunk {
            let leak = leak_share > 0.0 && i % every == 0;
            let padded = if i >= args.large_from {
                args.body_bytes
            } else {
                0
            };
            let c = content(i, leak, padded);
            id.push(i as i64 + 1);
            chat.push((i % 100) as i64 + 1);
            text.push(c.clone());
            ids.push((i as i64 + 1, leak));
            contents.push(c);
        }
        sqlx::query(
            "INSERT INTO messages (id, chat_id, agent_id, role, content) \
             SELECT u.id, u.chat_id, 1, 'assistant', u.content \
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[]) AS u(id, chat_id, content)",
        )
        .bind(&id)
        .bind(&chat)
        .bind(&text)
        .execute(&pool)
        .await?;
    }
    // Ids were given explicitly: move the identity past them so the worker's own inserts
    // (role='tool' messages) get fresh ids, as they would in the app's database.
    sqlx::query(
        "SELECT setval(pg_get_serial_sequence('messages', 'id'), (SELECT max(id) FROM messages))",
    )
    .execute(&pool)
    .await?;
    Ok((pool, Seeded { ids, contents }))
}

/// `--db-setting` and `--commit-delay-us`, as settings of the run's database.
async fn apply_db_settings(args: &Args, admin: &PgPool, db: &str) -> Res<()> {
    let mut settings = args.db_settings.clone();
    if args.commit_delay_us > 0 {
        settings.push(format!(
            "commit_delay={}",
            args.commit_delay_us.min(100_000)
        ));
        settings.push("commit_siblings=0".to_string());
    }
    for setting in settings {
        let Some((name, value)) = setting.split_once('=') else {
            return Err(format!("--db-setting {setting:?} is not NAME=VALUE").into());
        };
        let valid_name =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name {
            return Err(format!("--db-setting: bad name {name:?}").into());
        }
        // SET takes no bind parameters; the value goes in as a quoted literal.
        let value = value.replace('\'', "''");
        admin
            .execute(format!("ALTER DATABASE \"{db}\" SET {name} = '{value}'").as_str())
            .await?;
    }
    Ok(())
}

async fn channel(url: &str) -> Res<(Connection, Channel)> {
    let conn = Connection::connect(url, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    Ok((conn, ch))
}

async fn declare_exchange(ch: &Channel, name: &str) -> Res<()> {
    let opts = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(name, ExchangeKind::Topic, opts, FieldTable::default())
        .await?;
    Ok(())
}

/// Publishes every seeded message as an event, at `rate` per second (0: as fast as the
/// broker confirms, in windows of 256 outstanding confirms).
async fn publish_all(ch: &Channel, exchange: &str, seeded: &Seeded, rate: u64) -> Res<()> {
    let start = Instant::now();
    let mut pending = Vec::with_capacity(256);
    for (n, ((id, _), content)) in seeded.ids.iter().zip(&seeded.contents).enumerate() {
        if rate > 0 {
            let due = start + Duration::from_secs_f64(n as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        let body = json!({
            "event_id": uuid::Uuid::new_v4(),
            "type": "message.finalized",
            "occurred_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
            "message": {"id": id, "chat_id": (id - 1) % 100 + 1, "agent_id": 1, "role": "assistant",
                        "content": content, "tools_used": [], "model_id": "load"}
        });
        let bytes = serde_json::to_vec(&body)?;
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into());
        pending.push(
            ch.basic_publish(
                exchange,
                "message.finalized",
                BasicPublishOptions::default(),
                &bytes,
                props,
            )
            .await?,
        );
        if pending.len() >= 256 {
            for p in pending.drain(..) {
                p.await?;
            }
        }
    }
    for p in pending {
        p.await?;
    }
    Ok(())
}

/// What a collector saw: the latencies (from `occurred_at` to arrival), and when the first
/// and the last moderation message arrived, each with the CPU seconds the measured
/// processes had used by then.
struct Collected {
    lat: Vec<f64>,
    first: (Instant, f64),
    last: (Instant, f64),
    /// The longest time between two moderation messages, and when it ended (wall clock).
    gap: (Duration, std::time::SystemTime),
}

/// Collects moderation messages until `expected` arrived.
async fn collect(
    ch: &Channel,
    queue: &str,
    expected: usize,
    timeout: Duration,
    pids: &[u32],
) -> Res<Collected> {
    let mut consumer = ch
        .basic_consume(
            queue,
            "load-collector",
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let mut lat = Vec::with_capacity(expected);
    let mut first = None;
    let mut previous: Option<Instant> = None;
    let mut gap = (Duration::ZERO, std::time::SystemTime::now());
    let deadline = tokio::time::Instant::now() + timeout;
    for seen in 0..expected {
        let next = tokio::time::timeout_at(deadline, consumer.next()).await;
        let Ok(Some(Ok(delivery))) = next else {
            return Err(format!("only {seen} of {expected} moderation messages arrived").into());
        };
        if first.is_none() {
            first = Some((Instant::now(), cpu_seconds(pids)));
        }
        let now = Instant::now();
        if let Some(p) = previous {
            if now - p > gap.0 {
                gap = (now - p, std::time::SystemTime::now());
            }
        }
        previous = Some(now);
        let v: serde_json::Value = serde_json::from_slice(&delivery.data)?;
        let sent = v["occurred_at"]
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
        if let Some(sent) = sent {
            let ms = (chrono::Utc::now() - sent.with_timezone(&chrono::Utc))
                .num_microseconds()
                .unwrap_or(0) as f64
                / 1000.0;
            if v["recovery"]["outcome"] != "clean" && std::env::var_os("LOAD_DEBUG").is_some() {
                eprintln!("leaked message latency {ms:.1} ms");
            }
            lat.push(ms);
        }
    }
    let last = (Instant::now(), cpu_seconds(pids));
    Ok(Collected {
        lat,
        first: first.unwrap_or(last),
        last,
        gap,
    })
}

/// CPU seconds (utime + stime, every thread) the processes have used so far.
fn cpu_seconds(pids: &[u32]) -> f64 {
    pids.iter().map(|&p| proc_usage(p).0).sum()
}

async fn moderation_queue(ch: &Channel, names: &Names) -> Res<String> {
    declare_exchange(ch, &names.moderation).await?;
    let q = format!("{}.collector", names.tag);
    ch.queue_declare(
        &q,
        QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_bind(
        &q,
        &names.moderation,
        "message.ready",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(q)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Resident memory of a process now, in MB, from /proc.
fn current_rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// `(cpu seconds, peak RSS MB)` of a process, from /proc.
fn proc_usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11)
        .and_then(|u| u.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    (ticks / 100.0, hwm_kb / 1024.0)
}

/// Drops the workload's database (and the connections left on it).
async fn drop_database(args: &Args, pool: PgPool, db: &str) -> Res<()> {
    pool.close().await;
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&format!("{}/postgres", args.pg))
        .await?;
    admin
        .execute(format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)").as_str())
        .await?;
    Ok(())
}

/// Deletes the workload's queues and exchanges.
async fn drop_broker_names(ch: &Channel, names: &Names) {
    use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
    for q in [names.queue.clone(), format!("{}.dead", names.tag)] {
        let _ = ch.queue_delete(&q, QueueDeleteOptions::default()).await;
    }
    for e in [
        names.input.clone(),
        names.moderation.clone(),
        format!("{}.dlx", names.tag),
        format!("{}.tool_calls", names.tag),
    ] {
        let _ = ch
            .exchange_delete(&e, ExchangeDeleteOptions::default())
            .await;
    }
}

async fn commits(pool: &PgPool, db: &str) -> i64 {
    sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
        .bind(db)
        .fetch_one(pool)
        .await
        .unwrap_or(0)
}

/// One line of the table; `cpu`: CPU seconds of the measured processes over the same
/// `elapsed`.
fn report(
    name: &str,
    n: usize,
    elapsed: Duration,
    mut lat: Vec<f64>,
    (cpu, rss): (Option<f64>, Option<f64>),
    commits: i64,
) -> Measured {
    lat.sort_by(|a, b| a.total_cmp(b));
    let rate = n as f64 / elapsed.as_secs_f64();
    let cpu_per_event = cpu.map(|c| c * 1e6 / n.max(1) as f64);
    let shown = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    println!(
        "| {name} | {rate:.0} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {commits} |",
        percentile(&lat, 0.5),
        percentile(&lat, 0.95),
        percentile(&lat, 0.99),
        shown(cpu, 2),
        shown(cpu_per_event, 1),
        shown(rss, 1),
    );
    Measured {
        rate,
        cpu_per_event,
    }
}

async fn spawn_worker(args: &Args, names: &Names, i: usize) -> Res<Child> {
    let mut command = Command::new(&args.bin);
    if let Some(p) = args.prefetch {
        command.env("TCR_PREFETCH", p.to_string());
    }
    if let Some(c) = args.concurrency {
        command.env("TCR_CONCURRENCY", c.to_string());
    }
    if let Some(n) = args.recoveries_per_commit {
        command.env("TCR_RECOVERIES_PER_COMMIT", n.to_string());
    }
    let child = command
        .arg("run")
        .env("DATABASE_URL", format!("{}/{}", args.pg, names.db))
        .env(
            "AMQP_URL",
            args.worker_amqp.as_deref().unwrap_or(&args.amqp),
        )
        .env("TCR_INPUT_EXCHANGE", &names.input)
        .env("TCR_QUEUE", &names.queue)
        .env("TCR_DEAD_LETTER_EXCHANGE", format!("{}.dlx", names.tag))
        .env("TCR_DEAD_LETTER_QUEUE", format!("{}.dead", names.tag))
        .env("TCR_MODERATION_EXCHANGE", &names.moderation)
        .env(
            "TCR_TOOL_CALLS_EXCHANGE",
            format!("{}.tool_calls", names.tag),
        )
        .env("TCR_CONNECTION_NAME", format!("{}-{i}", names.tag))
        .env("TCR_HTTP_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .env("TCR_MODE", &args.mode)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    Ok(child)
}

/// Waits until `n` consumers are on the queue (the workers declared it and subscribed).
async fn wait_for_consumers(conn: &Connection, queue: &str, n: u32) -> Res<()> {
    wait_for_consumer_count(conn, queue, |c| c >= n).await
}

/// Waits until the queue's consumer count satisfies `ok`. A passive declare of a missing
/// queue closes its channel, so each try opens a new one.
async fn wait_for_consumer_count(
    conn: &Connection,
    queue: &str,
    ok: impl Fn(u32) -> bool,
) -> Res<()> {
    for _ in 0..300 {
        let ch = conn.create_channel().await?;
        let opts = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if let Ok(q) = ch.queue_declare(queue, opts, FieldTable::default()).await {
            let _ = ch.close(200, "ok").await;
            if ok(q.consumer_count()) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("the consumers of {queue} did not come or go").into())
}

/// One measured run of consumers (`pids`) on `names.queue`.
struct Run<'a> {
    feed: Feed,
    names: &'a Names,
    seeded: &'a Seeded,
    pids: &'a [u32],
    consumers: u32,
}

impl Run<'_> {
    /// Collects every moderation message (for a live feed, publishing the events once the
    /// consumers consume); returns the events the window counts, its start (time, CPU of
    /// the consumers) and what was collected. A drain is measured from the first
    /// moderation message to the last, a live run from the first publish.
    async fn measure(
        &self,
        args: &Args,
        ch: &Channel,
        pubch: &Channel,
        probe: &Connection,
        collector: String,
    ) -> Res<(usize, (Instant, f64), Collected)> {
        let expected = self.seeded.ids.len();
        let collect_task = {
            let (ch, pids) = (ch.clone(), self.pids.to_vec());
            tokio::spawn(async move {
                collect(&ch, &collector, expected, Duration::from_secs(1800), &pids)
                    .await
                    .map_err(|e| e.to_string())
            })
        };
        let mut started = (Instant::now(), 0.0);
        if self.feed == Feed::Live {
            wait_for_consumers(probe, &self.names.queue, self.consumers).await?;
            started = (Instant::now(), cpu_seconds(self.pids));
            publish_all(pubch, &self.names.input, self.seeded, args.rate).await?;
        }
        let collected = collect_task.await??;
        Ok(match self.feed {
            Feed::Drain => (expected.saturating_sub(1), collected.first, collected),
            Feed::Live => (expected, started, collected),
        })
    }
}

async fn worker_case(args: &Args, results: &mut Results) -> Res<()> {
    for &feed in &args.feeds {
        let measured = worker_run(args, feed).await?;
        results.worker.push((feed, measured));
    }
    Ok(())
}

/// The worker declares its own queue: for a drain, one worker starts, subscribes and is
/// stopped before the events are queued, and the queue is left without a consumer.
async fn declare_worker_queue(args: &Args, names: &Names, probe: &Connection) -> Res<()> {
    let mut first = spawn_worker(args, names, 0).await?;
    wait_for_consumers(probe, &names.queue, 1).await?;
    first.kill().await?;
    wait_for_consumer_count(probe, &names.queue, |c| c == 0).await
}

/// One run of `--workers` workers fed as `feed`.
async fn worker_run(args: &Args, feed: Feed) -> Res<Measured> {
    let names = Names::new("worker");
    let (pool, seeded) = seed(args, &names, args.leak_share).await?;
    let (_c1, ch) = channel(&args.amqp).await?;
    let collector = moderation_queue(&ch, &names).await?;
    let (probe, _) = channel(&args.amqp).await?;
    let (_c3, pubch) = channel(&args.amqp).await?;
    if feed == Feed::Drain {
        declare_worker_queue(args, &names, &probe).await?;
        publish_all(&pubch, &names.input, &seeded, 0).await?;
    }
    let commits_before = commits(&pool, &names.db).await;
    // Taken before the workers start, so that the whole window waits on the database.
    let lock = hold_messages_locked(&pool, args.lock_messages_secs).await?;
    let mut workers: Vec<Child> = Vec::new();
    for i in 0..args.workers {
        workers.push(spawn_worker(args, &names, i).await?);
    }
    let pids: Vec<u32> = workers.iter().filter_map(|w| w.id()).collect();
    let sampler = rss_sampler(args, &pids);
    let run = Run {
        feed,
        names: &names,
        seeded: &seeded,
        pids: &pids,
        consumers: args.workers as u32,
    };
    let (n, from, collected) = run.measure(args, &ch, &pubch, &probe, collector).await?;
    let (gap, gap_end) = collected.gap;
    let epoch = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    println!(
        "longest gap without moderation output: {:.2} s (unix {:.2} to {:.2})",
        gap.as_secs_f64(),
        epoch(gap_end) - gap.as_secs_f64(),
        epoch(gap_end)
    );
    if let Some(lock) = lock {
        lock.await?;
    }
    if let Some(s) = sampler {
        s.abort();
    }
    // PostgreSQL publishes a backend's counters up to a second after its transactions.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let commits_after = commits(&pool, &names.db).await;
    let rss = pids.iter().map(|&p| proc_usage(p).1).fold(0.0, f64::max);
    let measured = report(
        &worker_label(args, feed),
        n,
        collected.last.0 - from.0,
        collected.lat,
        (Some(collected.last.1 - from.1), Some(rss)),
        commits_after - commits_before,
    );
    for mut w in workers {
        let _ = w.start_kill();
        let _ = w.wait().await;
    }
    let effects = worker_effects(args, &pool, &seeded).await;
    drop_broker_names(&ch, &names).await;
    drop_database(args, pool, &names.db).await?;
    effects?;
    Ok(measured)
}

fn worker_label(args: &Args, feed: Feed) -> String {
    format!(
        "worker x{} ({}% leaks, {}{})",
        args.workers,
        (args.leak_share * 100.0).round(),
        feed.label(),
        if args.rate > 0 && feed == Feed::Live {
            format!(", {} ev/s offered", args.rate)
        } else {
            String::new()
        }
    )
}

/// Prints the workers' resident memory every `--sample-rss-secs`, to see it stay flat over a
/// soak.
fn rss_sampler(args: &Args, pids: &[u32]) -> Option<tokio::task::JoinHandle<()>> {
    (args.sample_rss_secs > 0).then(|| {
        let pids = pids.to_vec();
        let every = Duration::from_secs(args.sample_rss_secs);
        tokio::spawn(async move {
            let t0 = Instant::now();
            loop {
                tokio::time::sleep(every).await;
                let rss: Vec<String> = pids
                    .iter()
                    .map(|&p| format!("{:.1}", current_rss_mb(p)))
                    .collect();
                println!(
                    "  t={:>4}s worker RSS MB: {}",
                    t0.elapsed().as_secs(),
                    rss.join(" ")
                );
            }
        })
    })
}

/// Exact effects: one memory per leaked message, every leak cleaned (recover mode), or every
/// leak observed and nothing changed (observe mode).
async fn worker_effects(args: &Args, pool: &PgPool, seeded: &Seeded) -> Res<()> {
    let leaks = seeded.ids.iter().filter(|(_, l)| *l).count() as i64;
    let memories: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_memories")
        .fetch_one(pool)
        .await?;
    let dirty: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM messages WHERE role = 'assistant' AND content LIKE '{success%'",
    )
    .fetch_one(pool)
    .await?;
    let observed: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT message_id) FROM recoveries WHERE mode = 'observe'",
    )
    .fetch_one(pool)
    .await?;
    println!(
        "  effects ({} mode): leaked messages {leaks}, memories {memories}, still dirty {dirty}, observed {observed}",
        args.mode
    );
    let expected = if args.mode == "observe" {
        (0, leaks, leaks)
    } else {
        (leaks, 0, 0)
    };
    if (memories, dirty, observed) != expected {
        return Err(format!(
            "effects wrong in {} mode: {memories} memories, {dirty} dirty, {observed} observed \
             for {leaks} leaks",
            args.mode
        )
        .into());
    }
    Ok(())
}

/// Locks `messages` (EXCLUSIVE) for `secs` seconds on a connection of its own, so a burst
/// waits on the database; the task ends when the lock is released. None for 0.
async fn hold_messages_locked(
    pool: &PgPool,
    secs: u64,
) -> Res<Option<tokio::task::JoinHandle<()>>> {
    if secs == 0 {
        return Ok(None);
    }
    let mut tx = pool.begin().await?;
    tx.execute("LOCK TABLE messages IN EXCLUSIVE MODE").await?;
    Ok(Some(tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let _ = tx.commit().await;
    })))
}

/// The clean-path ceiling: the bare forwarder at each window, fed each way; the best window
/// of each feed is its ceiling.
async fn forwarder_case(args: &Args, results: &mut Results) -> Res<()> {
    for &feed in &args.feeds {
        let mut best: Option<(usize, Measured)> = None;
        for &window in &args.forwarder_windows {
            let m = forwarder_run(args, window.max(1), feed).await?;
            results.forwarder.push((feed, window, m));
            if best.is_none_or(|(_, b)| m.rate > b.rate) {
                best = Some((window, m));
            }
        }
        if let Some((window, m)) = best {
            let cpu = m.cpu_per_event.map_or("-".into(), |c| format!("{c:.1}"));
            println!(
                "| ceiling ({}): broker-only forwarder, best window ({window}) | {:.0} | | | | | {cpu} | | |",
                feed.label(),
                m.rate
            );
        }
    }
    Ok(())
}

/// Declares what the worker's topology would: the input exchange, a durable quorum queue
/// bound to it, and the moderation exchange with the collector's queue.
async fn forwarder_topology(ch: &Channel, names: &Names) -> Res<String> {
    let collector = moderation_queue(ch, names).await?;
    declare_exchange(ch, &names.input).await?;
    let mut qargs = FieldTable::default();
    qargs.insert(
        "x-queue-type".into(),
        lapin::types::AMQPValue::LongString("quorum".into()),
    );
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare(&names.queue, durable, qargs).await?;
    ch.queue_bind(
        &names.queue,
        &names.input,
        "message.finalized",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(collector)
}

/// One bare forwarder run at `window` deliveries in flight (prefetch = concurrency), in a
/// process of its own.
async fn forwarder_run(args: &Args, window: usize, feed: Feed) -> Res<Measured> {
    let names = Names::new("fwd");
    let (pool, seeded) = seed(args, &names, args.leak_share).await?;
    let (_c1, ch) = channel(&args.amqp).await?;
    let collector = forwarder_topology(&ch, &names).await?;
    let (_c3, pubch) = channel(&args.amqp).await?;
    if feed == Feed::Drain {
        publish_all(&pubch, &names.input, &seeded, 0).await?;
    }
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--forwarder-only", "--amqp", &args.amqp])
        .args(["--forward-queue", &names.queue])
        .args(["--forward-exchange", &names.moderation])
        .args(["--forward-window", &window.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let pids: Vec<u32> = child.id().into_iter().collect();
    let (probe, _) = channel(&args.amqp).await?;
    let run = Run {
        feed,
        names: &names,
        seeded: &seeded,
        pids: &pids,
        consumers: 1,
    };
    let (n, from, collected) = run.measure(args, &ch, &pubch, &probe, collector).await?;
    let rss = pids.iter().map(|&p| proc_usage(p).1).fold(0.0, f64::max);
    let _ = child.kill().await;
    drop_broker_names(&ch, &names).await;
    drop_database(args, pool, &names.db).await?;
    Ok(report(
        &format!("bare forwarder, window {window} ({})", feed.label()),
        n,
        collected.last.0 - from.0,
        collected.lat,
        (Some(collected.last.1 - from.1), Some(rss)),
        0,
    ))
}

/// The bare forwarder (`--forwarder-only`): consume, publish with confirm, ack after the
/// confirm, `--forward-window` deliveries in flight; the broker connection set up as the
/// worker's is (tokio's executor and reactor). Runs until killed.
async fn forward(args: &Args) -> Res<()> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio);
    let conn = Connection::connect(&args.amqp, props).await?;
    let fwd = conn.create_channel().await?;
    fwd.confirm_select(ConfirmSelectOptions::default()).await?;
    let window = args.forward_window.max(1);
    fwd.basic_qos(
        window.min(u16::MAX as usize) as u16,
        BasicQosOptions::default(),
    )
    .await?;
    let mut consumer = fwd
        .basic_consume(
            &args.forward_queue,
            "forwarder",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let limit = Arc::new(Semaphore::new(window));
    let moderation: Arc<str> = args.forward_exchange.as_str().into();
    while let Some(Ok(d)) = consumer.next().await {
        let permit = limit.clone().acquire_owned().await?;
        let (fwd, moderation) = (fwd.clone(), moderation.clone());
        tokio::spawn(async move {
            let props = BasicProperties::default().with_delivery_mode(2);
            if let Ok(confirm) = fwd
                .basic_publish(
                    &moderation,
                    "message.ready",
                    BasicPublishOptions::default(),
                    &d.data,
                    props,
                )
                .await
            {
                if confirm.await.is_ok() {
                    let _ = d.ack(BasicAckOptions::default()).await;
                }
            }
            drop(permit);
        });
    }
    Ok(())
}

/// The dirty-path ceiling: the bare recovery transaction at each client count, for each
/// number of recoveries per commit (and, for several, each way of running their
/// statements); the best count of each is its ceiling.
async fn txn_case(args: &Args, results: &mut Results) -> Res<()> {
    for &per_commit in &args.txn_per_commit {
        let per_commit = per_commit.max(1);
        let kinds: Vec<Option<Statements>> = if per_commit == 1 {
            vec![None]
        } else {
            args.txn_statements.iter().copied().map(Some).collect()
        };
        for statements in kinds {
            let kind = txn_kind(per_commit, statements);
            let mut best: Option<(usize, Measured)> = None;
            for &clients in &args.txn_clients {
                let m = txn_run(args, clients.max(1), per_commit, statements).await?;
                if best.is_none_or(|(_, b)| m.rate > b.rate) {
                    best = Some((clients, m));
                }
            }
            if let Some((clients, m)) = best {
                let cpu = m.cpu_per_event.map_or("-".into(), |c| format!("{c:.1}"));
                println!(
                    "| ceiling: recovery transaction alone, {kind}, best client count ({clients}) | {:.0} | | | | | {cpu} | | |",
                    m.rate
                );
                results.txn.push((kind, clients, m));
            }
        }
    }
    Ok(())
}

fn txn_kind(per_commit: usize, statements: Option<Statements>) -> String {
    match statements {
        None => format!("{per_commit} per commit"),
        Some(Statements::Batched) => format!("{per_commit} per commit, batched (unnest)"),
        Some(Statements::PerMessage) => format!("{per_commit} per commit, per-message statements"),
    }
}

/// One run of the bare recovery transaction (every message a leak) at `clients` at once,
/// `per_commit` recoveries per transaction; the CPU is this process's (the client side of
/// the statements, nothing else runs in it meanwhile).
async fn txn_run(
    args: &Args,
    clients: usize,
    per_commit: usize,
    statements: Option<Statements>,
) -> Res<Measured> {
    let names = Names::new("txn");
    let (pool, seeded) = seed_n(args, &names, 1.0, args.txn_events).await?;
    let policy = Arc::new(toolcall_recovery::recover::Policy::default());
    let commits_before = commits(&pool, &names.db).await;
    let limit = Arc::new(Semaphore::new(clients));
    let me = [std::process::id()];
    let (started, cpu_before) = (Instant::now(), cpu_seconds(&me));
    let ids: Vec<i64> = seeded.ids.iter().map(|(id, _)| *id).collect();
    let mut tasks = Vec::with_capacity(ids.len() / per_commit + 1);
    for group in ids.chunks(per_commit) {
        let permit = limit.clone().acquire_owned().await?;
        let pool = pool.clone();
        let policy = policy.clone();
        let group = group.to_vec();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = recover_group(&pool, &group, &policy, statements).await;
            drop(permit);
            r.map(|()| t.elapsed().as_secs_f64() * 1000.0)
        }));
    }
    let mut lat = Vec::with_capacity(tasks.len());
    for t in tasks {
        lat.push(t.await??);
    }
    let (elapsed, cpu) = (started.elapsed(), cpu_seconds(&me) - cpu_before);
    // PostgreSQL publishes a backend's counters up to a second after its transactions.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let commits_after = commits(&pool, &names.db).await;
    let measured = report(
        &format!(
            "bare recovery transaction, {clients} clients, {}",
            txn_kind(per_commit, statements)
        ),
        ids.len(),
        elapsed,
        lat,
        (Some(cpu), None),
        commits_after - commits_before,
    );
    let effects = txn_effects(&pool, ids.len()).await;
    drop_database(args, pool, &names.db).await?;
    effects?;
    Ok(measured)
}

/// Exact effects of a bare-transaction run: a memory and an outbox row per message, none
/// left dirty.
async fn txn_effects(pool: &PgPool, n: usize) -> Res<()> {
    let counts: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM agent_memories), (SELECT count(*) FROM outbox), \
           (SELECT count(*) FROM messages WHERE role = 'assistant' AND content LIKE '{success%')",
    )
    .fetch_one(pool)
    .await?;
    if counts != (n as i64, n as i64, 0) {
        return Err(format!(
            "effects wrong: (memories, outbox rows, dirty) = {counts:?} for {n} leaks"
        )
        .into());
    }
    Ok(())
}

/// The worker's transaction for one message (outbox included), or several in one commit,
/// their statements batched or one message at a time.
async fn recover_group(
    pool: &PgPool,
    ids: &[i64],
    policy: &toolcall_recovery::recover::Policy,
    statements: Option<Statements>,
) -> Result<(), String> {
    let envelope = StandIn::by(Source::Backfill { model: None });
    match (ids, statements) {
        ([id], _) => {
            recover(pool, policy, envelope.request(MessageId::new(*id), true))
                .await
                .map_err(|e| e.to_string())?;
        }
        (_, Some(Statements::Batched) | None) => {
            let items = ids
                .iter()
                .map(|&id| envelope.request(MessageId::new(id), true))
                .collect();
            recover_batch(pool, policy, items)
                .await
                .map_err(|e| e.error.to_string())?;
        }
        (_, Some(Statements::PerMessage)) => {
            per_message(pool, ids, policy, &envelope)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Several messages in one commit, each message's statements in turn (the worker's group
/// commit before its statements were batched).
async fn per_message(
    pool: &PgPool,
    ids: &[i64],
    policy: &toolcall_recovery::recover::Policy,
    envelope: &StandIn,
) -> Result<(), toolcall_recovery::error::Error> {
    let mut tx = pool.begin().await?;
    for id in ids {
        recover_in(&mut tx, policy, envelope.request(MessageId::new(*id), true)).await?;
    }
    tx.commit().await?;
    Ok(())
}
