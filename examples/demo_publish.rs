//! Demo traffic for a running toolcall-recovery worker: makes the dashboard move.
//!
//! The worker re-reads every message from the database (the database is the source of
//! truth; an event whose message row does not exist is dead-lettered as
//! `missing_message`), so this publisher first writes what the chat app would have written:
//! two agents (one with `save_memory` and `web_search` enabled, one with no tools) and a
//! chat, then, for every event, an assistant message row, and only then publishes its
//! `message.finalized` event (contract §5) with publisher confirms.
//!
//! The messages cycle through clean answers (about half) and leaks of several families:
//! result-prefix objects (`{success: true, memory_type: "journal", content: "..."}Reply`),
//! Hermes `<tool_call>` blocks, MiniMax `<invoke>` blocks, Mistral `[TOOL_CALLS]`, a
//! result-only object, a call to a tool the worker forwards (`web_search`), and
//! save_memory for an agent without the tool. Every `poison_every`-th event is poison (a
//! malformed body, or an event for a message that does not exist) so the dead-letter
//! panel shows something too.
//!
//! It also binds two small queues (`demo.moderation`, `demo.tool_calls`, capped at 10 000
//! messages) to the worker's output exchanges, standing in for the moderation service and
//! the tool runner, so those publishes are routable.
//!
//! ```text
//! cargo run --example demo_publish -- --rate 4 --count 200
//! docker-compose --profile demo up -d      # the same, in the compose stack
//! ```
//!
//! Settings come from flags or the environment (`DATABASE_URL`, `AMQP_URL`, `DEMO_RATE`,
//! `DEMO_COUNT`, `DEMO_POISON_EVERY`, `DEMO_METRICS_URL`, `TCR_INPUT_EXCHANGE`, ...). It
//! writes nothing before a worker answers at its metrics URL (it waits up to two minutes
//! for one, as for the worker's migrations: an event published with no worker would wait in
//! its queue, its rows with it), and it stops at the first event no queue takes, taking
//! that event's message row back.

use clap::Parser;
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::publisher_confirm::Confirmation;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Publishes sample finalized-message events (clean messages and leaked tool calls).
#[derive(Parser, Debug)]
#[command(name = "demo_publish")]
struct Args {
    /// PostgreSQL URL of the worker's database (the chat app's tables).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/toolcall_recovery"
    )]
    database_url: String,
    /// RabbitMQ URL.
    #[arg(
        long,
        env = "AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    amqp_url: String,
    /// Events per second.
    #[arg(long, env = "DEMO_RATE", default_value_t = 4.0)]
    rate: f64,
    /// Events to publish; 0 publishes until stopped.
    #[arg(long, env = "DEMO_COUNT", default_value_t = 0)]
    count: u64,
    /// Every N-th event is poison (dead-lettered by the worker); 0 for none.
    #[arg(long, env = "DEMO_POISON_EVERY", default_value_t = 40)]
    poison_every: u64,
    /// Exchange the worker consumes from.
    #[arg(long, env = "TCR_INPUT_EXCHANGE", default_value = "chat.events")]
    input_exchange: String,
    /// Routing key of finalized messages.
    #[arg(
        long,
        env = "TCR_INPUT_ROUTING_KEY",
        default_value = "message.finalized"
    )]
    input_routing_key: String,
    /// Exchange the worker publishes moderation messages to.
    #[arg(
        long,
        env = "TCR_MODERATION_EXCHANGE",
        default_value = "chat.moderation"
    )]
    moderation_exchange: String,
    /// The running worker's metrics: nothing is written or published before it answers.
    #[arg(
        long,
        env = "DEMO_METRICS_URL",
        default_value = "http://127.0.0.1:9090/metrics"
    )]
    metrics_url: String,
    /// Exchange the worker publishes unrunnable calls to.
    #[arg(
        long,
        env = "TCR_TOOL_CALLS_EXCHANGE",
        default_value = "chat.tool_calls"
    )]
    tool_calls_exchange: String,
}

/// Which demo agent a sample message belongs to.
#[derive(Clone, Copy)]
enum Agent {
    /// Has `save_memory` and `web_search` enabled.
    WithTools,
    /// Has no tool enabled.
    NoTools,
}

