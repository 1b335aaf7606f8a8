//! How the worker's migrations run beside the app and the old replicas (issue #14, part 5),
//! against the real PostgreSQL:
//!
//! - a migration that alters a ledger table waits behind an old replica's long transaction
//!   without ever keeping the other writers of that table waiting longer than its lock
//!   timeout, and gets through once the transaction ends (it used to fail after the
//!   timeout, and a Helm hook or a `run --migrate` with it);
//! - a ledger index built concurrently by a migration: two migrators at once both succeed
//!   (a migrator blocked in sqlx's `pg_advisory_lock` holds a snapshot the build waits for:
//!   a deadlock), and the INVALID leftover of a killed build is built again (`IF NOT
//!   EXISTS` skipped it);
//! - two development setups at once on a database that does not exist yet;
//! - a database release 0.1 migrated, with its own migrations (`release_0_1/` holds the
//!   two files it had and this release no longer ships, verbatim), migrates on and serves.

use crate::harness::*;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Connection, Executor, PgConnection, PgPool};
use std::borrow::Cow;
use std::time::{Duration, Instant};
use toolcall_recovery::settings::{DatabaseSettings, SecretUrl};
use toolcall_recovery::store::{self, Provision};
use uuid::Uuid;

async fn fresh_database() -> (String, String) {
    let name = format!("tcr_test_{}", &Uuid::new_v4().simple().to_string()[..12]);
    on_postgres(&format!("CREATE DATABASE \"{name}\"")).await;
    let url = format!("{PG_BASE}/{name}");
    (name, url)
}

