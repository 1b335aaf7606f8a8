//! The database: the pool, migrations of the worker's own tables, and what the worker
//! requires of the chat app's: the pool, the check that refuses to run with pending
//! migrations, the check that the app's tables are there, and the transcript-repair index.
//! Queries of the recovery itself live next to it in `recover`.
//!
//! Production and development differ here, on purpose. In production the app owns its
//! database and tables, and the worker creates neither: a mistyped `DATABASE_URL` stops the
//! start with a message, instead of yielding an empty shadow database and a green
//! `/readyz`. Only when asked for ([`Provision::Development`]: `run --migrate` with the
//! built-in local URL, or `--create-app-tables`) does it create a missing database and the
//! app's tables (`sql/chat_app_tables.sql`), so the README's run command works on a fresh
//! machine.
//!
//! The worker's migrations (`migrations/`) touch only the worker's own tables and never wait
//! long for a lock (`tests/layers.rs` lints them); how they run, one migrator at a time,
//! retried after a lock timeout, is `migrations`. The index on the app's `messages` table is
//! not a migration: only the table's owner may build it. [`build_transcript_index`]
//! (`toolcall-recovery index`) does it, and rebuilds an invalid one.
//!
//! The grants the worker's role needs on the app's tables are checked at start (`grants`).
//!
//! May depend on: `settings`, `error`, `sqlx`, `tokio` (the waits of the locks).

mod grants;
mod migrations;

pub use grants::{missing_grants, require_grants, APP_GRANTS};
pub use migrations::{LOCK_TIMEOUT as MIGRATION_LOCK_TIMEOUT, RETRY_FOR as MIGRATION_RETRY_FOR};

use crate::error::Error;
use crate::settings::DatabaseSettings;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use std::str::FromStr;
use std::time::Duration;

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// The chat app's tables, for development and tests ([`create_app_tables`]).
const APP_TABLES_SQL: &str = include_str!("../sql/chat_app_tables.sql");

/// The chat app's tables the worker reads and writes (contract §4).
pub const APP_TABLES: [&str; 4] = ["agents", "chats", "messages", "agent_memories"];

/// The partial index transcript repair uses, on the app's `messages` table.
pub const TRANSCRIPT_INDEX: &str = "tcr_messages_unnamed_tool_idx";
const CREATE_TRANSCRIPT_INDEX: &str = "CREATE INDEX CONCURRENTLY IF NOT EXISTS \
     tcr_messages_unnamed_tool_idx ON messages (chat_id) \
     WHERE role = 'tool' AND coalesce(tool_name, '') = ''";
const DROP_TRANSCRIPT_INDEX: &str =
    "DROP INDEX CONCURRENTLY IF EXISTS tcr_messages_unnamed_tool_idx";
/// What a DBA runs by hand instead of `toolcall-recovery index` (psql in autocommit: a
/// concurrent build cannot run in a transaction); `index --sql` prints it.
pub const TRANSCRIPT_INDEX_SQL: &str = "\
-- 1. Is it there, and valid? (no row: missing; indisvalid false: a killed build's leftover)
SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'messages'::regclass AND c.relname = 'tcr_messages_unnamed_tool_idx';
-- 2. Only when indisvalid is false:
DROP INDEX CONCURRENTLY IF EXISTS tcr_messages_unnamed_tool_idx;
-- 3. Build it without blocking the app's writes (it waits for transactions already running
--    on messages; no statement_timeout or lock_timeout may cut it short):
SET statement_timeout = 0; SET lock_timeout = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS tcr_messages_unnamed_tool_idx
    ON messages (chat_id) WHERE role = 'tool' AND coalesce(tool_name, '') = '';
";
/// Two `index` runs at once would build the same index twice; the second waits for the
/// first by polling this advisory lock (a session blocked in `pg_advisory_lock` would hold a
/// snapshot that the first one's concurrent build waits for: a deadlock).
const INDEX_LOCK: i64 = 0x7463_725f_6964_7831;

