//! `toolcall-recovery demo`: see it work. Against the services of the README's run command,
//! with the worker running, it seeds an assistant message with a leaked save_memory result
//! (a new agent with the tool, a new chat), publishes the message's finalized event, waits
//! for the worker's ledger row, and prints what the worker made of it: the cleaned message,
//! the memory, the tool message, the moderation message and the metrics that moved.
//!
//! Production stays safe twice over: it runs only on a development database (app tables
//! the worker created for development carry [`store::DEVELOPMENT_MARK`]), and there it
//! writes only its own three rows; on the broker it publishes its one event and reads a
//! queue of its own (declaring no exchange).
//!
//! Nothing is written or published before a worker is seen: its metrics URL must answer
//! with a toolcall-recovery worker's page that says it is consuming ([`require_worker`]).
//! Without one the demo says how to start it and leaves the database and the broker as
//! they were; an event published with no worker would wait in its queue, and its rows with
//! it. When the event is unroutable after all (the worker's queue is bound under other
//! names), the three rows are removed again.
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
/// is not a development one, the worker's tables are missing, no worker answers at
/// `--metrics-url` (before anything is written or published), no queue takes the event, or
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
        require_worker(&args.metrics_url).await?;
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

/// A worker is there: its metrics page answers, is a toolcall-recovery worker's, and says
/// it is consuming. Checked before anything is written or published.
async fn require_worker(metrics_url: &str) -> Result<(), Error> {
    let page = scrape::get(metrics_url).await.map_err(|e| {
        Error::Startup(format!(
            "no worker answers at {metrics_url} ({e}), so nothing was written or published. \
             Start one in another terminal ({RUN_COMMAND}), or give the demo \
             --metrics-url=http://HOST:PORT/metrics of one that runs elsewhere"
        ))
    })?;
    match scrape::sample(&page, "toolcall_recovery_broker_consuming", &[]) {
        None => Err(Error::Startup(format!(
            "{metrics_url} answers, but not with a toolcall-recovery worker's metrics; nothing \
             was written or published. Give the demo the worker's address (--metrics-url), \
             or start one ({RUN_COMMAND})"
        ))),
        Some(c) if c < 1.0 => Err(Error::Startup(format!(
            "the worker at {metrics_url} is not consuming (its broker connection is down, or \
             it is starting: its /readyz and its log say which); nothing was written or \
             published. Run the demo again once /readyz answers 200"
        ))),
        Some(_) => Ok(()),
    }
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
                "no queue takes events on {} / {}: the worker at {} consumes under other \
                 names (give the demo its --input-exchange and --queue), or it stopped; its \
                 agent, chat and message were removed, nothing waits anywhere",
                args.names.input_exchange, args.names.input_routing_key, args.metrics_url
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
        // The event is in the worker's queue now, out of the demo's hands: its rows stay, so
        // that the worker can still recover the message when it gets to the event.
        return Err(Error::Startup(format!(
            "the worker recorded nothing for message {} within {} s: is it running on this \
             database ({})? Its log says what it did with event {event_id}. The demo's agent \
             {}, chat {} and message {} stay for that event (`toolcall-recovery ledger \
             --message {}` shows when it is recovered)",
            seeded.message,
            args.wait_secs,
            args.database.database_url,
            seeded.agent,
            seeded.chat,
            seeded.message,
            seeded.message
        )));
    };
    let took = started.elapsed();
    let after = rows::after(pool, seeded).await?;
    let moderation = link
        .moderation_for(&event_id, Duration::from_secs(5))
        .await?;
    let moved = counters_after(&args.metrics_url, &before).await;
    let (headline, mut rows) = outcome_story(&ledger, took, seeded, &after);
    rows.push(moderation_story(moderation.as_ref(), &args.publish));
    say(out, &headline)?;
    say(out, &columns(&rows))?;
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

/// A `label: value` row of the story.
type Row = (String, String);

fn row(label: impl Into<String>, value: impl std::fmt::Display) -> Row {
    (label.into(), value.to_string())
}

/// The width the labels of the story are padded to, at least (the README's example).
const LABEL_WIDTH: usize = 18;

