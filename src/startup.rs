//! Builds the running service from [`Settings`]: database (created if missing, migrations
//! checked or applied), metrics, the HTTP server, the worker. Returns a [`Running`] handle
//! that the binary and the integration tests both use.
//!
//! Drain order on shutdown (see `shutdown`): worker (cancel consumer, finish in-flight,
//! close session) -> database pool -> HTTP server.
//!
//! May depend on: every module, `sqlx`, `tokio`.

use crate::admin::{self, AdminState};
use crate::budget::Budget;
use crate::error::{self, Error};
use crate::http::{self, AppState};
use crate::metrics::{Metrics, Prime};
use crate::model::Models;
use crate::outbox::Marker;
use crate::publish::{PublishTarget, Publisher, Relay};
use crate::recover;
use crate::settings::{DatabaseSettings, SchemaSettings, Settings};
use crate::shutdown::{self, Shutdown, Trigger};
use crate::store;
use crate::store::{IndexState, Provision};
use crate::worker::Worker;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A started service.
pub struct Running {
    /// Where the HTTP server listens.
    pub http_addr: SocketAddr,
    trigger: Trigger,
    task: JoinHandle<()>,
}

impl Running {
    /// The shutdown trigger (e.g. for a signal handler).
    pub fn trigger(&self) -> Trigger {
        self.trigger.clone()
    }

    /// Begins shutdown.
    pub fn shutdown(&self) {
        self.trigger.fire();
    }

    /// Waits until the service has drained and stopped.
    pub async fn wait(self) -> Result<(), Error> {
        self.task
            .await
            .map_err(|e| Error::Bug(format!("service task failed: {e}")))
    }
}

/// `toolcall-recovery migrate`: applies the worker's migrations (its own tables only). With
/// `--create-app-tables` (development) it first creates a missing database and the chat
/// app's tables when none exists.
pub async fn migrate(settings: &DatabaseSettings, schema: SchemaSettings) -> Result<(), Error> {
    let provision = if schema.create_app_tables {
        Provision::Development
    } else {
        Provision::Nothing
    };
    let pool = store::connect(settings, provision).await?;
    let result = migrate_on(&pool, provision).await;
    pool.close().await;
    result
}

async fn migrate_on(pool: &sqlx::PgPool, provision: Provision) -> Result<(), Error> {
    let applied = store::migrate_with(pool, &store::MIGRATOR, provision).await?;
    tracing::info!(applied = ?applied, "migrations up to date");
    let missing = store::missing_app_tables(pool).await?;
    if !missing.is_empty() {
        tracing::warn!(
            missing = ?missing,
            "the chat app's tables are not there yet: the worker will not start until they are"
        );
    }
    Ok(())
}

/// Starts the service. Fails, saying what to do, when the database is unreachable or not
/// there, an app table is missing or the worker's role lacks a grant on one, migrations are
/// pending (without `--migrate`), or the HTTP port cannot be bound; the broker may be down
/// (the worker keeps trying to connect, `/readyz` says so).
pub async fn start(settings: Settings) -> Result<Running, Error> {
    tracing::info!(
        database_url = %settings.database.database_url,
        amqp_url = %settings.publish.amqp_url,
        queue = %settings.names.queue,
        prefetch = settings.prefetch,
        concurrency = settings.concurrency,
        "starting"
    );
    // A malformed broker URL can never work: stop now rather than retry (and log) forever.
    settings.publish.broker().uri()?;
    let pool = ready_database(&settings).await?;
    let metrics = Arc::new(Metrics::new());
    let index = look_at_index(&pool, &metrics, None).await;
    let policy = settings.policy();
    prime(&metrics, &policy, &settings.models.models);
    log_policy(&policy);
    let broker_ready = Arc::new(AtomicBool::new(false));
    let (trigger, shutdown) = shutdown::channel();
    // One byte budget for everything that takes in message bodies: deliveries, admin passes.
    let budget = Budget::new(settings.max_in_flight_bytes);
    let http = serve_http(&settings, &pool, &metrics, &broker_ready, &budget).await?;
    let http_addr = http.addr;
    let index_watch = tokio::spawn(watch_index(
        pool.clone(),
        metrics.clone(),
        index,
        shutdown.clone(),
    ));
    let relay = tokio::spawn(relay(&settings, &pool, &metrics).run(shutdown.clone()));
    let (marker, marking) = Marker::start(
        store::connect_options(&settings.database)?.application_name("toolcall-recovery-outbox"),
    );
    let worker = Arc::new(Worker::new(
        settings,
        pool.clone(),
        metrics,
        broker_ready,
        marker,
        budget,
    ));
    let beside = Beside {
        marking,
        relay,
        index_watch,
        pool,
        http,
    };
    let task = tokio::spawn(async move {
        // `run` consumes the worker: once it returns, the last marker is dropped and the
        // marking task writes what is left and ends.
        worker.run(shutdown).await;
        beside.drain().await;
    });
    Ok(Running {
        http_addr,
        trigger,
        task,
    })
}

