//! Starting up: missing database created, pending migrations refused (or applied with
//! `--migrate`), the chat app's existing tables left as they are, the HTTP endpoints.

use crate::harness::*;
use sqlx::PgPool;
use std::time::Duration;
use toolcall_recovery::startup;
use uuid::Uuid;

async fn drop_db(name: &str) {
    let admin = PgPool::connect(&format!("{PG_BASE}/postgres"))
        .await
        .unwrap();
    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&admin)
        .await;
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_database_is_created_and_pending_migrations_refused() {
    let suffix = Uuid::new_v4().simple().to_string()[..12].to_string();
    let name = format!("tcr_test_{suffix}");
    let mut settings = test_settings(&suffix, &format!("{PG_BASE}/{name}"));
    let err = match startup::start(settings.clone()).await {
        Ok(_) => panic!("started with pending migrations"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("pending migration"), "{err}");
    assert!(
        err.contains("toolcall-recovery migrate"),
        "says what to do: {err}"
    );
    // The database itself was created.
    let pool = PgPool::connect(&format!("{PG_BASE}/{name}"))
        .await
        .expect("database exists");
    pool.close().await;
    // With --migrate it applies them and runs.
    settings.migrate = true;
    let topology = settings.clone();
    let running = startup::start(settings)
        .await
        .expect("starts with --migrate");
    let addr = running.http_addr;
    let (status, body) = http_get(addr, "/healthz").await.unwrap();
    assert_eq!(status, 200, "{body}");
    wait_for("ready", Duration::from_secs(30), || async {
        http_get(addr, "/readyz")
            .await
            .map(|(s, _)| s == 200)
            .unwrap_or(false)
    })
    .await;
    let (_, metrics) = http_get(addr, "/metrics").await.unwrap();
    for name in [
        "toolcall_recovery_in_flight_deliveries",
        "toolcall_recovery_memories_created_total",
        "toolcall_recovery_processing_duration_seconds",
        "toolcall_recovery_backfill_progress",
    ] {
        assert!(
            metrics.contains(&format!("# HELP {name} ")),
            "{name} in {metrics}"
        );
    }
    // The policy in force is visible from the start: default mode recover, every family
    // recovered.
    for series in [
        "toolcall_recovery_mode{mode=\"recover\"} 1",
        "toolcall_recovery_mode{mode=\"observe\"} 0",
        "toolcall_recovery_family_mode{family=\"hermes\",mode=\"recover\"} 1",
        "toolcall_recovery_events_total{mode=\"observe\",outcome=\"reverted\"} 0",
        "toolcall_recovery_reverts_total{result=\"conflict\"} 0",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    running.shutdown();
    running.wait().await.unwrap();
    delete_topology_of(&topology).await;
    drop_db(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_command_leaves_existing_app_tables_alone() {
    let name = format!("tcr_test_{}", &Uuid::new_v4().simple().to_string()[..12]);
    let admin = PgPool::connect(&format!("{PG_BASE}/postgres"))
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let url = format!("{PG_BASE}/{name}");
    let pool = PgPool::connect(&url).await.unwrap();
    // The app's own messages table, with a column of its own and a plain id.
    sqlx::query("CREATE TABLE messages (id bigserial PRIMARY KEY, chat_id bigint NOT NULL, agent_id bigint, role text NOT NULL, content text, tools_used jsonb NOT NULL DEFAULT '[]', tool_calls jsonb, tool_call_id text, tool_name text, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(), app_only text DEFAULT 'kept')")
        .execute(&pool)
        .await
        .unwrap();
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "migrate",
            &format!("--database-url={url}"),
            "--log-format=json",
        ])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let columns: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'messages' AND column_name = 'app_only'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(columns, 1, "existing table not replaced");
    let indexes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_indexes WHERE tablename = 'messages' AND indexname = 'messages_chat_id_idx'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(indexes, 0, "existing table not altered");
    // The one object added to an app table: the partial index transcript repair needs.
    let repair_index: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_indexes WHERE tablename = 'messages' \
         AND indexname = 'tcr_messages_unnamed_tool_idx'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(repair_index, 1, "transcript-repair index added");
    for table in [
        "agents",
        "chats",
        "agent_memories",
        "recoveries",
        "recovery_items",
    ] {
        let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(table)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert!(exists, "{table} created");
    }
    // Running it again is a no-op.
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "migrate",
            &format!("--database-url={url}"),
            "--log-format=json",
        ])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    pool.close().await;
    drop_db(&name).await;
}
