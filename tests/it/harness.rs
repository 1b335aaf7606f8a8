//! The test harness: each test gets its own database (random name, migrations applied),
//! its own exchange and queue names (random suffix), and a worker started in-process
//! through the library. Tests talk to it only through the broker, the database and HTTP.

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer, ExchangeKind};
use serde_json::{json, Value};
use sqlx::{PgPool, Row};
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolcall_recovery::settings::{DatabaseSettings, SecretUrl, Settings};
use toolcall_recovery::startup::{self, Running};
use toolcall_recovery::store;
use uuid::Uuid;

pub const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432";
pub const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A leak the result_prefix family recognises as a save_memory result.
pub fn result_prefix_leak(content: &str, memory_type: &str, reply: &str) -> String {
    format!("{{success: true, memory_type: \"{memory_type}\", content: \"{content}\"}}{reply}")
}

/// A hermes-style leaked call.
pub fn hermes_leak(name: &str, arguments: Value, before: &str, after: &str) -> String {
    format!(
        "{before}<tool_call>{}</tool_call>{after}",
        json!({"name": name, "arguments": arguments})
    )
}

/// Runs a statement on the `postgres` database (the test's own may refuse connections).
pub async fn on_postgres(sql: &str) {
    let pool = PgPool::connect(&format!("{PG_BASE}/postgres"))
        .await
        .expect("admin");
    sqlx::query(sql).execute(&pool).await.expect(sql);
    pool.close().await;
}

/// The stderr lines of a spawned binary.
#[derive(Clone, Default)]
pub struct BinaryLog(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl BinaryLog {
    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().expect("log lock").clone()
    }
}

/// Everything one test uses.
pub struct TestApp {
    pub db_url: String,
    pub db_name: String,
    pub pool: PgPool,
    pub settings: Settings,
    pub running: Option<Running>,
    pub http_addr: Option<SocketAddr>,
    pub amqp: Connection,
    pub channel: Channel,
    pub moderation_queue: String,
    pub tool_calls_queue: String,
}

/// Settings for a worker on this test's names, with a random HTTP port.
pub fn test_settings(suffix: &str, db_url: &str) -> Settings {
    use clap::Parser;
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        s: Settings,
    }
    let queue = format!("tcr-test.{suffix}.finalized");
    let args: Vec<String> = vec![
        "test".into(),
        format!("--database-url={db_url}"),
        format!("--amqp-url={AMQP_URL}"),
        format!("--connection-name=tcr-test-{suffix}"),
        format!("--input-exchange=tcr-test.{suffix}.events"),
        format!("--queue={queue}"),
        format!("--dead-letter-exchange=tcr-test.{suffix}.dlx"),
        format!("--dead-letter-queue=tcr-test.{suffix}.dead"),
        format!("--moderation-exchange=tcr-test.{suffix}.moderation"),
        format!("--tool-calls-exchange=tcr-test.{suffix}.tool_calls"),
        "--http-addr=127.0.0.1:0".into(),
        "--prefetch=16".into(),
        "--concurrency=4".into(),
        "--drain-timeout-secs=10".into(),
        "--db-max-connections=5".into(),
        // A missing message is waited for (the app may publish before its commit is
        // visible); tests that are not about that wait little.
        "--missing-message-retry-secs=1".into(),
        "--outbox-relay-secs=1".into(),
        "--outbox-grace-secs=2".into(),
    ];
    P::parse_from(args).s
}

/// Deletes the queues and exchanges a worker with these settings declares, so that tests
/// leave nothing on the broker (quorum queues are not free: each is a Raft group).
pub async fn delete_topology(channel: &Channel, s: &Settings) {
    let n = &s.names;
    for q in [&n.queue, &n.dead_letter_queue] {
        let _ = channel.queue_delete(q, QueueDeleteOptions::default()).await;
    }
    for e in [
        &n.input_exchange,
        &n.dead_letter_exchange,
        &s.publish.moderation_exchange,
        &s.publish.tool_calls_exchange,
    ] {
        let _ = channel
            .exchange_delete(e, ExchangeDeleteOptions::default())
            .await;
    }
}