/// The sample messages, in publishing order. About half are clean.
const SAMPLES: &[(Agent, &str)] = &[
    (Agent::WithTools, "Sure! Tomorrow's plan: stretch at 7, write until 10, then the long walk you promised yourself."),
    (Agent::WithTools, "{success: true, memory_type: \"journal\", content: \"Finished the first draft of the novel's opening chapter.\"}That's a real milestone. How does it feel to have it on paper?"),
    (Agent::WithTools, "In JSON a tool call looks like `{\"name\": \"save_memory\"}`; the app runs it for you."),
    (Agent::WithTools, "Got it, I'll keep that in mind.\n<tool_call>{\"name\": \"save_memory\", \"arguments\": {\"content\": \"Prefers green tea over coffee in the afternoon\", \"memory_type\": \"preference\"}}</tool_call>"),
    (Agent::WithTools, "Here is the template you asked for: {name}, welcome to the team!"),
    (Agent::WithTools, "<minimax:tool_call><invoke name=\"save_memory\"><parameter name=\"content\">Birthday is on May 3</parameter><parameter name=\"memory_type\">fact</parameter></invoke></minimax:tool_call>Happy early birthday, by the way!"),
    (Agent::WithTools, "The set {x | x > 0} is the positive numbers; nothing more to it."),
    (Agent::WithTools, "<tool_call>{\"name\": \"web_search\", \"arguments\": {\"query\": \"weather in Lisbon this weekend\"}}</tool_call>Let me look that up for you."),
    (Agent::WithTools, "```xml\n<tool_call>{\"name\": \"save_memory\"}</tool_call>\n```\nThat is the markup some models print by mistake."),
    (Agent::WithTools, "[TOOL_CALLS][{\"name\": \"save_memory\", \"arguments\": {\"content\": \"Allergic to peanuts\", \"memory_type\": \"core\"}}]"),
    (Agent::WithTools, "You're right, I misread the date. The appointment is on Thursday."),
    (Agent::NoTools, "{success: true, memory_type: \"goal\", content: \"Wants to run a half marathon in spring\"}A spring half marathon is a great goal."),
    (Agent::WithTools, "{success: true, memory_type: \"fact\", content: \"Has two cats, Miso and Tofu\"}"),
    (Agent::WithTools, "Good morning! Ready when you are."),
    (Agent::WithTools, "{success: true, memory_type: \"journal\", content: \"I lost track of the days this week.\"}You saw right through me."),
    (Agent::WithTools, "No worries at all. Take the time you need."),
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("demo_publish: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), BoxError> {
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy(&args.database_url)?;
    wait_for_worker(&args.metrics_url).await?;
    wait_for_tables(&pool).await?;
    let with_tools = agent(
        &pool,
        "Demo agent (save_memory, web_search)",
        &["save_memory", "web_search"],
    )
    .await?;
    let no_tools = agent(&pool, "Demo agent (no tools)", &[]).await?;
    let chat: i64 = sqlx::query_scalar("INSERT INTO chats DEFAULT VALUES RETURNING id")
        .fetch_one(&pool)
        .await?;

    let (_connection, channel) = broker(&args).await?;
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(0.01));
    println!(
        "demo_publish: chat {chat}, agents {with_tools} (tools) and {no_tools} (none); {} events/s to {} / {}{}",
        args.rate,
        args.input_exchange,
        args.input_routing_key,
        if args.count == 0 { String::new() } else { format!(", {} events", args.count) }
    );
    let mut sent: u64 = 0;
    let mut ticker = tokio::time::interval(interval);
    loop {
        if args.count != 0 && sent >= args.count {
            break;
        }
        ticker.tick().await;
        sent += 1;
        // The message row of this event, to take back if nobody takes the event.
        let mut written = None;
        let body = if args.poison_every != 0 && sent % args.poison_every == 0 {
            poison(sent / args.poison_every, sent, chat, with_tools)
        } else {
            let (who, content) = SAMPLES[(sent as usize - 1) % SAMPLES.len()];
            let agent_id = match who {
                Agent::WithTools => with_tools,
                Agent::NoTools => no_tools,
            };
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO messages (chat_id, agent_id, role, content, tools_used) \
                 VALUES ($1, $2, 'assistant', $3, '[]'::jsonb) RETURNING id",
            )
            .bind(chat)
            .bind(agent_id)
            .bind(content)
            .fetch_one(&pool)
            .await?;
            written = Some(id);
            event(id, chat, Some(agent_id), Some(content))
        };
        if let Err(e) = publish(&channel, &args, &body).await {
            // Nobody will look at a message whose event went nowhere: take it back, and the
            // chat too when nothing else of it reached the worker.
            if let Some(id) = written.take() {
                sqlx::query("DELETE FROM messages WHERE id = $1")
                    .bind(id)
                    .execute(&pool)
                    .await?;
            }
            sqlx::query(
                "DELETE FROM chats c WHERE id = $1 \
                 AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.chat_id = c.id)",
            )
            .bind(chat)
            .execute(&pool)
            .await?;
            return Err(e);
        }
        if sent % 50 == 0 {
            println!("demo_publish: {sent} events published");
        }
    }
    println!("demo_publish: done, {sent} events published");
    Ok(())
}

