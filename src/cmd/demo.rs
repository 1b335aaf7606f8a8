//! `toolcall-recovery demo`: see it work. Against the services of the README's run command,
//! with the worker running, it seeds an assistant message with a leaked save_memory result
//! (a new agent with the tool, a new chat), publishes the message's finalized event, waits
//! for the worker's ledger row, and prints what the worker made of it: the cleaned message,
//! the memory, the tool message, the moderation message and the metrics that moved.
//!
//! Production stays safe twice over: it runs only on a development database (app tables
//! the worker created for development carry [`store::DEVELOPMENT_MARK`]), and there it
//! writes only its own three rows (removed again when no worker takes the event); on the
//! broker it publishes its one event and reads a queue of its own.
//!
//! May depend on: `store` (the pool, the development mark, migrations), `publish` (the
//! connection, the one confirmed publish), `settings`, `error`, `lapin`, `sqlx`, `tokio`.

mod link;
mod rows;
mod scrape;

use crate::error::Error;
use crate::publish::Published;
use crate::settings::{DatabaseSettings, Names, PublishSettings};
use crate::store;
use link::Link;
use rows::{After, LedgerRow, Seeded};
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};

/// The leak the demo seeds: a fake save_memory result the model wrote before its reply.
const LEAK: &str = "{success: true, memory_type: \"journal\", content: \"Finished the first \
draft of the opening chapter.\"}That's a real milestone. How does it feel to have it on paper?";

/// What the README's run command is, for the hints.
const RUN_COMMAND: &str = "cargo run --release -- run --migrate";

/// The counters the demo shows moving: (metric, labels).
const COUNTERS: [(&str, &[(&str, &str)]); 3] = [
    (
        "toolcall_recovery_events_total",
        &[("mode", "recover"), ("outcome", "recovered")],
    ),
    (
        "toolcall_recovery_memories_created_total",
        &[("mode", "recover")],
    ),
    (
        "toolcall_recovery_calls_total",
        &[
            ("family", "result_prefix"),
            ("mode", "recover"),
            ("outcome", "recovered"),
            ("tool", "save_memory"),
        ],
    ),
];

/// Flags of `toolcall-recovery demo`: the worker's, so that the defaults meet the README's
/// run command.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// The development database the worker runs on.
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// The broker and the moderation exchange.
    #[command(flatten)]
    pub publish: PublishSettings,

    /// The input exchange and routing key the worker's queue is bound with.
    #[command(flatten)]
    pub names: Names,

    /// The running worker's metrics (its `--http-addr`).
    #[arg(long, default_value = "http://127.0.0.1:9090/metrics")]
    pub metrics_url: String,

    /// Seconds to wait for the worker to record the recovery.
    #[arg(long, default_value_t = 30)]
    pub wait_secs: u64,

    /// Name of the demo's broker connection.
    #[arg(long, default_value = "toolcall-recovery-demo")]
    pub connection_name: String,
}

/// Runs the demo, telling the story on `out`. Fails, saying what to do, when the database
/// is not a development one, the worker's tables are missing, no worker takes the event, or
/// the worker records nothing within `--wait-secs`.
pub async fn run(args: &DemoArgs, out: &mut (dyn Write + Send)) -> Result<(), Error> {
    let pool = store::connect_command(&args.database, "toolcall-recovery-demo", 2)
        .await
        .map_err(|e| {
            Error::Startup(format!(
                "{e}. Start the worker first, in another terminal (it creates the development \
                 database): {RUN_COMMAND}"
            ))
        })?;
    let result = async {
        require_development(&pool, &args.database).await?;
        let link = Link::open(
            &args.publish.broker(),
            &args.connection_name,
            &args.names,
            &args.publish,
        )
        .await?;
        let result = demo(&pool, &link, args, out).await;
        link.close().await;
        result
    }
    .await;
    pool.close().await;
    result
}

