//! The load harness: seeds PostgreSQL, publishes message-finalized events, waits until the
//! worker has moved all of them to the moderation exchange, and reports rate, latency,
//! the worker's CPU and memory, and database commits. The worker runs with its own
//! defaults unless `--prefetch`/`--concurrency` are given. Next to it, in the same run and
//! on the same broker and database, the two ceilings, each the best the bare component
//! reaches on this machine:
//! - `forwarder`: consume -> publish to a durable quorum queue with confirm -> ack after the
//!   confirm, no detection, no database (the clean-path ceiling), swept over its window of
//!   deliveries in flight (`--forwarder-windows`); the best window is the ceiling;
//! - `txn`: the worker's recovery transaction alone (`recover::recover_with_outbox`, the
//!   outbox row included), no broker (the dirty-path ceiling), swept over client counts
//!   (`--txn-clients`); the best count is the ceiling. `--txn-per-commit 1,8` also measures
//!   several recoveries per commit.
//!
//! ```sh
//! cargo build --release && cargo run --release --example load -- --events 20000 --leak-share 0.02
//! cargo run --example load -- --smoke      # CI: a few thousand events, checks counts only
//! ```
//! Every run uses a fresh database and fresh exchange/queue names and drops nothing it
//! did not create. Traffic goes only to the local services named by the URLs.

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
use toolcall_recovery::recover::outbox::{self, Envelope};
use toolcall_recovery::recover::{recover_in, recover_with_outbox, Source};

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
    /// Recoveries per commit of the bare transaction (1 is what the worker does).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    txn_per_commit: Vec<usize>,
    /// Messages per bare-transaction run (every one a leak).
    #[arg(long, default_value_t = 5_000)]
    txn_events: usize,
    /// Which workloads: worker, forwarder, txn (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "worker,forwarder,txn")]
    only: Vec<String>,
    /// The worker binary.
    #[arg(long, default_value = "target/release/toolcall-recovery")]
    bin: String,
    /// Server URL of PostgreSQL, without a database name.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    /// RabbitMQ URL.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    amqp: String,
    /// Print the workers' resident memory every this many seconds (0: never), to see it
    /// stay flat over a soak.
    #[arg(long, default_value_t = 0)]
    sample_rss_secs: u64,
    /// Emulates a slower disk: every synchronous commit of the run's database waits this
    /// many microseconds before its WAL flush (`commit_delay`, with `commit_siblings = 0`),
    /// as a cloud disk's 1-5 ms `fsync` would; concurrent commits still share a flush.
    #[arg(long, default_value_t = 0)]
    commit_delay_us: u32,
    /// Smoke mode for CI: 3,000 events, 10% leaks, debug binary; checks exact counts.
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