/// [`delete_topology`] on a connection of its own.
pub async fn delete_topology_of(s: &Settings) {
    if let Ok(conn) = Connection::connect(AMQP_URL, ConnectionProperties::default()).await {
        if let Ok(channel) = conn.create_channel().await {
            delete_topology(&channel, s).await;
        }
        let _ = conn.close(200, "done").await;
    }
}

impl TestApp {
    /// A fresh database and names, the test's own queues bound to the worker's output
    /// exchanges, and a started worker.
    pub async fn spawn() -> TestApp {
        let mut app = TestApp::prepare().await;
        app.start().await;
        app
    }

    /// Like [`TestApp::spawn`] without starting the worker.
    pub async fn prepare() -> TestApp {
        if std::env::var_os("TCR_TEST_LOG").is_some() {
            toolcall_recovery::telemetry::init(toolcall_recovery::settings::LogFormat::Pretty);
        }
        let suffix = Uuid::new_v4().simple().to_string()[..12].to_string();
        let db_name = format!("tcr_test_{suffix}");
        let db_url = format!("{PG_BASE}/{db_name}");
        let db = DatabaseSettings {
            database_url: SecretUrl::new(db_url.clone()),
            db_max_connections: 5,
        };
        // The test database stands in for the chat app's: created with its tables, as the
        // development setup does.
        let setup = store::connect(&db, store::Provision::Development)
            .await
            .expect("test database");
        store::create_app_tables(&setup).await.expect("app tables");
        store::migrate(&setup).await.expect("migrations");
        setup.close().await;
        // The harness's own connections carry another application_name, so that fault
        // tests can terminate the worker's connections only.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(5)
            .connect_with(
                db_url
                    .parse::<sqlx::postgres::PgConnectOptions>()
                    .expect("url")
                    .application_name("tcr-test-harness"),
            )
            .await
            .expect("harness pool");
        let settings = test_settings(&suffix, &db_url);
        let amqp = Connection::connect(
            AMQP_URL,
            ConnectionProperties::default()
                .with_executor(tokio_executor_trait::Tokio::current())
                .with_reactor(tokio_reactor_trait::Tokio)
                .with_connection_name(format!("tcr-harness-{suffix}").into()),
        )
        .await
        .expect("broker");
        let channel = amqp.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirms");
        let moderation_queue = format!("tcr-test.{suffix}.moderation-sink");
        let tool_calls_queue = format!("tcr-test.{suffix}.tool-calls-sink");
        for (exchange, queue, key) in [
            (
                &settings.publish.moderation_exchange,
                &moderation_queue,
                "message.ready",
            ),
            (
                &settings.publish.tool_calls_exchange,
                &tool_calls_queue,
                "tool_call.recovered",
            ),
        ] {
            channel
                .exchange_declare(
                    exchange,
                    ExchangeKind::Topic,
                    ExchangeDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .expect("exchange");
            channel
                .queue_declare(queue, QueueDeclareOptions::default(), FieldTable::default())
                .await
                .expect("queue");
            channel
                .queue_bind(
                    queue,
                    exchange,
                    key,
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .expect("bind");
        }
        TestApp {
            db_url,
            db_name,
            pool,
            settings,
            running: None,
            http_addr: None,
            amqp,
            channel,
            moderation_queue,
            tool_calls_queue,
        }
    }

    /// Starts the in-process worker and waits until it is ready.
    pub async fn start(&mut self) {
        let running = startup::start(self.settings.clone())
            .await
            .expect("worker starts");
        self.http_addr = Some(running.http_addr);
        self.running = Some(running);
        self.wait_ready().await;
    }

    /// Starts a second worker on the same database and names, and waits until it is ready.
    pub async fn start_another(&self) -> Running {
        let mut settings = self.settings.clone();
        settings.connection_name = format!("{}-b", settings.connection_name);
        let running = startup::start(settings)
            .await
            .expect("second worker starts");
        let addr = running.http_addr;
        wait_for("second worker ready", Duration::from_secs(30), || async {
            http_get(addr, "/readyz")
                .await
                .map(|(s, _)| s == 200)
                .unwrap_or(false)
        })
        .await;
        running
    }

    /// Waits until `/readyz` says 200.
    pub async fn wait_ready(&self) {
        let addr = self.http_addr.expect("worker started");
        wait_for("worker ready", Duration::from_secs(30), || async {
            http_get(addr, "/readyz")
                .await
                .map(|(s, _)| s == 200)
                .unwrap_or(false)
        })
        .await;
    }

    /// Shuts the in-process worker down and waits for it.
    pub async fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown();
            tokio::time::timeout(Duration::from_secs(30), r.wait())
                .await
                .expect("worker stops in time")
                .expect("worker stops cleanly");
        }
    }

