//! Starting up beside a database the app owns (issue #14, part 5), against the real
//! PostgreSQL: a mistyped database is refused and never created; a database without the
//! app's tables is refused with the names of the missing ones; the worker's migrations run
//! as a role that owns nothing of the app's, two at once, over a database an earlier release
//! migrated; the transcript index is a separate step that builds and rebuilds it; and the
//! development setup (`--create-app-tables`) creates what the README's run command needs.

use crate::harness::*;
use sqlx::PgPool;
use std::time::Duration;
use toolcall_recovery::startup;
use toolcall_recovery::store;
use uuid::Uuid;

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", &Uuid::new_v4().simple().to_string()[..12])
}

async fn drop_db(name: &str) {
    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&admin_pool().await)
        .await;
}

async fn admin_pool() -> PgPool {
    PgPool::connect(&format!("{PG_BASE}/postgres"))
        .await
        .unwrap()
}

async fn database_exists(name: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(&admin_pool().await)
        .await
        .unwrap()
}

/// An empty database (no app tables), as a DBA would create one.
async fn empty_database() -> (String, PgPool) {
    let name = unique("tcr_test");
    on_postgres(&format!("CREATE DATABASE \"{name}\"")).await;
    let pool = PgPool::connect(&format!("{PG_BASE}/{name}")).await.unwrap();
    (name, pool)
}

