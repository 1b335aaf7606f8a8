//! The database: the pool, creating a missing database, migrations, and the check that
//! refuses to run with pending ones. Queries of the recovery itself live next to it in
//! `recover`.
//!
//! May depend on: `settings`, `error`, `sqlx`.

use crate::error::Error;
use crate::settings::DatabaseSettings;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use std::str::FromStr;
use std::time::Duration;

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

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

/// Connects a pool, creating the database first when it does not exist. The pool
/// connects lazily, so it survives the database going away and coming back: each checkout
/// opens a fresh connection when the old one died.
pub async fn connect(settings: &DatabaseSettings) -> Result<PgPool, Error> {
    let opts = options(settings)?;
    create_database_if_missing(&opts).await?;
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
                     one; check DATABASE_URL, or run `toolcall-recovery migrate`)",
                    settings.database_url
                ))
            }
            e => Error::Database(e),
        })
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
        // Another process created it in the meantime.
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42P04") => {}
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

/// Applies the pending migrations.
pub async fn migrate(pool: &PgPool) -> Result<(), Error> {
    MIGRATOR.run(pool).await?;
    Ok(())
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