/// Waits until a worker answers at `url` (its `/metrics`), for at most two minutes.
async fn wait_for_worker(url: &str) -> Result<(), BoxError> {
    for attempt in 1..=120 {
        match metrics_status(url).await {
            Ok(200) => return Ok(()),
            Ok(status) if attempt % 10 == 1 => {
                println!("demo_publish: waiting for the worker: {url} answered {status}");
            }
            Err(e) if attempt % 10 == 1 => {
                println!("demo_publish: waiting for the worker at {url}: {e}");
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(format!(
        "no worker answered at {url} within 2 minutes, so nothing was written or published: \
         start one (cargo run --release -- run --migrate), or pass --metrics-url"
    )
    .into())
}

/// The status of `GET url` (`http://host:port/path`).
async fn metrics_status(url: &str) -> Result<u16, BoxError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url} is not an http:// URL"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(host).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
            .await?;
        let mut head = [0u8; 16];
        let n = stream.read(&mut head).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&head[..n]).into_owned())
    };
    let head = tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .map_err(|_| format!("{url} did not answer within 5 s"))??;
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{url} sent no HTTP status").into())
}

/// Waits until the worker's migrations created the chat app's tables.
async fn wait_for_tables(pool: &PgPool) -> Result<(), BoxError> {
    for attempt in 1..=120 {
        let ready: Result<bool, sqlx::Error> = sqlx::query_scalar(
            "SELECT to_regclass('messages') IS NOT NULL AND to_regclass('agents') IS NOT NULL",
        )
        .fetch_one(pool)
        .await;
        match ready {
            Ok(true) => return Ok(()),
            Ok(false) if attempt % 10 == 1 => {
                println!(
                    "demo_publish: waiting for the worker's migrations (no messages table yet)"
                );
            }
            Err(e) if attempt % 10 == 1 => println!("demo_publish: waiting for the database: {e}"),
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err("the messages table did not appear within 2 minutes: is the worker migrated?".into())
}

/// The id of the demo agent with this name, created when missing.
async fn agent(pool: &PgPool, name: &str, tools: &[&str]) -> Result<i64, BoxError> {
    let tools: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
    let existing: Option<i64> =
        sqlx::query_scalar("SELECT id FROM agents WHERE name = $1 ORDER BY id LIMIT 1")
            .bind(name)
            .fetch_optional(pool)
            .await?;
    if let Some(id) = existing {
        sqlx::query("UPDATE agents SET enabled_tools = $2 WHERE id = $1")
            .bind(id)
            .bind(&tools)
            .execute(pool)
            .await?;
        return Ok(id);
    }
    Ok(
        sqlx::query_scalar("INSERT INTO agents (name, enabled_tools) VALUES ($1, $2) RETURNING id")
            .bind(name)
            .bind(&tools)
            .fetch_one(pool)
            .await?,
    )
}

/// Connects, declares the worker's exchanges (same arguments as the worker, so the
/// declares are idempotent) and binds the stand-in consumer queues.
async fn broker(args: &Args) -> Result<(Connection, Channel), BoxError> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio)
        .with_connection_name(LongString::from("toolcall-recovery-demo".to_string()));
    let mut attempt = 0;
    let connection = loop {
        attempt += 1;
        match Connection::connect(&args.amqp_url, props.clone()).await {
            Ok(c) => break c,
            Err(e) if attempt < 60 => {
                println!("demo_publish: waiting for the broker: {e}");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for exchange in [
        &args.input_exchange,
        &args.moderation_exchange,
        &args.tool_calls_exchange,
    ] {
        channel
            .exchange_declare(
                exchange,
                ExchangeKind::Topic,
                durable,
                FieldTable::default(),
            )
            .await?;
    }
    for (queue, exchange, key) in [
        (
            "demo.moderation",
            &args.moderation_exchange,
            "message.ready",
        ),
        (
            "demo.tool_calls",
            &args.tool_calls_exchange,
            "tool_call.recovered",
        ),
    ] {
        let mut capped = FieldTable::default();
        capped.insert(
            ShortString::from("x-max-length"),
            AMQPValue::LongLongInt(10_000),
        );
        capped.insert(
            ShortString::from("x-overflow"),
            AMQPValue::LongString(LongString::from("drop-head".to_string())),
        );
        channel
            .queue_declare(
                queue,
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                capped,
            )
            .await?;
        channel
            .queue_bind(
                queue,
                exchange,
                key,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    Ok((connection, channel))
}

/// Model ids as providers spell them, so the dashboard's Models row shows several models,
/// one of them outside the default list (`other`) and events without one (`unknown`).
const MODEL_IDS: [Option<&str>; 7] = [
    Some("models/gemini-2.5-flash-preview-05-20"),
    Some("google/gemini-2.5-flash"),
    Some("openai/gpt-4o-mini-2024-07-18"),
    Some("anthropic/claude-sonnet-4-20250514"),
    Some("qwen/qwen3-235b-a22b-2507"),
    Some("acme-support-finetune"),
    None,
];

/// A `message.finalized` event body (contract §5).
fn event(id: i64, chat: i64, agent: Option<i64>, content: Option<&str>) -> Vec<u8> {
    let model = MODEL_IDS[usize::try_from(id).unwrap_or(0) % MODEL_IDS.len()];
    json!({
        "event_id": uuid::Uuid::new_v4(),
        "type": "message.finalized",
        "occurred_at": chrono::Utc::now().to_rfc3339(),
        "message": {
            "id": id,
            "chat_id": chat,
            "agent_id": agent,
            "role": "assistant",
            "content": content,
            "tools_used": [],
            "model_id": model
        }
    })
    .to_string()
    .into_bytes()
}

/// A body the worker dead-letters: malformed JSON, or an event for a message that does not
/// exist (alternately).
fn poison(nth: u64, n: u64, chat: i64, agent: i64) -> Vec<u8> {
    if nth % 2 == 1 {
        b"{\"event_id\": \"not even json".to_vec()
    } else {
        // A leak, so the worker looks the message up (a clean event needs no database).
        let content = "{success: true, memory_type: \"fact\", content: \"never stored\"}Hi!";
        event(i64::MAX - n as i64, chat, Some(agent), Some(content))
    }
}

async fn publish(channel: &Channel, args: &Args, body: &[u8]) -> Result<(), BoxError> {
    let confirm = channel
        .basic_publish(
            &args.input_exchange,
            &args.input_routing_key,
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            body,
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_content_type(ShortString::from("application/json"))
                .with_app_id(ShortString::from("toolcall-recovery-demo")),
        )
        .await?
        .await?;
    match confirm {
        Confirmation::Ack(None) | Confirmation::NotRequested => Ok(()),
        Confirmation::Ack(Some(_)) => Err(format!(
            "the broker returned the event as unroutable: is the worker's queue bound to {} / {}?",
            args.input_exchange, args.input_routing_key
        )
        .into()),
        Confirmation::Nack(_) => Err("the broker refused the event (nack)".into()),
    }
}