/// A database with the app's tables, as the app (here `postgres`) creates them: the
/// development SQL, without the transcript index.
async fn app_database() -> (String, PgPool) {
    let (name, pool) = empty_database().await;
    store::create_app_tables(&pool).await.unwrap();
    sqlx::query(&format!("DROP INDEX {}", store::TRANSCRIPT_INDEX))
        .execute(&pool)
        .await
        .unwrap();
    (name, pool)
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn cli(args: &[&str]) -> Out {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(args)
        .env("TCR_LOG_FORMAT", "json")
        .output()
        .await
        .unwrap();
    Out {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn table_exists(pool: &PgPool, table: &str) -> bool {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_database_is_refused_and_never_created() {
    let suffix = Uuid::new_v4().simple().to_string()[..12].to_string();
    let name = format!("tcr_test_typo_{suffix}");
    let url = format!("{PG_BASE}/{name}");
    for migrate in [false, true] {
        let mut settings = test_settings(&suffix, &url);
        settings.migrate = migrate;
        let err = match startup::start(settings).await {
            Ok(_) => panic!("started on a database that does not exist"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("does not exist") && err.contains(&name),
            "{err}"
        );
        assert!(err.contains("DATABASE_URL"), "says what to check: {err}");
        assert!(
            !database_exists(&name).await,
            "created (--migrate={migrate})"
        );
    }
    let out = cli(&["migrate", &format!("--database-url={url}")]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
    assert!(!database_exists(&name).await, "created by migrate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_without_the_apps_tables_is_refused() {
    let (name, pool) = empty_database().await;
    let suffix = Uuid::new_v4().simple().to_string()[..12].to_string();
    let mut settings = test_settings(&suffix, &format!("{PG_BASE}/{name}"));
    settings.migrate = true;
    let err = match startup::start(settings).await {
        Ok(_) => panic!("started without the app's tables"),
        Err(e) => e.to_string(),
    };
    for table in store::APP_TABLES {
        assert!(err.contains(table), "names {table}: {err}");
        assert!(!table_exists(&pool, table).await, "{table} created");
    }
    assert!(err.contains("DATABASE_URL"), "{err}");
    // Checked first, created nothing: not even the worker's own tables (issue #24).
    for table in ["_sqlx_migrations", "recoveries", "outbox"] {
        assert!(
            !table_exists(&pool, table).await,
            "{table} created before refusing"
        );
    }
    // `migrate` alone creates the worker's own tables and nothing of the app's.
    let out = cli(&["migrate", &format!("--database-url={PG_BASE}/{name}")]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(table_exists(&pool, "recoveries").await);
    assert!(!table_exists(&pool, "messages").await);
    pool.close().await;
    drop_db(&name).await;
}

/// The development setup: `run --migrate --create-app-tables` on a database that does not
/// exist creates it, the app's tables and the transcript index; without `--migrate` pending
/// migrations are refused and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_development_setup_creates_the_database_and_the_apps_tables() {
    let suffix = Uuid::new_v4().simple().to_string()[..12].to_string();
    let name = format!("tcr_test_{suffix}");
    let mut settings = test_settings(&suffix, &format!("{PG_BASE}/{name}"));
    settings.schema.create_app_tables = true;
    let err = match startup::start(settings.clone()).await {
        Ok(_) => panic!("created things without --migrate"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("does not exist"), "{err}");
    assert!(!database_exists(&name).await);
    settings.migrate = true;
    let topology = settings.clone();
    let running = startup::start(settings)
        .await
        .expect("starts with --migrate --create-app-tables");
    let addr = running.http_addr;
    wait_for("ready", Duration::from_secs(30), || async {
        http_get(addr, "/readyz")
            .await
            .map(|(s, _)| s == 200)
            .unwrap_or(false)
    })
    .await;
    let pool = PgPool::connect(&format!("{PG_BASE}/{name}")).await.unwrap();
    for table in store::APP_TABLES.iter().chain(&["recoveries", "outbox"]) {
        assert!(table_exists(&pool, table).await, "{table}");
    }
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Ready
    );
    let (_, metrics) = http_get(addr, "/metrics").await.unwrap();
    for series in [
        "toolcall_recovery_mode{mode=\"recover\"} 1",
        "toolcall_recovery_family_mode{family=\"hermes\",mode=\"recover\"} 1",
        "toolcall_recovery_outbox_relayed_total{result=\"sent\"} 0",
        "toolcall_recovery_transcript_index_ready 1",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    running.shutdown();
    running.wait().await.unwrap();
    pool.close().await;
    delete_topology_of(&topology).await;
    drop_db(&name).await;
}

/// The DBA's grants exactly as docs/operations.md gives them (the `sql` block after the
/// `dba-grants` marker), for `role` in database `db`: the documented role `tcr` and database
/// `chat` replaced as whole words.
fn documented_grants(role: &str, db: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("docs/operations.md");
    let block = doc
        .split("<!-- dba-grants")
        .nth(1)
        .and_then(|rest| rest.split("```sql").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the dba-grants sql block of docs/operations.md");
    let mut out = String::new();
    let mut word = String::new();
    for c in block.chars().chain(std::iter::once('\n')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        out.push_str(match word.as_str() {
            "tcr" => role,
            "chat" => db,
            w => w,
        });
        word.clear();
        out.push(c);
    }
    out
}

/// The role the worker runs as owns nothing of the app's: with exactly the grants
/// docs/operations.md gives the DBA it migrates its own tables, recovers, and reverts (which
/// locks the memory it deletes: UPDATE on agent_memories). A grant missing stops the start
/// with the statement that gives it, instead of dead-lettering every leak as a bug.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_migrates_and_recovers_as_a_role_that_owns_nothing_of_the_apps() {
    let (name, pool) = app_database().await;
    let role = unique("tcr_role");
    sqlx::raw_sql(&documented_grants(&role, &name))
        .execute(&pool)
        .await
        .expect("the documented grants run");
    let url = format!("postgres://{role}@127.0.0.1:5432/{name}");
    let out = cli(&["migrate", &format!("--database-url={url}")]).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    // The index is the owner's step: the role is told so, with the SQL for the DBA, and
    // `--check` says where it stands (exit 3: not usable).
    let out = cli(&["index", "--check", &format!("--database-url={url}")]).await;
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "tcr_messages_unnamed_tool_idx missing");
    let out = cli(&["index", &format!("--database-url={url}")]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("only the owner of the messages table")
            && out.stderr.contains("toolcall-recovery index --sql"),
        "{}",
        out.stderr
    );
    let owned: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' AND tableowner = $1 \
         ORDER BY 1",
    )
    .bind(&role)
    .fetch_all(&pool)
    .await
    .unwrap();
    for table in store::APP_TABLES {
        assert!(!owned.iter().any(|t| t == table), "{role} owns {table}");
    }
    assert!(owned.iter().any(|t| t == "recoveries"), "{owned:?}");

    // The worker, as that role, recovers a leak.
    let agent: i64 = sqlx::query_scalar(
        "INSERT INTO agents (name, enabled_tools) VALUES ('a', '{save_memory}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let chat: i64 = sqlx::query_scalar("INSERT INTO chats DEFAULT VALUES RETURNING id")
        .fetch_one(&pool)
        .await
        .unwrap();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO messages (chat_id, agent_id, role, content) VALUES ($1, $2, 'assistant', $3) \
         RETURNING id",
    )
    .bind(chat)
    .bind(agent)
    .bind(result_prefix_leak("Likes tea", "fact", "Noted."))
    .fetch_one(&pool)
    .await
    .unwrap();
    let suffix = Uuid::new_v4().simple().to_string()[..12].to_string();
    let settings = test_settings(&suffix, &url);
    let topology = settings.clone();
    sqlx::raw_sql(&format!("REVOKE UPDATE ON agent_memories FROM {role}"))
        .execute(&pool)
        .await
        .unwrap();
    let err = match startup::start(settings.clone()).await {
        Ok(running) => {
            running.shutdown();
            let _ = running.wait().await;
            panic!("started without a grant it needs");
        }
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&format!("GRANT UPDATE ON agent_memories TO {role};")),
        "names the grant: {err}"
    );
    sqlx::raw_sql(&format!("GRANT UPDATE ON agent_memories TO {role}"))
        .execute(&pool)
        .await
        .unwrap();
    let running = startup::start(settings).await.expect("starts as the role");
    let (_, metrics) = http_get(running.http_addr, "/metrics").await.unwrap();
    assert!(
        metrics.contains("toolcall_recovery_transcript_index_ready 0"),
        "the missing index in the metrics: {metrics}"
    );
    let mut app_channel = None;
    if let Ok(conn) =
        lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default()).await
    {
        let ch = conn.create_channel().await.unwrap();
        let event = serde_json::json!({
            "event_id": Uuid::new_v4().to_string(), "type": "message.finalized",
            "occurred_at": "2026-11-23T10:00:00Z",
            "message": {"id": id, "chat_id": chat, "agent_id": agent, "role": "assistant",
                        "content": result_prefix_leak("Likes tea", "fact", "Noted."), "tools_used": []}
        });
        wait_for("consuming", Duration::from_secs(30), || async {
            http_get(running.http_addr, "/readyz")
                .await
                .map(|(s, _)| s == 200)
                .unwrap_or(false)
        })
        .await;
        ch.basic_publish(
            &topology.names.input_exchange,
            &topology.names.input_routing_key,
            lapin::options::BasicPublishOptions::default(),
            &serde_json::to_vec(&event).unwrap(),
            lapin::BasicProperties::default(),
        )
        .await
        .unwrap();
        app_channel = Some(conn);
    }
    wait_for("recovered as the role", Duration::from_secs(30), || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM agent_memories")
            .fetch_one(&pool)
            .await
            .unwrap()
            == 1
    })
    .await;
    running.shutdown();
    running.wait().await.unwrap();
    if let Some(conn) = app_channel {
        let _ = conn.close(200, "done").await;
    }
    // And the way back, as the same role: the memory and the tool message deleted, the
    // content restored.
    let out = cli(&[
        "revert",
        "--message",
        &id.to_string(),
        "--no-publish",
        &format!("--database-url={url}"),
    ])
    .await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let content: Option<String> = sqlx::query_scalar("SELECT content FROM messages WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        content,
        Some(result_prefix_leak("Likes tea", "fact", "Noted.")),
        "reverted"
    );
    delete_topology_of(&topology).await;
    pool.close().await;
    drop_db(&name).await;
    on_postgres(&format!("DROP ROLE {role}")).await;
}

/// Two replicas migrating at once (a rolling start with `--migrate`, or two Jobs) both
/// succeed and apply each migration once; a database an earlier release migrated (with the
/// app tables and the transcript index as migrations 1 and 4) migrates on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_migrators_at_once_and_an_earlier_release_s_database_migrate() {
    let (name, pool) = app_database().await;
    let url = format!("--database-url={PG_BASE}/{name}");
    let args = ["migrate", url.as_str()];
    let (a, b) = tokio::join!(cli(&args), cli(&args));
    assert_eq!(a.code, Some(0), "{}", a.stderr);
    assert_eq!(b.code, Some(0), "{}", b.stderr);
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    let mut unique_versions = applied.clone();
    unique_versions.dedup();
    assert_eq!(applied, unique_versions, "each once");
    // The earlier release recorded versions 1 and 4, which this one no longer ships.
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (1, 'create chat app tables if absent', true, '\\x00', 0), \
                (4, 'index unnamed tool messages', true, '\\x00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let again = cli(&["migrate", &url]).await;
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    pool.close().await;
    drop_db(&name).await;
}

/// The transcript index is a step of its own: built concurrently when missing, dropped and
/// built again when an interrupted build left it invalid, built once by two runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_command_builds_and_rebuilds_an_invalid_index() {
    let (name, pool) = app_database().await;
    let url = format!("--database-url={PG_BASE}/{name}");
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Missing
    );
    let args = ["index", url.as_str()];
    let (a, b) = tokio::join!(cli(&args), cli(&args));
    assert_eq!(
        (a.code, b.code),
        (Some(0), Some(0)),
        "{}\n{}",
        a.stderr,
        b.stderr
    );
    let said = format!("{}{}", a.stdout, b.stdout);
    assert!(said.contains("was missing: built it"), "{said}");
    assert!(said.contains("nothing to do"), "{said}");
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Ready
    );
    // What a killed CREATE INDEX CONCURRENTLY leaves behind.
    sqlx::query(&format!(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{}'::regclass",
        store::TRANSCRIPT_INDEX
    ))
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Invalid
    );
    let out = cli(&["index", "--check", &url]).await;
    assert_eq!(
        (out.code, out.stdout.trim()),
        (Some(3), "tcr_messages_unnamed_tool_idx invalid")
    );
    let out = cli(&["index", &url]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("was invalid"), "{}", out.stdout);
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Ready
    );
    let out = cli(&["index", "--check", &url]).await;
    assert_eq!(
        (out.code, out.stdout.trim()),
        (Some(0), "tcr_messages_unnamed_tool_idx ready")
    );

    // A lock_timeout the DBA set on the database (or the role) does not cut the build
    // short: it waits for the app's transaction on messages instead of leaving an INVALID
    // index behind.
    sqlx::query(&format!("DROP INDEX {}", store::TRANSCRIPT_INDEX))
        .execute(&pool)
        .await
        .unwrap();
    on_postgres(&format!(
        "ALTER DATABASE \"{name}\" SET lock_timeout = '200ms'"
    ))
    .await;
    let mut app_tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO chats DEFAULT VALUES")
        .execute(&mut *app_tx)
        .await
        .unwrap();
    sqlx::query("INSERT INTO messages (chat_id, role) SELECT max(id), 'user' FROM chats")
        .execute(&mut *app_tx)
        .await
        .unwrap();
    let building = tokio::spawn({
        let url = url.clone();
        async move { cli(&["index", &url]).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    app_tx.commit().await.unwrap();
    let out = building.await.unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Ready
    );

    // The same steps as SQL, for a DBA; no database needed.
    let out = cli(&[
        "index",
        "--sql",
        "--database-url=postgres://nobody@127.0.0.1:1/x",
    ])
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("DROP INDEX CONCURRENTLY IF EXISTS tcr_messages_unnamed_tool_idx")
            && out
                .stdout
                .contains("CREATE INDEX CONCURRENTLY IF NOT EXISTS"),
        "{}",
        out.stdout
    );
    pool.close().await;
    drop_db(&name).await;
}

/// lapin's own error for a URL it cannot parse quotes the URL whole, password included,
/// and the worker logged it on every retry, forever. A URL that is no URL stops the start,
/// masked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_broker_url_stops_the_start_without_its_password() {
    let mut app = TestApp::prepare().await;
    app.settings.publish.amqp_url =
        toolcall_recovery::settings::SecretUrl::new("amqp:guest:s3cret-pw@127.0.0.1:5672");
    let err = match startup::start(app.settings.clone()).await {
        Ok(running) => {
            running.shutdown();
            let _ = running.wait().await;
            panic!("started with a broker URL that can never work");
        }
        Err(e) => e.to_string(),
    };
    assert!(err.contains("is not an AMQP URL"), "{err}");
    assert!(
        err.contains("amqp:guest:***@127.0.0.1:5672") && !err.contains("s3cret-pw"),
        "{err}"
    );
    app.cleanup().await;
}