#[tokio::main]
async fn main() -> Res<()> {
    let mut args = Args::parse();
    if args.smoke {
        args.events = 3_000;
        args.leak_share = 0.10;
        args.rate = 0;
        if args.bin == "target/release/toolcall-recovery" {
            args.bin = "target/debug/toolcall-recovery".into();
        }
        args.only = vec!["worker".into()];
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let shown = |v: Option<String>| v.unwrap_or_else(|| "default".into());
    println!(
        "events={} leak_share={} rate={} workers={} prefetch={} concurrency={} \
         recoveries_per_commit={} commit_delay_us={} cores={cores}",
        args.events,
        args.leak_share,
        args.rate,
        args.workers,
        shown(args.prefetch.map(|p| p.to_string())),
        shown(args.concurrency.map(|c| c.to_string())),
        shown(args.recoveries_per_commit.map(|c| c.to_string())),
        args.commit_delay_us,
    );
    println!("| workload | events/s | p50 ms | p95 ms | p99 ms | worker CPU s | worker peak RSS MB | db commits |");
    println!("|---|---|---|---|---|---|---|---|");
    for what in args.only.clone() {
        match what.as_str() {
            "worker" => worker_case(&args).await?,
            "forwarder" => forwarder_case(&args).await?,
            "txn" => txn_case(&args).await?,
            other => return Err(format!("unknown workload {other}").into()),
        }
    }
    Ok(())
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
    if args.commit_delay_us > 0 {
        for setting in [
            format!("commit_delay = {}", args.commit_delay_us.min(100_000)),
            "commit_siblings = 0".to_string(),
        ] {
            admin
                .execute(format!("ALTER DATABASE \"{}\" SET {setting}", names.db).as_str())
                .await?;
        }
    }
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

/// Latencies from `occurred_at` to arrival, until `expected` moderation messages arrived.
async fn collect(ch: &Channel, queue: &str, expected: usize, timeout: Duration) -> Res<Vec<f64>> {
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
    let deadline = tokio::time::Instant::now() + timeout;
    while lat.len() < expected {
        let next = tokio::time::timeout_at(deadline, consumer.next()).await;
        let Ok(Some(Ok(delivery))) = next else {
            return Err(format!(
                "only {} of {expected} moderation messages arrived",
                lat.len()
            )
            .into());
        };
        let v: serde_json::Value = serde_json::from_slice(&delivery.data)?;
        let sent = v["occurred_at"]
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
        if v["recovery"]["outcome"] != "clean" && std::env::var_os("LOAD_DEBUG").is_some() {
            let ms = sent
                .map(|s| (chrono::Utc::now() - s.with_timezone(&chrono::Utc)).num_milliseconds());
            eprintln!("leaked message latency {ms:?} ms");
        }
        if let Some(sent) = sent {
            let ms = (chrono::Utc::now() - sent.with_timezone(&chrono::Utc))
                .num_microseconds()
                .unwrap_or(0) as f64
                / 1000.0;
            lat.push(ms);
        }
    }
    Ok(lat)
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

fn report(
    name: &str,
    n: usize,
    elapsed: Duration,
    mut lat: Vec<f64>,
    cpu: Option<(f64, f64)>,
    commits: i64,
) {
    lat.sort_by(|a, b| a.total_cmp(b));
    let rate = n as f64 / elapsed.as_secs_f64();
    let (cpu_s, rss) = cpu.map_or(("-".into(), "-".into()), |(c, r)| {
        (format!("{c:.2}"), format!("{r:.1}"))
    });
    println!(
        "| {name} | {rate:.0} | {:.1} | {:.1} | {:.1} | {cpu_s} | {rss} | {commits} |",
        percentile(&lat, 0.5),
        percentile(&lat, 0.95),
        percentile(&lat, 0.99)
    );
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
        .env("AMQP_URL", &args.amqp)
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
/// A passive declare of a missing queue closes its channel, so each try opens a new one.
async fn wait_for_consumers(conn: &Connection, queue: &str, n: u32) -> Res<()> {
    for _ in 0..300 {
        let ch = conn.create_channel().await?;
        let opts = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if let Ok(q) = ch.queue_declare(queue, opts, FieldTable::default()).await {
            if q.consumer_count() >= n {
                let _ = ch.close(200, "ok").await;
                return Ok(());
            }
            let _ = ch.close(200, "ok").await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("workers did not start consuming {queue}").into())
}

async fn worker_case(args: &Args) -> Res<()> {
    let names = Names::new("worker");
    let (pool, seeded) = seed(args, &names, args.leak_share).await?;
    let (_c1, ch) = channel(&args.amqp).await?;
    let collector = moderation_queue(&ch, &names).await?;
    let mut workers: Vec<Child> = Vec::new();
    for i in 0..args.workers {
        workers.push(spawn_worker(args, &names, i).await?);
    }
    let (probe, _) = channel(&args.amqp).await?;
    wait_for_consumers(&probe, &names.queue, args.workers as u32).await?;
    let commits_before = commits(&pool, &names.db).await;
    let started = Instant::now();
    let (_c3, pubch) = channel(&args.amqp).await?;
    let expected = seeded.ids.len();
    let sampler = (args.sample_rss_secs > 0).then(|| {
        let pids: Vec<u32> = workers.iter().filter_map(|w| w.id()).collect();
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
    });
    let collect_task = {
        let ch = ch.clone();
        tokio::spawn(async move {
            collect(&ch, &collector, expected, Duration::from_secs(1800))
                .await
                .map_err(|e| e.to_string())
        })
    };
    let lock = hold_messages_locked(&pool, args.lock_messages_secs).await?;
    publish_all(&pubch, &names.input, &seeded, args.rate).await?;
    if let Some(lock) = lock {
        lock.await?;
    }
    let lat = collect_task.await??;
    let elapsed = started.elapsed();
    if let Some(s) = sampler {
        s.abort();
    }
    // PostgreSQL publishes a backend's counters up to a second after its transactions.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let commits_after = commits(&pool, &names.db).await;
    let usage: Vec<(f64, f64)> = workers
        .iter()
        .filter_map(|w| w.id())
        .map(proc_usage)
        .collect();
    let cpu = usage.iter().map(|u| u.0).sum::<f64>();
    let rss = usage.iter().map(|u| u.1).fold(0.0, f64::max);
    let label = format!(
        "worker x{} ({}% leaks{})",
        args.workers,
        (args.leak_share * 100.0).round(),
        if args.rate > 0 {
            format!(", {} ev/s offered", args.rate)
        } else {
            String::new()
        }
    );
    report(
        &label,
        expected,
        elapsed,
        lat,
        Some((cpu, rss)),
        commits_after - commits_before,
    );
    // Exact effects: one memory per leaked message, every leak cleaned.
    let leaks = seeded.ids.iter().filter(|(_, l)| *l).count() as i64;
    let memories: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_memories")
        .fetch_one(&pool)
        .await?;
    let dirty: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM messages WHERE role = 'assistant' AND content LIKE '{success%'",
    )
    .fetch_one(&pool)
    .await?;
    let observed: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT message_id) FROM recoveries WHERE mode = 'observe'",
    )
    .fetch_one(&pool)
    .await?;
    println!(
        "  effects ({} mode): leaked messages {leaks}, memories {memories}, still dirty {dirty}, observed {observed}",
        args.mode
    );
    for mut w in workers {
        let _ = w.start_kill();
        let _ = w.wait().await;
    }
    drop_broker_names(&ch, &names).await;
    drop_database(args, pool, &names.db).await?;
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

/// Locks `messages` (EXCLUSIVE) for `secs` seconds on a connection of its own; the task
/// ends when the lock is released. None for 0.
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

/// The clean-path ceiling: the bare forwarder at each window; the best is the ceiling.
async fn forwarder_case(args: &Args) -> Res<()> {
    let mut best: Option<(usize, f64)> = None;
    for &window in &args.forwarder_windows {
        let rate = forwarder_run(args, window.max(1)).await?;
        if best.is_none_or(|(_, b)| rate > b) {
            best = Some((window, rate));
        }
    }
    if let Some((window, rate)) = best {
        println!(
            "| ceiling: broker-only forwarder, best window ({window}) | {rate:.0} | | | | | | |"
        );
    }
    Ok(())
}

/// One bare forwarder run at `window` deliveries in flight (prefetch = concurrency); returns
/// events per second.
async fn forwarder_run(args: &Args, window: usize) -> Res<f64> {
    let names = Names::new("fwd");
    let (pool, seeded) = seed(args, &names, args.leak_share).await?;
    let (_c1, ch) = channel(&args.amqp).await?;
    let collector = moderation_queue(&ch, &names).await?;
    declare_exchange(&ch, &names.input).await?;
    let mut qargs = FieldTable::default();
    qargs.insert(
        "x-queue-type".into(),
        lapin::types::AMQPValue::LongString("quorum".into()),
    );
    ch.queue_declare(
        &names.queue,
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        qargs,
    )
    .await?;
    ch.queue_bind(
        &names.queue,
        &names.input,
        "message.finalized",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    // The forwarder: publish with confirm, then ack, `window` deliveries in flight.
    let (_c2, fwd) = channel(&args.amqp).await?;
    fwd.basic_qos(
        window.min(u16::MAX as usize) as u16,
        BasicQosOptions::default(),
    )
    .await?;
    let mut consumer = fwd
        .basic_consume(
            &names.queue,
            "forwarder",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let limit = Arc::new(Semaphore::new(window));
    let moderation = names.moderation.clone();
    let forwarder = tokio::spawn(async move {
        while let Some(Ok(d)) = consumer.next().await {
            let Ok(permit) = limit.clone().acquire_owned().await else {
                break;
            };
            let fwd = fwd.clone();
            let moderation = moderation.clone();
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
    });
    let started = Instant::now();
    let (_c3, pubch) = channel(&args.amqp).await?;
    let expected = seeded.ids.len();
    let collect_task = {
        let ch = ch.clone();
        tokio::spawn(async move {
            collect(&ch, &collector, expected, Duration::from_secs(1800))
                .await
                .map_err(|e| e.to_string())
        })
    };
    let lock = hold_messages_locked(&pool, args.lock_messages_secs).await?;
    publish_all(&pubch, &names.input, &seeded, args.rate).await?;
    if let Some(lock) = lock {
        lock.await?;
    }
    let lat = collect_task.await??;
    let elapsed = started.elapsed();
    forwarder.abort();
    drop_broker_names(&ch, &names).await;
    report(
        &format!("bare forwarder, window {window}"),
        expected,
        elapsed,
        lat,
        None,
        0,
    );
    drop_database(args, pool, &names.db).await?;
    Ok(expected as f64 / elapsed.as_secs_f64())
}

/// The dirty-path ceiling: the bare recovery transaction at each client count (and each
/// number of recoveries per commit); the best at one recovery per commit is the ceiling.
async fn txn_case(args: &Args) -> Res<()> {
    for &per_commit in &args.txn_per_commit {
        let mut best: Option<(usize, f64)> = None;
        for &clients in &args.txn_clients {
            let rate = txn_run(args, clients.max(1), per_commit.max(1)).await?;
            if best.is_none_or(|(_, b)| rate > b) {
                best = Some((clients, rate));
            }
        }
        if let Some((clients, rate)) = best {
            println!(
                "| ceiling: recovery transaction alone, {per_commit} per commit, best client count ({clients}) | {rate:.0} | | | | | | |"
            );
        }
    }
    Ok(())
}

/// One run of the bare recovery transaction (every message a leak) at `clients` at once,
/// `per_commit` recoveries per transaction; returns recoveries per second.
async fn txn_run(args: &Args, clients: usize, per_commit: usize) -> Res<f64> {
    let names = Names::new("txn");
    let (pool, seeded) = seed_n(args, &names, 1.0, args.txn_events).await?;
    let policy = Arc::new(toolcall_recovery::recover::Policy::default());
    let commits_before = commits(&pool, &names.db).await;
    let limit = Arc::new(Semaphore::new(clients));
    let started = Instant::now();
    let ids: Vec<i64> = seeded.ids.iter().map(|(id, _)| *id).collect();
    let mut tasks = Vec::with_capacity(ids.len() / per_commit + 1);
    for group in ids.chunks(per_commit) {
        let permit = limit.clone().acquire_owned().await?;
        let pool = pool.clone();
        let policy = policy.clone();
        let group = group.to_vec();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = recover_group(&pool, &group, &policy).await;
            drop(permit);
            r.map(|()| t.elapsed().as_secs_f64() * 1000.0)
                .map_err(|e| e.to_string())
        }));
    }
    let mut lat = Vec::with_capacity(tasks.len());
    for t in tasks {
        lat.push(t.await??);
    }
    let elapsed = started.elapsed();
    // PostgreSQL publishes a backend's counters up to a second after its transactions.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let commits_after = commits(&pool, &names.db).await;
    report(
        &format!("bare recovery transaction, {clients} clients, {per_commit} per commit"),
        ids.len(),
        elapsed,
        lat,
        None,
        commits_after - commits_before,
    );
    drop_database(args, pool, &names.db).await?;
    Ok(ids.len() as f64 / elapsed.as_secs_f64())
}

/// The worker's transaction for one message (outbox included), or several in one commit.
async fn recover_group(
    pool: &PgPool,
    ids: &[i64],
    policy: &toolcall_recovery::recover::Policy,
) -> Result<(), toolcall_recovery::error::Error> {
    let envelope = StandIn { origin: "load" };
    if let [id] = ids {
        recover_with_outbox(
            pool,
            MessageId::new(*id),
            policy,
            Source::Backfill { model: None },
            Some(&envelope),
        )
        .await?;
        return Ok(());
    }
    // The same statements as `recover_with_outbox`, several messages to one commit.
    let mut tx = pool.begin().await?;
    for id in ids {
        let id = MessageId::new(*id);
        let report = recover_in(&mut tx, id, policy, Source::Backfill { model: None }).await?;
        if report.recorded() {
            let owed = envelope.outgoing(&report)?;
            outbox::enqueue(&mut tx, report.recovery_id, id, owed).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
