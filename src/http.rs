//! The HTTP surface on one port: `/metrics` (Prometheus text), `/healthz` (the process
//! answers), `/readyz` (a broker session is consuming and the database answers). The admin
//! API (`admin`) is merged in by `startup`; [`serve`] serves it all with header-read and
//! idle timeouts and a connection limit.
//!
//! May depend on: `metrics`, `settings` (the server's limits), `shutdown`, `axum`, `hyper`,
//! `sqlx` (the readiness probe), `tokio`.

mod serve;

pub use serve::serve;

use crate::metrics::Metrics;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sqlx::PgPool;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the handlers need.
#[derive(Clone)]
pub struct AppState {
    /// The metrics to render.
    pub metrics: Arc<Metrics>,
    /// The pool the readiness probe pings.
    pub pool: PgPool,
    /// Set while a broker session is consuming.
    pub broker_ready: Arc<AtomicBool>,
}

/// The router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        // As the admin API's errors: JSON (its own unknown paths answer 404 as JSON too).
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn metrics(State(s): State<AppState>) -> Response {
    s.metrics
        .broker_consuming(s.broker_ready.load(Ordering::SeqCst));
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
}

async fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"error":{"code":"method_not_allowed","message":"method not allowed"}}"#,
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<AppState>) -> Response {
    let broker = s.broker_ready.load(Ordering::SeqCst);
    let database = tokio::time::timeout(
        Duration::from_secs(2),
        sqlx::query("SELECT 1").execute(&s.pool),
    )
    .await
    .is_ok_and(|r| r.is_ok());
    let status = if broker && database {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        format!("broker: {}\ndatabase: {}\n", up(broker), up(database)),
    )
        .into_response()
}

fn up(ok: bool) -> &'static str {
    if ok {
        "up"
    } else {
        "down"
    }
}