async fn drop_database(name: &str) {
    on_postgres(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await;
}

/// A database with the app's tables and every migration of this release applied.
async fn migrated_database() -> (String, String, PgPool) {
    let (name, url) = fresh_database().await;
    let pool = PgPool::connect(&url).await.unwrap();
    store::create_app_tables(&pool).await.unwrap();
    store::migrate(&pool).await.unwrap();
    (name, url, pool)
}

/// This release's migrations plus one more: a concurrent index build on the ledger, alone
/// in a `-- no-transaction` file, as `migrations/README.md` asks for one.
fn with_a_ledger_index() -> Migrator {
    let mut all: Vec<Migration> = store::MIGRATOR.iter().cloned().collect();
    all.push(Migration::new(
        9001,
        Cow::Borrowed("index recoveries created at"),
        MigrationType::Simple,
        Cow::Borrowed(
            "-- no-transaction\n\
             CREATE INDEX CONCURRENTLY IF NOT EXISTS tcr_test_recoveries_created_at_idx \
             ON recoveries (created_at)",
        ),
        true,
    ));
    Migrator {
        migrations: Cow::Owned(all),
        ..Migrator::DEFAULT
    }
}

async fn index_valid(pool: &PgPool, name: &str) -> Option<bool> {
    sqlx::query_scalar("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)")
        .bind(name)
        .fetch_optional(pool)
        .await
        .unwrap()
}

/// An old replica's transaction on the ledger, open until dropped or committed.
async fn open_ledger_transaction(url: &str) -> PgConnection {
    let mut conn = PgConnection::connect(url).await.unwrap();
    conn.execute(
        "BEGIN; INSERT INTO recoveries (message_id, chat_id, source, outcome, \
         tools_used_before, tools_used_after, summary) \
         VALUES (1, 1, 'event', 'recovered', '[]', '[]', '{}')",
    )
    .await
    .unwrap();
    conn
}

/// A rolling upgrade: the new release migrates (0007 adds a column to `recoveries`) while an
/// old replica holds a long transaction on the table, and other old replicas keep writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_migration_waits_out_a_long_transaction_without_stalling_writers() {
    let (name, url, pool) = migrated_database().await;
    // As the previous release left it: everything but 0007.
    pool.execute(
        "ALTER TABLE recoveries DROP COLUMN model; DELETE FROM _sqlx_migrations WHERE version = 7",
    )
    .await
    .unwrap();
    let mut long = open_ledger_transaction(&url).await;
    let migrating = tokio::spawn(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
            .args(["migrate", &format!("--database-url={url}")])
            .env("TCR_LOG_FORMAT", "json")
            .output(),
    );
    wait_for(
        "the migration waits for its lock",
        Duration::from_secs(20),
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND query ILIKE '%ALTER TABLE recoveries%'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                > 0
        },
    )
    .await;
    // Longer than the lock timeout: the migration gives up at least once meanwhile, and the
    // other writers never wait longer than that timeout.
    let bound = store::MIGRATION_LOCK_TIMEOUT + Duration::from_secs(2);
    let until = Instant::now() + store::MIGRATION_LOCK_TIMEOUT * 2;
    while Instant::now() < until {
        let started = Instant::now();
        tokio::time::timeout(
            Duration::from_secs(30),
            pool.execute(
                "INSERT INTO recoveries (message_id, chat_id, source, outcome, \
                 tools_used_before, tools_used_after, summary) \
                 VALUES (2, 2, 'event', 'recovered', '[]', '[]', '{}')",
            ),
        )
        .await
        .expect("an old replica's insert is not stuck behind the migration")
        .unwrap();
        assert!(started.elapsed() < bound, "waited {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!migrating.is_finished(), "the migration keeps trying");
    long.execute("COMMIT").await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), migrating)
        .await
        .expect("the migration gets through once the transaction ended")
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(store::pending_migrations(&pool).await.unwrap().is_empty());
    long.close().await.unwrap();
    pool.close().await;
    drop_database(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_migrators_at_once_with_a_concurrent_index_build_both_succeed() {
    let (name, url, pool) = migrated_database().await;
    let migrator = with_a_ledger_index();
    // A transaction on the ledger makes the build wait, so the second migrator is surely
    // waiting for the migration lock while the first one builds.
    let mut old_replica = open_ledger_transaction(&url).await;
    // A deadlock, or a migrator waiting forever for a lock nobody releases, fails here.
    let both = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(
            store::migrate_with(&pool, &migrator, Provision::Nothing),
            async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let second = store::migrate_with(&pool, &migrator, Provision::Nothing);
                tokio::pin!(second);
                // The transaction ends while the second migrator waits.
                tokio::select! {
                    r = &mut second => r,
                    () = tokio::time::sleep(Duration::from_secs(2)) => {
                        old_replica.execute("COMMIT").await.unwrap();
                        second.await
                    }
                }
            }
        )
    })
    .await;
    let (first, second) = both.expect("both migrators finish");
    let (first, second) = (first.expect("first"), second.expect("second"));
    assert_eq!(
        first.len() + second.len(),
        1,
        "the index migration once: {first:?} {second:?}"
    );
    assert_eq!(
        index_valid(&pool, "tcr_test_recoveries_created_at_idx").await,
        Some(true)
    );
    old_replica.close().await.unwrap();
    pool.close().await;
    drop_database(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_rebuilds_the_invalid_leftover_of_a_killed_index_build() {
    let (name, url, pool) = migrated_database().await;
    // A build killed while it waited for a transaction: an INVALID index is left.
    let mut old_replica = open_ledger_transaction(&url).await;
    let build_url = url.clone();
    let build = tokio::spawn(async move {
        let mut conn = PgConnection::connect(&build_url).await.unwrap();
        conn.execute("SET application_name = 'tcr-test-build'")
            .await
            .unwrap();
        conn.execute(
            "CREATE INDEX CONCURRENTLY tcr_test_recoveries_created_at_idx \
             ON recoveries (created_at)",
        )
        .await
    });
    wait_for("the build waits", Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tcr-test-build' \
             AND wait_event_type = 'Lock'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            > 0
    })
    .await;
    pool.execute(
        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'tcr-test-build'",
    )
    .await
    .unwrap();
    assert!(build.await.unwrap().is_err(), "the build was cancelled");
    old_replica.execute("ROLLBACK").await.unwrap();
    assert_eq!(
        index_valid(&pool, "tcr_test_recoveries_created_at_idx").await,
        Some(false)
    );
    let applied = store::migrate_with(&pool, &with_a_ledger_index(), Provision::Nothing)
        .await
        .unwrap();
    assert_eq!(applied, ["9001 index recoveries created at"]);
    assert_eq!(
        index_valid(&pool, "tcr_test_recoveries_created_at_idx").await,
        Some(true),
        "rebuilt, not skipped"
    );
    old_replica.close().await.unwrap();
    pool.close().await;
    drop_database(&name).await;
}