/// The pool, once the database is ready for the worker: the app's tables there with their
/// grants, and the worker's migrations applied (by it, with `--migrate`).
async fn ready_database(settings: &Settings) -> Result<sqlx::PgPool, Error> {
    let provision = if settings.provisions_development() {
        Provision::Development
    } else {
        Provision::Nothing
    };
    let pool = store::connect(&settings.database, provision).await?;
    // Check first, create nothing: on a database without the app's tables (or without the
    // grants on them) `--migrate` must not leave the worker's tables behind before refusing.
    // Only development provisioning creates the app's tables, so only there do the checks
    // wait for the migrator.
    if provision == Provision::Nothing {
        require_app_side(&pool, &settings.database).await?;
    }
    if settings.migrate {
        let applied = store::migrate_with(&pool, &store::MIGRATOR, provision).await?;
        tracing::info!(applied = ?applied, "migrations up to date");
    }
    store::ensure_migrated(&pool, false).await?;
    if provision == Provision::Development {
        require_app_side(&pool, &settings.database).await?;
    }
    Ok(pool)
}

/// The HTTP server, serving until it is told to stop.
struct Serving {
    addr: SocketAddr,
    stop: Trigger,
    task: JoinHandle<()>,
}

/// Binds the HTTP port and serves `/metrics`, `/healthz`, `/readyz` and the admin API.
async fn serve_http(
    settings: &Settings,
    pool: &sqlx::PgPool,
    metrics: &Arc<Metrics>,
    broker_ready: &Arc<AtomicBool>,
    budget: &Budget,
) -> Result<Serving, Error> {
    let listener = tokio::net::TcpListener::bind(settings.http_addr)
        .await
        .map_err(|e| Error::Startup(format!("cannot listen on {}: {e}", settings.http_addr)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("no local address: {e}")))?;
    let (stop, stopped) = shutdown::channel();
    let mut admin_state = AdminState::new(pool.clone(), settings, &settings.admin, metrics.clone());
    admin_state.budget = Some(budget.clone());
    let app = http::router(AppState {
        metrics: metrics.clone(),
        pool: pool.clone(),
        broker_ready: broker_ready.clone(),
    })
    .merge(admin::router(admin_state));
    let task = tokio::spawn(http::serve(listener, app, settings.http_limits(), stopped));
    tracing::info!(http_addr = %addr, "HTTP listening");
    admin::announce(
        settings.admin.admin_token.is_some(),
        addr,
        Duration::from_secs(settings.admin.admin_timeout_secs.max(1)),
    );
    Ok(Serving { addr, stop, task })
}

/// The outbox relay, on a publisher (a connection) of its own.
fn relay(settings: &Settings, pool: &sqlx::PgPool, metrics: &Arc<Metrics>) -> Relay {
    Relay {
        pool: pool.clone(),
        publisher: Publisher::new(
            PublishTarget::from_settings(
                &settings.publish,
                &format!("{}-relay", settings.connection_name),
            ),
            metrics.clone(),
        ),
        metrics: metrics.clone(),
        interval: Duration::from_secs(settings.outbox_relay_secs.max(1)),
        grace: Duration::from_secs(settings.outbox_grace_secs),
    }
}

