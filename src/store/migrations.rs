//! How the worker's migrations run, and why not through sqlx's `Migrator::run`:
//!
//! - **A lock that is waited for by polling.** sqlx blocks in `pg_advisory_lock`: a session
//!   waiting there holds a snapshot, which a `CREATE INDEX CONCURRENTLY` of the migrator
//!   holding the lock waits for, so two migrators deadlocked (and sqlx, when a migration
//!   failed, returned without unlocking: the pooled connection kept the lock, and the next
//!   migrator waited forever). Here a dedicated session asks with `pg_try_advisory_lock`
//!   and sleeps between asks, holding nothing while it waits; closing the session releases
//!   the lock whatever happened.
//! - **A lock timeout, then another try.** A transactional migration runs with
//!   [`LOCK_TIMEOUT`] (a file may set its own, as 0007 does): behind a long transaction on
//!   the table it gives up, so the readers and writers queued behind it (old replicas in a
//!   rolling upgrade) never wait longer than that; it is rolled back and tried again, with a
//!   warning, for up to [`RETRY_FOR`], instead of failing the Helm hook or `run --migrate`.
//! - **A concurrent index build** (`-- no-transaction`, alone in its file, see
//!   `tests/layers.rs`) runs with no lock or statement timeout (it blocks no writer, and cut
//!   short it would leave an INVALID index), after dropping the INVALID leftover of an
//!   earlier build that was killed: `IF NOT EXISTS` would skip it and record the migration
//!   as done.
//! - Versions applied by an earlier release and no longer shipped (1: the app's tables, 4:
//!   the transcript index) are ignored, as `ignore_missing` did; an applied migration whose
//!   content changed is refused, as sqlx does.
//!
//! May depend on: `store`, `error`, `sqlx`, `tokio`.

use super::{create_app_tables, Provision};
use crate::error::Error;
use sqlx::migrate::{Migrate, MigrateError, Migration, Migrator};
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, PgPool};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Key of the migration lock (an advisory lock, per database): "tcr_migr".
const LOCK_KEY: i64 = 0x7463_725f_6d69_6772;

/// How long a transactional migration waits for a lock before it is rolled back and tried
/// again: the longest the readers and writers queued behind it wait.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a migration that cannot get its lock keeps being tried.
pub const RETRY_FOR: Duration = Duration::from_secs(300);

/// Whether sqlx's history table is there (found as its unqualified name is, through the
/// search path).
const HISTORY_EXISTS: &str = "SELECT to_regclass('_sqlx_migrations') IS NOT NULL";

/// Applies the pending migrations of `migrator` on a session of its own that holds the
/// migration lock; with [`Provision::Development`], first the app's tables (under the same
/// lock, so two development setups at once do not both create them). Returns what it
/// applied (`"<version> <description>"`).
pub async fn run(
    pool: &PgPool,
    migrator: &Migrator,
    provision: Provision,
) -> Result<Vec<String>, Error> {
    let mut conn = (*pool.connect_options())
        .clone()
        .application_name("toolcall-recovery-migrate")
        .connect()
        .await?;
    let result = async {
        try_lock_polling(&mut conn, LOCK_KEY, "migration").await?;
        if provision == Provision::Development {
            create_app_tables(pool).await?;
        }
        apply_pending(&mut conn, migrator).await
    }
    .await;
    // Closing the session releases the lock, also when a step failed.
    let _ = conn.close().await;
    result
}

/// `pg_try_advisory_lock` until it succeeds: between tries this session runs no statement,
/// so a concurrent index build of the holder never waits for it.
pub(super) async fn try_lock_polling(
    conn: &mut PgConnection,
    key: i64,
    what: &str,
) -> Result<(), Error> {
    let started = Instant::now();
    let mut said: Option<Instant> = None;
    let mut delay = Duration::from_millis(50);
    loop {
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut *conn)
            .await?;
        if got {
            return Ok(());
        }
        // Said at once, then every half minute: a long wait is worth a look (`pg_locks`
        // names the holder of the advisory lock).
        if said.is_none_or(|at| at.elapsed() >= Duration::from_secs(30)) {
            said = Some(Instant::now());
            tracing::info!(
                waited_secs = started.elapsed().as_secs(),
                "another session holds the {what} lock; waiting for it"
            );
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

async fn apply_pending(conn: &mut PgConnection, migrator: &Migrator) -> Result<Vec<String>, Error> {
    // sqlx's `CREATE TABLE IF NOT EXISTS` makes the server send a notice ("already exists,
    // skipping") that sqlx logs at INFO: every start would say it. Created only when missing.
    let exists: bool = sqlx::query_scalar(HISTORY_EXISTS)
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        conn.ensure_migrations_table().await?;
    }
    let applied: HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations()
        .await?
        .into_iter()
        .map(|m| (m.version, m.checksum.into_owned()))
        .collect();
    let mut done = Vec::new();
    for m in migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&m.version) {
            Some(checksum) if checksum[..] != *m.checksum => {
                return Err(MigrateError::VersionMismatch(m.version).into())
            }
            Some(_) => {}
            None => {
                tracing::info!(migration = %describe(m), "applying migration");
                apply_one(conn, m).await?;
                done.push(describe(m));
            }
        }
    }
    Ok(done)
}