/// Whether the worker may create a missing database and the chat app's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provision {
    /// Production: create nothing of the app's; refuse to start without it.
    Nothing,
    /// Development: create a missing database, and the app's tables when none exists.
    Development,
}

/// `application_name` of the worker's database connections.
pub const APPLICATION_NAME: &str = "toolcall-recovery";

/// The connection options of `settings` (for a connection outside the pool).
pub fn connect_options(settings: &DatabaseSettings) -> Result<PgConnectOptions, Error> {
    options(settings)
}

fn options(settings: &DatabaseSettings) -> Result<PgConnectOptions, Error> {
    let opts = PgConnectOptions::from_str(settings.database_url.expose()).map_err(|e| {
        Error::Startup(format!(
            "DATABASE_URL {} is not usable: {e}",
            settings.database_url
        ))
    })?;
    Ok(opts
        .application_name(APPLICATION_NAME)
        .log_statements(tracing::log::LevelFilter::Trace))
}

/// Connects a pool. Under [`Provision::Development`] a missing database is created first;
/// otherwise a missing database stops here with a message naming it. The pool connects
/// lazily after that first check, so it survives the database going away and coming back:
/// each checkout opens a fresh connection when the old one died.
pub async fn connect(settings: &DatabaseSettings, provision: Provision) -> Result<PgPool, Error> {
    let opts = options(settings)?;
    match provision {
        Provision::Development => create_database_if_missing(&opts).await?,
        Provision::Nothing => match opts.connect().await {
            Ok(conn) => {
                let _ = conn.close().await;
            }
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("3D000") => {
                return Err(missing_database(settings, &opts, "the worker"));
            }
            // Unreachable now: the first query says so, and a worker keeps waiting for it.
            Err(e) => tracing::warn!(error = %e, "cannot connect to the database yet"),
        },
    }
    Ok(PgPoolOptions::new()
        .max_connections(settings.db_max_connections.max(1))
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(true)
        .connect_lazy_with(opts))
}

/// The small pool of a one-off command (`backfill`, `ledger`, `revert`): named
/// `application_name` (tell it apart in `pg_stat_activity`), at most `max_connections`
/// and never more than `--db-max-connections`. Unlike [`connect`] it connects now and
/// never creates a missing database: it says plainly that the database is not there.
pub async fn connect_command(
    settings: &DatabaseSettings,
    application_name: &str,
    max_connections: u32,
) -> Result<PgPool, Error> {
    let opts = options(settings)?.application_name(application_name);
    let database = opts.get_database().unwrap_or("postgres").to_string();
    PgPoolOptions::new()
        .max_connections(max_connections.min(settings.db_max_connections).max(1))
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(db) if db.code().as_deref() == Some("3D000") => {
                Error::Startup(format!(
                    "database {database:?} does not exist at {} (this command never creates \
                     one; check DATABASE_URL)",
                    settings.database_url
                ))
            }
            e => Error::Database(e),
        })
}

fn missing_database(settings: &DatabaseSettings, opts: &PgConnectOptions, who: &str) -> Error {
    Error::Startup(format!(
        "database {:?} does not exist at {}: check DATABASE_URL. {who} creates a database only \
         for development (the built-in local URL with --migrate, or --create-app-tables)",
        opts.get_database().unwrap_or("postgres"),
        settings.database_url
    ))
}

/// The chat app's tables missing from the database.
pub async fn missing_app_tables(pool: &PgPool) -> Result<Vec<String>, Error> {
    Ok(sqlx::query_scalar(
        "SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NULL ORDER BY t",
    )
    .bind(APP_TABLES.as_slice())
    .fetch_all(pool)
    .await?)
}