/// What runs beside the worker, stopped after it in this order.
struct Beside {
    marking: JoinHandle<()>,
    relay: JoinHandle<()>,
    index_watch: JoinHandle<()>,
    pool: sqlx::PgPool,
    http: Serving,
}

impl Beside {
    /// The drain after the worker: the last marks, the relay, the index watch, the pool,
    /// then the HTTP server (`/readyz` answers until the end).
    async fn drain(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.marking).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.relay).await;
        let _ = self.index_watch.await;
        if tokio::time::timeout(Duration::from_secs(5), self.pool.close())
            .await
            .is_err()
        {
            tracing::warn!("closing the database pool timed out");
        }
        self.http.stop.fire();
        let _ = self.http.task.await;
        tracing::info!("stopped");
    }
}

/// The app's tables are there and the worker's role has its grants on them.
async fn require_app_side(pool: &sqlx::PgPool, database: &DatabaseSettings) -> Result<(), Error> {
    store::require_app_tables(pool, database).await?;
    store::require_grants(pool).await
}

/// How often the worker looks at the transcript-repair index again: a DBA may build it
/// while the worker runs.
const INDEX_CHECK_EVERY: Duration = Duration::from_secs(300);

/// Looks at the transcript-repair index, sets its gauge, and says so when it is not usable
/// (at start) or when its state changed since `before`. A database error leaves things as
/// they were: the worker's retries and `/readyz` report an outage.
async fn look_at_index(
    pool: &sqlx::PgPool,
    metrics: &Metrics,
    before: Option<IndexState>,
) -> Option<IndexState> {
    let Ok(now) = store::transcript_index(pool).await else {
        return before;
    };
    metrics.transcript_index_ready(now == IndexState::Ready);
    if Some(now) == before {
        return before;
    }
    if now == IndexState::Ready {
        if before.is_some() {
            tracing::info!(
                index = store::TRANSCRIPT_INDEX,
                "the transcript index is ready now"
            );
        }
    } else {
        tracing::warn!(
            index = store::TRANSCRIPT_INDEX,
            state = now.as_str(),
            "transcript repair reads every tool message of a chat on each recovery without \
             this index; have the owner of `messages` run `toolcall-recovery index` \
             (docs/operations.md)"
        );
    }
    Some(now)
}

/// [`look_at_index`] every [`INDEX_CHECK_EVERY`] until shutdown.
async fn watch_index(
    pool: sqlx::PgPool,
    metrics: Arc<Metrics>,
    mut state: Option<IndexState>,
    mut shutdown: Shutdown,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(INDEX_CHECK_EVERY) => {}
            () = shutdown.wait() => return,
        }
        state = look_at_index(&pool, &metrics, state).await;
    }
}

/// Every label value at 0 (each model of the list among them), and the policy in the gauges.
pub fn prime(metrics: &Metrics, policy: &recover::Policy, models: &Models) {
    let outcomes = recover::Outcome::ALL.map(recover::Outcome::as_str);
    let modes = recover::Mode::ALL.map(recover::Mode::as_str);
    let reverts = recover::revert::RevertOutcome::ALL.map(|r| r.as_str());
    let models: Vec<&str> = models.names().collect();
    metrics.prime(&Prime {
        outcomes: &outcomes,
        modes: &modes,
        dead_letter_reasons: error::DEAD_LETTER_REASONS,
        revert_results: &reverts,
        models: &models,
    });
    metrics.policy(
        policy.mode.as_str(),
        &modes,
        toolcall_detect::Family::ALL
            .iter()
            .map(|f| (f.as_str(), policy.family_mode(*f).as_str())),
    );
}

/// The operator switched something off or into observe mode: say so once at start.
fn log_policy(policy: &recover::Policy) {
    let with = |m: recover::FamilyMode| -> Vec<&str> {
        toolcall_detect::Family::ALL
            .iter()
            .filter(|f| policy.family_mode(**f) == m)
            .map(|f| f.as_str())
            .collect()
    };
    tracing::info!(
        mode = policy.mode.as_str(),
        families_observe = ?with(recover::FamilyMode::Observe),
        families_disabled = ?with(recover::FamilyMode::Disabled),
        "recovery policy"
    );
}