fn describe(m: &Migration) -> String {
    format!("{} {}", m.version, m.description)
}

async fn apply_one(conn: &mut PgConnection, m: &Migration) -> Result<(), Error> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(500);
    loop {
        if m.no_tx {
            conn.execute("SET lock_timeout = 0; SET statement_timeout = 0")
                .await?;
            if let Some(index) = concurrently_built(&m.sql) {
                drop_if_invalid(conn, &index).await?;
            }
        } else {
            conn.execute(format!("SET lock_timeout = '{}ms'", LOCK_TIMEOUT.as_millis()).as_str())
                .await?;
        }
        match conn.apply(m).await {
            Ok(_) => return Ok(()),
            Err(e) if lock_timed_out(&e) && started.elapsed() < RETRY_FOR => {
                tracing::warn!(
                    migration = %describe(m),
                    retry_in = ?delay,
                    "a migration could not get its table lock in time (a long transaction \
                     holds the table); rolled back, trying again"
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(15));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn lock_timed_out(e: &MigrateError) -> bool {
    let inner = match e {
        MigrateError::ExecuteMigration(e, _) | MigrateError::Execute(e) => e,
        _ => return false,
    };
    matches!(inner, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}

/// Drops the index `name` (found through the search_path) when it is INVALID, the leftover
/// of a killed concurrent build; a valid or absent one is left alone.
pub(super) async fn drop_if_invalid(conn: &mut PgConnection, name: &str) -> Result<(), Error> {
    let row: Option<(String, bool)> = sqlx::query_as(
        "SELECT format('%I.%I', n.nspname, c.relname), i.indisvalid FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE i.indexrelid = to_regclass($1)",
    )
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((qualified, false)) = row {
        tracing::warn!(
            index = %qualified,
            "dropping the INVALID index a killed concurrent build left, to build it again"
        );
        // `qualified` is `format('%I.%I')` of catalog names: quoted by the server.
        conn.execute(format!("DROP INDEX CONCURRENTLY IF EXISTS {qualified}").as_str())
            .await?;
    }
    Ok(())
}

/// The index a `-- no-transaction` migration builds (`CREATE [UNIQUE] INDEX CONCURRENTLY
/// [IF NOT EXISTS] name ...`, the one statement such a file may hold), lower-cased as
/// PostgreSQL folds an unquoted name.
pub fn concurrently_built(sql: &str) -> Option<String> {
    let words: Vec<String> = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(str::to_ascii_lowercase)
        .collect();
    let mut w = words.iter().map(String::as_str).peekable();
    while let Some(word) = w.next() {
        if word != "create" {
            continue;
        }
        if w.peek() == Some(&"unique") {
            w.next();
        }
        if (w.next(), w.next()) != (Some("index"), Some("concurrently")) {
            return None;
        }
        let mut name = w.next()?;
        if name == "if" {
            w.next(); // not
            w.next(); // exists
            name = w.next()?;
        }
        return Some(name.trim_matches('"').to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_a_concurrent_build_names() {
        let sql = "-- no-transaction\n-- why\nCREATE UNIQUE INDEX CONCURRENTLY IF NOT \
                   EXISTS Outbox_Key_idx\n  ON outbox (message_key);";
        assert_eq!(concurrently_built(sql).as_deref(), Some("outbox_key_idx"));
        assert_eq!(
            concurrently_built("CREATE INDEX CONCURRENTLY r_idx ON recoveries (id)").as_deref(),
            Some("r_idx")
        );
        assert_eq!(concurrently_built("CREATE INDEX x ON t (a)"), None);
        assert_eq!(concurrently_built("ALTER TABLE t ADD COLUMN c text"), None);
    }
}