/// Refuses anything but a development database with the worker's tables migrated.
async fn require_development(
    pool: &sqlx::PgPool,
    database: &DatabaseSettings,
) -> Result<(), Error> {
    if !store::is_development_database(pool).await? {
        return Err(Error::Startup(format!(
            "the demo runs only on a development database, and {} is not one: its chat app \
             tables were not created by toolcall-recovery for development (the README's run \
             command creates them, on the built-in local DATABASE_URL). It would write an \
             agent, a chat and a message there",
            database.database_url
        )));
    }
    let pending = store::pending_migrations(pool).await?;
    if !pending.is_empty() {
        return Err(Error::Startup(format!(
            "the worker's tables are not there yet ({} pending migration(s)): start the worker \
             first, in another terminal: {RUN_COMMAND}",
            pending.len()
        )));
    }
    Ok(())
}

/// Seeds, publishes, waits, shows.
async fn demo(
    pool: &sqlx::PgPool,
    link: &Link,
    args: &DemoArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let before = counters(&args.metrics_url).await;
    let seeded = rows::seed(pool, LEAK).await?;
    let event_id = uuid::Uuid::new_v4().to_string();
    let event = event(&event_id, seeded);
    say(out, &seeded_story(seeded, &args.database))?;
    match link.publish(&args.names, &event_id, event.as_bytes()).await {
        Ok(Published::Routed) => {}
        published => {
            rows::unseed(pool, seeded).await?;
            published?;
            return Err(Error::Startup(format!(
                "no queue takes events on {} / {}: is the worker running? Start it in \
                 another terminal ({RUN_COMMAND}) and run the demo again (its rows were \
                 removed)",
                args.names.input_exchange, args.names.input_routing_key
            )));
        }
    }
    say(
        out,
        &format!(
            "Published its finalized event {event_id} to {} / {}.\n",
            args.names.input_exchange, args.names.input_routing_key
        ),
    )?;
    let started = Instant::now();
    let wait = Duration::from_secs(args.wait_secs);
    let Some(ledger) = rows::wait_for_ledger(pool, seeded.message, wait).await? else {
        return Err(Error::Startup(format!(
            "the worker recorded nothing for message {} within {} s: is it running on this \
             database and broker ({RUN_COMMAND})? Its log says what it did with event \
             {event_id}",
            seeded.message, args.wait_secs
        )));
    };
    let took = started.elapsed();
    let after = rows::after(pool, seeded).await?;
    let moderation = link
        .moderation_for(&event_id, Duration::from_secs(5))
        .await?;
    let moved = counters_after(&args.metrics_url, &before).await;
    say(out, &outcome_story(&ledger, took, seeded, &after))?;
    say(out, &moderation_story(moderation.as_ref(), &args.publish))?;
    say(out, &metrics_story(&args.metrics_url, &before, &moved))?;
    say(
        out,
        &format!(
            "\nWhat was removed, verbatim: toolcall-recovery ledger --message {} --show-text\n\
             Undo it:                    toolcall-recovery revert --message {}",
            seeded.message, seeded.message
        ),
    )
}

/// The `message.finalized` event the chat app would publish (docs/contract.md).
fn event(event_id: &str, seeded: Seeded) -> String {
    json!({
        "event_id": event_id,
        "type": "message.finalized",
        "occurred_at": chrono::Utc::now().to_rfc3339(),
        "message": {
            "id": seeded.message,
            "chat_id": seeded.chat,
            "agent_id": seeded.agent,
            "role": "assistant",
            "content": LEAK,
            "tools_used": [],
            "model_id": "gemini-2.5-flash",
        }
    })
    .to_string()
}

fn seeded_story(seeded: Seeded, database: &DatabaseSettings) -> String {
    format!(
        "Seeded on {} (a development database):\n  agent {} (save_memory enabled), chat {}, \
         and assistant message {}:\n\n    {LEAK}\n",
        database.database_url, seeded.agent, seeded.chat, seeded.message
    )
}