    /// Stops the worker, deletes the test's queues, exchanges and database.
    pub async fn cleanup(mut self) {
        self.stop().await;
        delete_topology(&self.channel, &self.settings).await;
        for q in [&self.moderation_queue, &self.tool_calls_queue] {
            let _ = self
                .channel
                .queue_delete(q, QueueDeleteOptions::default())
                .await;
        }
        let _ = self.amqp.close(200, "done").await;
        self.pool.close().await;
        if let Ok(admin) = PgPool::connect(&format!("{PG_BASE}/postgres")).await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.db_name
            ))
            .execute(&admin)
            .await;
            admin.close().await;
        }
    }

    // ---- database fixtures ----

    pub async fn create_agent(&self, tools: &[&str]) -> i64 {
        let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
        sqlx::query_scalar(
            "INSERT INTO agents (name, enabled_tools) VALUES ('agent', $1) RETURNING id",
        )
        .bind(tools)
        .fetch_one(&self.pool)
        .await
        .expect("agent")
    }

    pub async fn create_chat(&self) -> i64 {
        sqlx::query_scalar("INSERT INTO chats DEFAULT VALUES RETURNING id")
            .fetch_one(&self.pool)
            .await
            .expect("chat")
    }

    pub async fn create_message(
        &self,
        chat: i64,
        agent: Option<i64>,
        role: &str,
        content: Option<&str>,
        tools_used: &[&str],
    ) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO messages (chat_id, agent_id, role, content, tools_used) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(chat)
        .bind(agent)
        .bind(role)
        .bind(content)
        .bind(sqlx::types::Json(json!(tools_used)))
        .fetch_one(&self.pool)
        .await
        .expect("message")
    }

    /// A save_memory leak whose event the app publishes before its commit is visible: its
    /// message id is taken, its event built, and its row not there until
    /// [`PendingLeak::commit`].
    pub async fn pending_leak(&self) -> PendingLeak {
        let chat = self.create_chat().await;
        let agent = self.create_agent(&["save_memory"]).await;
        let leak = result_prefix_leak("Likes tea", "fact", "Noted.");
        let id: i64 =
            sqlx::query_scalar("SELECT nextval(pg_get_serial_sequence('messages', 'id'))")
                .fetch_one(&self.pool)
                .await
                .expect("an id");
        let event = json!({
            "event_id": Uuid::new_v4().to_string(),
            "type": "message.finalized",
            "occurred_at": "2026-11-22T04:00:00Z",
            "message": {"id": id, "chat_id": chat, "agent_id": agent, "role": "assistant",
                        "content": leak, "tools_used": []}
        });
        PendingLeak {
            id,
            chat,
            agent,
            leak,
            event,
        }
    }

    /// A chat, an agent with `tools` and an assistant message holding `content` in it:
    /// `(chat, agent, message)`.
    pub async fn leak(&self, tools: &[&str], content: &str) -> (i64, i64, i64) {
        let chat = self.create_chat().await;
        let agent = self.create_agent(tools).await;
        let id = self
            .create_message(chat, Some(agent), "assistant", Some(content), &[])
            .await;
        (chat, agent, id)
    }

    /// Holds the row lock of message `id` (as the app writing it would) until the returned
    /// transaction ends: a recovery of that message waits for it.
    pub async fn lock_row(&self, id: i64) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut tx = self.pool.begin().await.expect("begin");
        sqlx::query("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut *tx)
            .await
            .expect("lock the row");
        tx
    }

    /// Makes the test's database refuse connections and ends the worker's own (an outage).
    pub async fn database_down(&self) {
        on_postgres(&format!(
            "ALTER DATABASE \"{}\" ALLOW_CONNECTIONS false",
            self.db_name
        ))
        .await;
        on_postgres(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' \
             AND application_name LIKE 'toolcall-recovery%'",
            self.db_name
        ))
        .await;
    }

    /// Ends [`TestApp::database_down`].
    pub async fn database_up(&self) {
        on_postgres(&format!(
            "ALTER DATABASE \"{}\" ALLOW_CONNECTIONS true",
            self.db_name
        ))
        .await;
    }

    pub async fn message(&self, id: i64) -> (Option<String>, Value) {
        let row = sqlx::query("SELECT content, tools_used FROM messages WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .expect("message row");
        (
            row.get("content"),
            row.get::<sqlx::types::Json<Value>, _>("tools_used").0,
        )
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .expect(sql)
    }

    // ---- broker ----

    /// The event the app would publish for a message row as it is now.
    pub async fn event_for(&self, message_id: i64) -> Value {
        let row = sqlx::query(
            "SELECT chat_id, agent_id, role, content, tools_used FROM messages WHERE id = $1",
        )
        .bind(message_id)
        .fetch_one(&self.pool)
        .await
        .expect("message row");
        json!({
            "event_id": Uuid::new_v4().to_string(),
            "type": "message.finalized",
            "occurred_at": "2026-11-22T04:00:00Z",
            "message": {
                "id": message_id,
                "chat_id": row.get::<i64, _>("chat_id"),
                "agent_id": row.get::<Option<i64>, _>("agent_id"),
                "role": row.get::<String, _>("role"),
                "content": row.get::<Option<String>, _>("content"),
                "tools_used": row.get::<sqlx::types::Json<Value>, _>("tools_used").0,
                "model_id": "gemini-2.5-flash",
                "some_future_field": {"ignored": true},
            }
        })
    }

    pub async fn publish_event(&self, event: &Value) {
        self.publish_raw(&serde_json::to_vec(event).expect("json"))
            .await;
    }

    pub async fn publish_raw(&self, body: &[u8]) {
        let n = &self.settings.names;
        self.channel
            .basic_publish(
                &n.input_exchange,
                &n.input_routing_key,
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                body,
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
    }

    pub async fn consumer(&self, queue: &str) -> Consumer {
        self.channel
            .basic_consume(
                queue,
                &format!("test-{}", Uuid::new_v4()),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume")
    }

    /// Gets one message from a queue, polling until `timeout`.
    pub async fn get_one(&self, queue: &str, timeout: Duration) -> Option<(Value, FieldTable)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self
                .channel
                .basic_get(queue, BasicGetOptions { no_ack: false })
                .await
                .expect("basic_get")
            {
                m.delivery
                    .acker
                    .ack(BasicAckOptions::default())
                    .await
                    .expect("ack");
                let headers = m.delivery.properties.headers().clone().unwrap_or_default();
                let body = serde_json::from_slice(&m.delivery.data).unwrap_or_else(|_| {
                    Value::String(String::from_utf8_lossy(&m.delivery.data).into_owned())
                });
                return Some((body, headers));
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Messages currently in a queue.
    pub async fn queue_len(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue,
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map(|q| q.message_count())
            .unwrap_or(0)
    }

    /// Command-line arguments that run the binary on this test's database and names.
    pub fn binary_args(&self) -> Vec<String> {
        let s = &self.settings;
        let n = &s.names;
        vec![
            "run".into(),
            format!("--database-url={}", self.db_url),
            format!("--amqp-url={AMQP_URL}"),
            format!("--connection-name={}", s.connection_name),
            format!("--input-exchange={}", n.input_exchange),
            format!("--queue={}", n.queue),
            format!("--dead-letter-exchange={}", n.dead_letter_exchange),
            format!("--dead-letter-queue={}", n.dead_letter_queue),
            format!("--moderation-exchange={}", s.publish.moderation_exchange),
            format!("--tool-calls-exchange={}", s.publish.tool_calls_exchange),
            "--http-addr=127.0.0.1:0".into(),
            "--prefetch=32".into(),
            "--concurrency=8".into(),
            "--drain-timeout-secs=20".into(),
            "--log-format=json".into(),
        ]
    }

    /// Starts the real binary; returns the child, its HTTP address (read off its log) and
    /// its log lines so far (stderr, collected as they come).
    pub async fn spawn_binary(&self) -> (tokio::process::Child, SocketAddr, BinaryLog) {
        self.spawn_binary_with(self.binary_args()).await
    }

    /// [`TestApp::spawn_binary`] with these arguments.
    pub async fn spawn_binary_with(
        &self,
        args: Vec<String>,
    ) -> (tokio::process::Child, SocketAddr, BinaryLog) {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let log = BinaryLog::default();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                sink.0.lock().expect("log lock").push(line);
            }
        });
        let mut addr = None;
        wait_for(
            "binary logs its HTTP address",
            Duration::from_secs(30),
            || {
                addr = log.lines().iter().find_map(|line| {
                    let v = serde_json::from_str::<Value>(line).ok()?;
                    v["http_addr"].as_str()?.parse::<SocketAddr>().ok()
                });
                std::future::ready(addr.is_some())
            },
        )
        .await;
        let addr = addr.expect("address");
        wait_for("binary ready", Duration::from_secs(30), || async {
            http_get(addr, "/readyz")
                .await
                .map(|(s, _)| s == 200)
                .unwrap_or(false)
        })
        .await;
        (child, addr, log)
    }

    /// Creates `n` assistant messages (every third a save_memory leak, every fifth of the
    /// rest a forwarded call) and returns their events and the number of save_memory leaks.
    pub async fn mixed_events(&self, n: usize) -> (Vec<Value>, i64) {
        let chat = self.create_chat().await;
        let agent = self.create_agent(&["save_memory", "web_search"]).await;
        let mut events = Vec::with_capacity(n);
        let mut memories = 0;
        for i in 0..n {
            let content = if i % 3 == 0 {
                memories += 1;
                result_prefix_leak(&format!("memory {i}"), "journal", "Okay.")
            } else if i % 5 == 0 {
                hermes_leak(
                    "web_search",
                    json!({"query": format!("q{i}")}),
                    "Looking. ",
                    "",
                )
            } else {
                format!("Clean answer {i}.")
            };
            let id = self
                .create_message(chat, Some(agent), "assistant", Some(&content), &[])
                .await;
            events.push(self.event_for(id).await);
        }
        (events, memories)
    }

    /// Reads the moderation sink until `n` distinct moderation ids were seen.
    pub async fn wait_moderation_ids(
        &self,
        consumer: &mut Consumer,
        seen: &mut std::collections::HashSet<String>,
        n: usize,
        timeout: Duration,
    ) {
        let deadline = tokio::time::Instant::now() + timeout;
        while seen.len() < n {
            match tokio::time::timeout_at(deadline, consumer.next()).await {
                Ok(Some(Ok(d))) => {
                    d.acker.ack(BasicAckOptions::default()).await.expect("ack");
                    let v: Value = serde_json::from_slice(&d.data).expect("json");
                    if let Some(id) = v["event_id"].as_str() {
                        seen.insert(id.to_string());
                    }
                }
                _ => panic!("only {} of {n} moderation ids arrived in time", seen.len()),
            }
        }
    }

    /// Asserts the final state after `n` mixed events with `memories` save_memory leaks:
    /// exactly one memory, tool message and ledger row per leak.
    pub async fn assert_exactly_once(&self, memories: i64) {
        assert_eq!(
            self.count("SELECT count(*) FROM agent_memories").await,
            memories
        );
        assert_eq!(
            self.count("SELECT count(DISTINCT content) FROM agent_memories")
                .await,
            memories
        );
        assert_eq!(
            self.count("SELECT count(*) FROM messages WHERE role = 'tool'")
                .await,
            memories
        );
        assert_eq!(
            self.count("SELECT count(*) FROM messages WHERE jsonb_array_length(tools_used) > 1")
                .await,
            0
        );
        assert_eq!(
            self.count("SELECT count(*) FROM (SELECT message_id FROM recoveries GROUP BY message_id HAVING count(*) > 1) d").await,
            0
        );
    }

    // ---- HTTP ----

    pub async fn metrics(&self) -> String {
        let addr = self.http_addr.expect("worker started");
        http_get(addr, "/metrics").await.expect("metrics").1
    }

    /// Value of one sample line (`name{labels}`), 0 when absent.
    pub async fn metric(&self, sample: &str) -> f64 {
        metric_value(&self.metrics().await, sample)
    }

    /// Waits until the events counter reaches `n` in total.
    pub async fn wait_events(&self, n: f64, timeout: Duration) {
        wait_for(&format!("{n} events"), timeout, || async {
            total(&self.metrics().await, "toolcall_recovery_events_total") >= n
        })
        .await;
    }
}