/// Two replicas of `run --migrate` on a development machine, started at once on a database
/// that does not exist yet: the database, the app's tables and the migrations, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_development_setups_at_once_both_succeed() {
    let name = format!("tcr_test_{}", &Uuid::new_v4().simple().to_string()[..12]);
    let db = DatabaseSettings {
        database_url: SecretUrl::new(format!("{PG_BASE}/{name}")),
        db_max_connections: 2,
    };
    let setup = || async {
        let pool = store::connect(&db, Provision::Development).await?;
        let applied = store::migrate_with(&pool, &store::MIGRATOR, Provision::Development).await;
        pool.close().await;
        applied
    };
    let (a, b) = tokio::join!(setup(), setup());
    let (a, b) = (a.expect("first"), b.expect("second"));
    assert_eq!(
        a.len() + b.len(),
        store::MIGRATOR.iter().count(),
        "each migration once: {a:?} {b:?}"
    );
    let pool = PgPool::connect(db.database_url.expose()).await.unwrap();
    assert!(store::missing_app_tables(&pool).await.unwrap().is_empty());
    pool.close().await;
    drop_database(&name).await;
}

/// Release 0.1's `migrations/`: the two files this release no longer ships (kept verbatim in
/// `tests/it/release_0_1/`) and ours up to 5, unchanged since.
fn release_0_1() -> Migrator {
    let retired = sqlx::migrate!("./tests/it/release_0_1");
    let mut all: Vec<Migration> = retired
        .iter()
        .chain(store::MIGRATOR.iter().filter(|m| m.version <= 5))
        .cloned()
        .collect();
    all.sort_by_key(|m| m.version);
    assert_eq!(
        all.iter().map(|m| m.version).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    Migrator {
        migrations: Cow::Owned(all),
        ..Migrator::DEFAULT
    }
}

/// A database as release 0.1 left it (its sqlx migrator created the app's tables, the
/// ledger and the index), migrated by this release's `migrate`, then served by `run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_release_0_1_migrated_migrates_on_and_serves() {
    let (name, url) = fresh_database().await;
    let pool = PgPool::connect(&url).await.unwrap();
    release_0_1()
        .run(&pool)
        .await
        .expect("release 0.1 migrates");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(["migrate", &format!("--database-url={url}")])
        .env("TCR_LOG_FORMAT", "json")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY 1")
        .fetch_all(&pool)
        .await
        .unwrap();
    let mut expected: Vec<i64> = vec![1, 4];
    expected.extend(store::MIGRATOR.iter().map(|m| m.version));
    expected.sort_unstable();
    assert_eq!(versions, expected);
    assert_eq!(
        store::transcript_index(&pool).await.unwrap(),
        store::IndexState::Ready,
        "0.1's index kept"
    );
    let suffix = name.trim_start_matches("tcr_test_").to_string();
    let settings = test_settings(&suffix, &url);
    let running = toolcall_recovery::startup::start(settings.clone())
        .await
        .expect("the worker starts on it");
    running.shutdown();
    running.wait().await.unwrap();
    delete_topology_of(&settings).await;
    pool.close().await;
    drop_database(&name).await;
}