/// `  label:            value`, the columns of the story.
fn field(label: &str, value: impl std::fmt::Display) -> String {
    format!("  {:<18}{value}", format!("{label}:"))
}

fn outcome_story(ledger: &LedgerRow, took: Duration, seeded: Seeded, after: &After) -> String {
    let families = ledger.summary["families"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let verb = if ledger.mode == "observe" {
        "observed it (TCR_MODE=observe: it recorded what recovery would do and changed nothing)"
    } else {
        "recovered it"
    };
    let mut lines = vec![
        format!(
            "The worker {verb} within {}. Ledger row {}: outcome {}, family {families}, {} \
             bytes removed.",
            if took < Duration::from_secs(1) {
                format!("{} ms", took.as_millis().max(1))
            } else {
                format!("{:.1} s", took.as_secs_f64())
            },
            ledger.id,
            ledger.outcome,
            ledger.summary["bytes_removed"]
        ),
        field(
            &format!("message {} now", seeded.message),
            after.content.as_deref().unwrap_or("(null)"),
        ),
        field("its tools_used", &after.tools_used),
    ];
    for (id, kind, content) in &after.memories {
        lines.push(field(&format!("memory {id}"), format!("{kind}: {content}")));
    }
    if after.memories.is_empty() {
        lines.push(field("memories", "none"));
    }
    for (id, name, content) in &after.tool_messages {
        lines.push(field(
            &format!("tool message {id}"),
            format!(
                "{}: {}",
                name.as_deref().unwrap_or("-"),
                content.as_deref().unwrap_or("")
            ),
        ));
    }
    lines.join("\n")
}

fn moderation_story(moderation: Option<&Value>, publish: &PublishSettings) -> String {
    let value = match moderation {
        Some(m) => format!(
            "on {} / message.ready, outcome {}: {}",
            publish.moderation_exchange,
            m["recovery"]["outcome"].as_str().unwrap_or("-"),
            m["message"]["content"]
        ),
        None => format!(
            "nothing seen on {} within 5 s (the worker's outbox relay sends what stayed \
             pending)",
            publish.moderation_exchange
        ),
    };
    field("moderation", value)
}

/// The counters' values now (`None`: the page or the sample is not there).
async fn counters(url: &str) -> Result<Vec<Option<f64>>, String> {
    let page = scrape::get(url).await?;
    Ok(COUNTERS
        .iter()
        .map(|(name, labels)| scrape::sample(&page, name, labels))
        .collect())
}

/// The counters once the first one moved past `before` (the worker counts the event after
/// its ack, a moment after the ledger row), or as they are after 5 s.
async fn counters_after(
    url: &str,
    before: &Result<Vec<Option<f64>>, String>,
) -> Result<Vec<Option<f64>>, String> {
    let Ok(before) = before else {
        return counters(url).await;
    };
    let first_before = before[0].unwrap_or(0.0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = counters(url).await;
        let moved = matches!(&now, Ok(v) if v[0].is_some_and(|n| n > first_before));
        if moved || Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn metrics_story(
    url: &str,
    before: &Result<Vec<Option<f64>>, String>,
    after: &Result<Vec<Option<f64>>, String>,
) -> String {
    let (before, after) = match (before, after) {
        (Ok(b), Ok(a)) => (b, a),
        (Err(e), _) | (_, Err(e)) => return field("metrics", format!("not read: {e}")),
    };
    // A counter not yet on the page was never incremented: 0.
    let shown = |v: Option<f64>| v.unwrap_or(0.0).to_string();
    let mut lines = vec![format!("  metrics ({url}):")];
    for (i, (name, labels)) in COUNTERS.iter().enumerate() {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        lines.push(format!(
            "    {name}{{{}}}  {} -> {}",
            labels.join(","),
            shown(before[i]),
            shown(after[i])
        ));
    }
    lines.join("\n")
}

fn say(out: &mut (dyn Write + Send), text: &str) -> Result<(), Error> {
    writeln!(out, "{text}").map_err(Error::Output)
}