/// Creates the chat app's tables (and the transcript index) for development, when none of
/// them exists, marked as such ([`DEVELOPMENT_MARK`]); returns whether it did. Some but not
/// all of them: an error, since that is somebody's schema, not an empty development database.
pub async fn create_app_tables(pool: &PgPool) -> Result<bool, Error> {
    let missing = missing_app_tables(pool).await?;
    if missing.is_empty() {
        return Ok(false);
    }
    if missing.len() < APP_TABLES.len() {
        return Err(Error::Startup(format!(
            "the database has some of the chat app's tables but not {}: not creating them \
             (that is an app's schema, not a development database)",
            missing.join(", ")
        )));
    }
    // One simple query, one implicit transaction: the tables and their mark come together.
    let sql = format!("{APP_TABLES_SQL}\nCOMMENT ON TABLE messages IS '{DEVELOPMENT_MARK}';");
    sqlx::raw_sql(&sql).execute(pool).await?;
    tracing::info!("created the chat app's tables for development");
    Ok(true)
}

/// The comment [`create_app_tables`] puts on `messages`: what tells a development database
/// (tables the worker created) from the app's, for the `demo` command.
pub const DEVELOPMENT_MARK: &str =
    "created by toolcall-recovery for development (--create-app-tables)";

/// Whether the app's tables here are the ones [`create_app_tables`] created for development.
pub async fn is_development_database(pool: &PgPool) -> Result<bool, Error> {
    Ok(sqlx::query_scalar(
        "SELECT coalesce(obj_description(to_regclass('messages'), 'pg_class') = $1, false)",
    )
    .bind(DEVELOPMENT_MARK)
    .fetch_one(pool)
    .await?)
}

/// Fails, saying which and what to check, when a table of the chat app is missing: the
/// worker has nothing to work on, and `/readyz` must not say otherwise.
pub async fn require_app_tables(pool: &PgPool, settings: &DatabaseSettings) -> Result<(), Error> {
    let missing = missing_app_tables(pool).await?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Startup(format!(
        "the chat app's table(s) {} are missing in the database at {}: check DATABASE_URL \
         (a typo names another, empty database). The worker never creates the app's tables \
         outside development (--create-app-tables)",
        missing.join(", "),
        settings.database_url
    )))
}

/// The state of the transcript-repair index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    /// Built and usable.
    Ready,
    /// Not there.
    Missing,
    /// There but INVALID (a concurrent build was interrupted): unused by the planner, and
    /// skipped by `CREATE INDEX ... IF NOT EXISTS`.
    Invalid,
}

impl IndexState {
    /// The word `index --check` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Ready => "ready",
            IndexState::Missing => "missing",
            IndexState::Invalid => "invalid",
        }
    }
}

/// The state of [`TRANSCRIPT_INDEX`].
pub async fn transcript_index(pool: &PgPool) -> Result<IndexState, Error> {
    let valid: Option<bool> = sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE c.relname = $1 AND pg_table_is_visible(c.oid)",
    )
    .bind(TRANSCRIPT_INDEX)
    .fetch_optional(pool)
    .await?;
    Ok(match valid {
        Some(true) => IndexState::Ready,
        Some(false) => IndexState::Invalid,
        None => IndexState::Missing,
    })
}

/// Builds [`TRANSCRIPT_INDEX`] concurrently (the app's writes go on), dropping an invalid
/// one first; waits for another run doing the same. Returns the state it found. Needs the
/// ownership of `messages` (the app's owner, or the DBA, runs it).
pub async fn build_transcript_index(settings: &DatabaseSettings) -> Result<IndexState, Error> {
    let opts = options(settings)?.application_name("toolcall-recovery-index");
    let mut conn = opts.connect().await?;
    loop {
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(INDEX_LOCK)
            .fetch_one(&mut conn)
            .await?;
        if locked {
            break;
        }
        tracing::info!("another run is building the index; waiting for it");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let result = build_holding_lock(&mut conn).await;
    let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(INDEX_LOCK)
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
    result
}

async fn build_holding_lock(conn: &mut sqlx::PgConnection) -> Result<IndexState, Error> {
    let valid: Option<bool> = sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE c.relname = $1 AND pg_table_is_visible(c.oid)",
    )
    .bind(TRANSCRIPT_INDEX)
    .fetch_optional(&mut *conn)
    .await?;
    let found = match valid {
        Some(true) => return Ok(IndexState::Ready),
        Some(false) => IndexState::Invalid,
        None => IndexState::Missing,
    };
    // A concurrent build blocks no write of the app's, so it may wait and run as long as
    // it needs; a statement_timeout or lock_timeout set on the database or the role would cut
    // it short and leave an INVALID index.
    sqlx::raw_sql("SET statement_timeout = 0; SET lock_timeout = 0")
        .execute(&mut *conn)
        .await?;
    if found == IndexState::Invalid {
        sqlx::raw_sql(DROP_TRANSCRIPT_INDEX)
            .execute(&mut *conn)
            .await
            .map_err(not_owner)?;
    }
    sqlx::raw_sql(CREATE_TRANSCRIPT_INDEX)
        .execute(&mut *conn)
        .await
        .map_err(not_owner)?;
    Ok(found)
}