/// A leaked message whose row is not committed yet ([`TestApp::pending_leak`]).
pub struct PendingLeak {
    pub id: i64,
    pub chat: i64,
    pub agent: i64,
    /// Its content; recovered, it is `Noted.`.
    pub leak: String,
    pub event: Value,
}

impl PendingLeak {
    /// Commits the message row, as the app's commit becoming visible.
    pub async fn commit(&self, app: &TestApp) {
        sqlx::query(
            "INSERT INTO messages (id, chat_id, agent_id, role, content) \
             VALUES ($1, $2, $3, 'assistant', $4)",
        )
        .bind(self.id)
        .bind(self.chat)
        .bind(self.agent)
        .bind(&self.leak)
        .execute(&app.pool)
        .await
        .expect("the message row");
    }
}

/// Sum of all samples of a metric.
pub fn total(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.starts_with(name)
                && (l[name.len()..].starts_with('{') || l[name.len()..].starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Value of one sample line, 0 when absent.
pub fn metric_value(text: &str, sample: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(sample) && l[sample.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// A minimal HTTP/1.1 GET: status and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    // Chunked bodies: the metrics text is read line-wise, chunk sizes do not match names.
    Some((status, body))
}

/// Polls `cond` until it holds, panicking after `timeout`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The string value of a header.
pub fn header(headers: &FieldTable, name: &str) -> Option<String> {
    match headers.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// Drains a consumer of JSON messages until `n` arrived or `timeout` passed.
pub async fn collect(consumer: &mut Consumer, n: usize, timeout: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    while out.len() < n {
        match tokio::time::timeout_at(deadline, consumer.next()).await {
            Ok(Some(Ok(d))) => {
                d.acker.ack(BasicAckOptions::default()).await.expect("ack");
                out.push(serde_json::from_slice(&d.data).expect("json body"));
            }
            _ => break,
        }
    }
    out
}