/// `  label:            value` rows, the values in one column however long the labels
/// (`message 9223372036854775807 now:`) are.
fn columns(rows: &[Row]) -> String {
    let width = rows
        .iter()
        .map(|(label, _)| label.chars().count() + 2)
        .max()
        .unwrap_or(0)
        .max(LABEL_WIDTH);
    rows.iter()
        .map(|(label, value)| format!("  {:<width$}{value}", format!("{label}:")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One row on its own.
fn field(label: &str, value: impl std::fmt::Display) -> String {
    columns(&[row(label, value)])
}

/// The headline and the rows of what the worker did.
fn outcome_story(
    ledger: &LedgerRow,
    took: Duration,
    seeded: Seeded,
    after: &After,
) -> (String, Vec<Row>) {
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
    let headline = format!(
        "The worker {verb} within {}. Ledger row {}: outcome {}, family {families}, {} bytes \
         removed.",
        if took < Duration::from_secs(1) {
            format!("{} ms", took.as_millis().max(1))
        } else {
            format!("{:.1} s", took.as_secs_f64())
        },
        ledger.id,
        ledger.outcome,
        ledger.summary["bytes_removed"]
    );
    let mut rows = vec![
        row(
            format!("message {} now", seeded.message),
            after.content.as_deref().unwrap_or("(null)"),
        ),
        row("its tools_used", &after.tools_used),
    ];
    for (id, kind, content) in &after.memories {
        rows.push(row(format!("memory {id}"), format!("{kind}: {content}")));
    }
    if after.memories.is_empty() {
        rows.push(row("memories", "none"));
    }
    for (id, name, content) in &after.tool_messages {
        rows.push(row(
            format!("tool message {id}"),
            format!(
                "{}: {}",
                name.as_deref().unwrap_or("-"),
                content.as_deref().unwrap_or("")
            ),
        ));
    }
    (headline, rows)
}

fn moderation_story(moderation: Option<&Value>, publish: &PublishSettings) -> Row {
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
    row("moderation", value)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The column where each row's value starts.
    fn value_columns(text: &str, values: &[&str]) -> Vec<usize> {
        text.lines()
            .zip(values)
            .map(|(line, value)| line.find(value).expect("the value is on its line"))
            .collect()
    }

    #[test]
    fn the_values_stay_in_one_column_for_long_ids() {
        let ledger = LedgerRow {
            id: 1,
            outcome: "recovered".into(),
            mode: "recover".into(),
            summary: json!({"families": ["result_prefix"], "bytes_removed": 100}),
        };
        let big = 9_223_372_036_854_775_000;
        let seeded = Seeded {
            agent: big,
            chat: big + 1,
            message: big + 2,
        };
        let after = After {
            content: Some("CLEANED".into()),
            tools_used: json!(["TOOLS"]),
            memories: vec![(big + 3, "journal".into(), "MEMORY".into())],
            tool_messages: vec![(big + 4, Some("save_memory".into()), Some("TOOL".into()))],
        };
        let (_, rows) = outcome_story(&ledger, Duration::from_millis(5), seeded, &after);
        let text = columns(&rows);
        let at = value_columns(&text, &["CLEANED", "[\"TOOLS\"]", "journal", "save_memory"]);
        assert!(at.windows(2).all(|w| w[0] == w[1]), "{at:?}:\n{text}");
        assert!(
            text.contains(&format!("message {} now:  CLEANED", big + 2)),
            "two spaces after the longest label:\n{text}"
        );

        // Short ids keep the README's column.
        let small = Seeded {
            agent: 1,
            chat: 1,
            message: 1,
        };
        let after = After {
            memories: vec![(1, "journal".into(), "MEMORY".into())],
            tool_messages: vec![(2, Some("save_memory".into()), Some("TOOL".into()))],
            ..after
        };
        let (_, rows) = outcome_story(&ledger, Duration::from_millis(5), small, &after);
        let text = columns(&rows);
        assert!(text.starts_with("  message 1 now:    CLEANED"), "{text}");
        assert!(text.contains("\n  memory 1:         journal"), "{text}");
    }
}