/// Only the owner of `messages` may build an index on it: said with what to do instead.
fn not_owner(e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("42501") => {
            Error::Startup(format!(
                "{}: only the owner of the messages table may build an index on it; run \
                 `toolcall-recovery index` with the owner's DATABASE_URL, or give the DBA the \
                 SQL of `toolcall-recovery index --sql`",
                db.message()
            ))
        }
        _ => Error::Database(e),
    }
}

/// Creates the database named in `opts` when it does not exist (connecting to the
/// `postgres` database to do so), with a log line saying so.
pub async fn create_database_if_missing(opts: &PgConnectOptions) -> Result<(), Error> {
    match opts.connect().await {
        Ok(conn) => {
            let _ = conn.close().await;
            return Ok(());
        }
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("3D000") => {}
        Err(e) => return Err(e.into()),
    }
    let name = opts.get_database().unwrap_or("postgres").to_string();
    let mut admin = opts.clone().database("postgres").connect().await?;
    let sql = format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\""));
    match sqlx::query(&sql).execute(&mut admin).await {
        Ok(_) => tracing::info!(database = %name, "database did not exist; created it"),
        // Another process created it in the meantime (42P04, or the catalog's unique index
        // when both inserted at once).
        Err(sqlx::Error::Database(db))
            if matches!(db.code().as_deref(), Some("42P04" | "23505")) => {}
        Err(e) => return Err(e.into()),
    }
    let _ = admin.close().await;
    Ok(())
}

/// Versions and descriptions of the migrations not yet applied.
pub async fn pending_migrations(pool: &PgPool) -> Result<Vec<String>, Error> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    let applied: Vec<i64> = if exists {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    Ok(MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration() && !applied.contains(&m.version))
        .map(|m| format!("{} {}", m.version, m.description))
        .collect())
}

/// Applies the pending migrations (`migrations`: one migrator at a time, a lock timeout
/// and retries). Versions applied by an earlier release and no longer shipped (1: the app's
/// tables, 4: the transcript index, both moved out of the migrations) are ignored, so a
/// database migrated by that release migrates on.
pub async fn migrate(pool: &PgPool) -> Result<(), Error> {
    migrations::run(pool, &MIGRATOR, Provision::Nothing)
        .await
        .map(|_| ())
}

/// [`migrate`] with another set of migrations, and with [`Provision::Development`] the
/// app's tables first, under the same lock; returns what it applied.
pub async fn migrate_with(
    pool: &PgPool,
    migrator: &Migrator,
    provision: Provision,
) -> Result<Vec<String>, Error> {
    migrations::run(pool, migrator, provision).await
}

/// Applies migrations when `apply` is set; otherwise fails with a message naming the
/// pending ones.
pub async fn ensure_migrated(pool: &PgPool, apply: bool) -> Result<(), Error> {
    let pending = pending_migrations(pool).await?;
    if pending.is_empty() {
        return Ok(());
    }
    if apply {
        tracing::info!(pending = ?pending, "applying migrations");
        return migrate(pool).await;
    }
    Err(Error::Startup(format!(
        "the database has {} pending migration(s) ({}); run `toolcall-recovery migrate` or \
         start with --migrate",
        pending.len(),
        pending.join(", ")
    )))
}
