//! The admin API (contract §6), for the chat app's "fix" button and for operators:
//!
//! - `GET /v1/messages/{id}/diagnosis`: what recovery would do to the message now (the
//!   same decision and plan on the message as read, [`crate::recover::diagnose`], in a READ
//!   ONLY transaction), with what detection sees in it. Locks nothing, writes nothing.
//! - `POST /v1/messages/{id}/recover`: runs the recovery pass
//!   ([`crate::recover::recover`], source `admin`), publishes the cleaned message
//!   for moderation and the forwarded calls like the worker does, and says what it did:
//!   200 done, 404 no such message, 409 nothing to recover, 422 a leak that cannot be
//!   executed (no agent, tool not enabled, invalid arguments, a bare result object), the
//!   removed text kept in the ledger wherever text was removed. In observe mode the pass
//!   only records what it would do (`"mode": "observe"` in the answer) and publishes
//!   nothing.
//! - `POST /v1/messages/{id}/revert` (`?dry_run=true` to only see what it would do): puts
//!   the message back as it was before its latest recovery ([`recover::revert`]) and
//!   publishes the restored message for moderation: 200 reverted (or already reverted),
//!   404 no such message, 409 `nothing_to_revert` or `conflict` (changed since).
//! - `GET /v1/messages/{id}/ledger` (`?show_text=true` to include the removed text and
//!   the content before and after): the message's ledger rows, newest first
//!   ([`crate::ledger::message_ledger`]); an empty list for a message never recovered, 404
//!   for an id that is neither a message nor in the ledger.
//!
//! All sit behind `Authorization: Bearer <TCR_ADMIN_TOKEN>` (compared in constant time);
//! without a configured token they answer 404, as if they did not exist. Errors are JSON,
//! `{"error": {"code": ..., "message": ...}}`, mapped from [`ApiError`] in one place.
//! Requests are limited in size and time ([`MAX_BODY_BYTES`], [`AdminState::timeout`]).
//!
//! [`router`] gives a `Router` to merge into the HTTP server of `http`;
//! [`AdminState::new`] builds the state from the worker's settings (the token and time limit
//! are `settings::AdminSettings`). The token lives in `auth`, the error
//! mapping in `error`.
//!
//! May depend on: `recover`, `publish`, `outbound`, `ledger`, `metrics`, `ids`, `settings`,
//! `budget`, `error`, `axum`, `sqlx`, `subtle`, `outbox`, `tokio`. Never on `backfill` or
//! `cmd`.

mod asked;
mod audit;
mod auth;
mod error;

pub use audit::announce;
pub use error::ApiError;

use crate::budget::{Budget, Share};
use crate::error::Error;
use crate::ids::MessageId;
use crate::metrics::Metrics;
use crate::outbound::StandIn;
use crate::outbox::Queued;
use crate::publish::{PublishTarget, PublishedCounts, Publisher};
use crate::recover::revert::{self, RevertOutcome};
use crate::recover::{self, Outcome, Policy, Report, Source};
use crate::settings::{AdminSettings, AdminToken, Settings};
use asked::Asked;
use audit::Said;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use error::json_response;
use serde::Deserialize;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcall_detect::Detection;

/// Largest request accepted, in bytes (the endpoints take no body).
pub const MAX_BODY_BYTES: usize = 4 * 1024;
/// Characters of text shown in previews.
const PREVIEW_CHARS: usize = 200;

/// What the handlers need.
#[derive(Clone)]
pub struct AdminState {
    /// The database.
    pub pool: PgPool,
    /// The recovery policy (as the worker's).
    pub policy: Arc<Policy>,
    /// The token; `None` disables the API.
    pub token: Option<AdminToken>,
    /// Where recovered messages are published; `None` publishes nothing.
    pub publisher: Option<Arc<Publisher>>,
    /// Calls, memories and publishes are counted like the worker's.
    pub metrics: Arc<Metrics>,
    /// Time limit of one request.
    pub timeout: Duration,
    /// The process's byte budget (the worker's): a pass over a message takes a share the
    /// size of its content, as a delivery does. `None`: unbounded (tests, tools).
    pub budget: Option<Budget>,
}

impl AdminState {
    /// The state of the admin API of a worker with these settings: its detection policy,
    /// its exchanges (on a broker connection of its own, named `<connection-name>-admin`),
    /// its metrics.
    pub fn new(
        pool: PgPool,
        settings: &Settings,
        admin: &AdminSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        let publisher = Publisher::new(
            PublishTarget::from_settings(
                &settings.publish,
                &format!("{}-admin", settings.connection_name),
            ),
            metrics.clone(),
        );
        AdminState {
            pool,
            policy: Arc::new(settings.policy()),
            token: admin.admin_token.clone(),
            publisher: Some(Arc::new(publisher)),
            metrics,
            timeout: Duration::from_secs(admin.admin_timeout_secs.max(1)),
            budget: None,
        }
    }
}

/// A share of the byte budget the size of message `id`'s content, held while a pass
/// works on it: a diagnosis or recover of a large message waits for room (within the
/// request's time limit) instead of adding its copies on top of the worker's.
async fn share(s: &AdminState, id: MessageId) -> Result<Option<Share>, ApiError> {
    let Some(budget) = &s.budget else {
        return Ok(None);
    };
    let len: Option<Option<i32>> =
        sqlx::query_scalar("SELECT octet_length(content) FROM messages WHERE id = $1")
            .bind(id.get())
            .fetch_optional(&s.pool)
            .await
            .map_err(Error::from)?;
    let len = len.flatten().map_or(0, |l| usize::try_from(l).unwrap_or(0));
    Ok(Some(budget.take(len).await))
}

/// The admin routes, with authentication, size and time limits.
pub fn router(state: AdminState) -> Router {
    Router::new()
        // A wrong method is answered behind the guard too (a route's fallback), so that
        // without a token nothing, not even a 405, shows that the API is there.
        .route(
            "/v1/messages/{id}/diagnosis",
            get(diagnosis).fallback(wrong_method),
        )
        .route(
            "/v1/messages/{id}/recover",
            post(recover_now).fallback(wrong_method),
        )
        .route(
            "/v1/messages/{id}/revert",
            post(revert_now).fallback(wrong_method),
        )
        .route(
            "/v1/messages/{id}/ledger",
            get(ledger).fallback(wrong_method),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), guard))
        // Unknown paths are not behind the guard: they answer 404 with or without a token.
        .fallback(unknown_route)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Authentication, then the size limit, then the time limit; then the request's log line
/// (`audit`). A refused token and a request while the API is off are logged rate-limited
/// instead, so that a client hammering them cannot flood the log.
async fn guard(State(s): State<AdminState>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let route = audit::route(req.uri().path());
    let Some(token) = &s.token else {
        audit::while_off(&method, route, audit::peer(req.extensions()));
        return ApiError::NotFound("not found".into()).into_response();
    };
    if !auth::authorized(req.headers(), token) {
        audit::refused(&method, route, audit::peer(req.extensions()));
        return ApiError::Unauthorized.into_response();
    }
    let id = audit::message_id(req.uri().path());
    let started = Instant::now();
    let response =
        if auth::declared_length(req.headers()).is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            ApiError::TooLarge.into_response()
        } else {
            match tokio::time::timeout(s.timeout, next.run(req)).await {
                Ok(response) => response,
                Err(_) => ApiError::Timeout.into_response(),
            }
        };
    audit::answered(
        &method,
        route,
        id,
        response.status().as_u16(),
        response.extensions().get::<Said>().copied(),
        started.elapsed(),
    );
    response
}

/// A JSON answer that says its outcome for the request's log line.
fn answer(status: StatusCode, body: &Value, outcome: &'static str, dry_run: bool) -> Response {
    let mut response = json_response(status, body);
    response.extensions_mut().insert(Said { outcome, dry_run });
    response
}

/// Any other path: 404, as JSON like every error of the API (docs/backfill-and-admin.md).
/// Not an admin request, so no log line above DEBUG.
async fn unknown_route(req: Request) -> ApiError {
    tracing::debug!(method = %req.method(), "HTTP request for an unknown path: 404");
    ApiError::NotFound("no such route".into())
}

async fn diagnosis(
    State(s): State<AdminState>,
    Asked { id, .. }: Asked<NoQuery>,
) -> Result<Response, ApiError> {
    let _share = share(&s, id).await?;
    let recover::Diagnosis { detection, report } =
        recover::diagnose(&s.pool, &s.policy, recover::Request::new(id, Source::Admin))
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("message {id} not found")))?;
    let mut body = report_body(&report, None);
    body["dry_run"] = json!(true);
    body["leaks"] = leaks_body(&detection);
    body["content_preview"] = json!(report.content.as_deref().map(preview));
    body.as_object_mut().map(|o| o.remove("content"));
    Ok(answer(StatusCode::OK, &body, report.outcome.as_str(), true))
}

async fn wrong_method() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Query of the endpoints that take no parameters. Any parameter is refused: a
/// `?dry_run=true` on recover must not turn into a real recovery unnoticed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoQuery {}

async fn recover_now(
    State(s): State<AdminState>,
    Asked { id, .. }: Asked<NoQuery>,
) -> Result<Response, ApiError> {
    let stand_in = StandIn::by(Source::Admin);
    let _share = share(&s, id).await?;
    let request = stand_in.request(id, s.publisher.is_some());
    let report = recover::recover(&s.pool, &s.policy, request).await?;
    s.metrics.recovery_pass(
        report.mode.as_str(),
        report.call_labels(),
        report.memories_created,
    );
    match report.outcome {
        Outcome::Clean => Err(ApiError::NothingToRecover(format!(
            "message {id} holds no leaked tool call"
        ))),
        Outcome::AlreadyRecovered => Err(ApiError::NothingToRecover(format!(
            "message {id} was already {} (ledger row {})",
            match report.mode {
                recover::Mode::Recover => "recovered",
                recover::Mode::Observe => "observed",
            },
            report.recovery_id.unwrap_or_default()
        ))),
        // Admin passes are never held back by a revert; kept for completeness.
        Outcome::Reverted => Err(ApiError::NothingToRecover(format!(
            "message {id} was reverted"
        ))),
        Outcome::NoAgent => Err(unprocessable(
            &report,
            "the message has no agent, so no tool can run; nothing was changed".into(),
        )),
        Outcome::NeedsReview => Err(unprocessable(
            &report,
            "the content is nothing but a tool result; it is left as it is and recorded \
             for review"
                .into(),
        )),
        Outcome::ToolNotEnabled | Outcome::InvalidArgs => {
            let published = publish(&s, &report).await?;
            let why = report
                .calls
                .iter()
                .find(|c| c.outcome == report.outcome)
                .and_then(|c| c.detail.clone())
                .unwrap_or_else(|| report.outcome.as_str().to_string());
            let mut e = unprocessable(
                &report,
                format!(
                    "{why}; the markup was removed and kept in the ledger (row {})",
                    report.recovery_id.unwrap_or_default()
                ),
            );
            if let ApiError::Unprocessable { recovery, .. } = &mut e {
                *recovery = report_body(&report, Some(published));
            }
            Err(e)
        }
        Outcome::Recovered | Outcome::StrippedOnly | Outcome::Forwarded => {
            let published = publish(&s, &report).await?;
            Ok(answer(
                StatusCode::OK,
                &report_body(&report, Some(published)),
                report.outcome.as_str(),
                false,
            ))
        }
    }
}

/// Query of the ledger endpoint. Unknown parameters are refused: a mistyped
/// `show_text` must not be silently ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerQuery {
    #[serde(default)]
    show_text: bool,
}

async fn ledger(
    State(s): State<AdminState>,
    Asked { id, query: q }: Asked<LedgerQuery>,
) -> Result<Response, ApiError> {
    let body = crate::ledger::message_ledger(&s.pool, id.get(), q.show_text).await?;
    // Ledger rows outlive a message the app deleted; with neither, the id is unknown.
    let listed = body["recoveries"].as_array().is_some_and(|r| !r.is_empty());
    if !listed && !message_exists(&s.pool, id).await? {
        return Err(ApiError::NotFound(format!("message {id} not found")));
    }
    Ok(answer(StatusCode::OK, &body, "listed", false))
}

async fn message_exists(pool: &PgPool, id: MessageId) -> Result<bool, ApiError> {
    Ok(
        sqlx::query_scalar::<_, bool>("SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1)")
            .bind(id.get())
            .fetch_one(pool)
            .await?,
    )
}

/// Query of the revert endpoint. Unknown parameters are refused: a mistyped `dry_run`
/// must not turn into a real revert.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RevertQuery {
    #[serde(default)]
    dry_run: bool,
}

async fn revert_now(
    State(s): State<AdminState>,
    Asked { id, query: q }: Asked<RevertQuery>,
) -> Result<Response, ApiError> {
    let stand_in = StandIn::by(Source::Admin);
    let owed = stand_in.revert_owed(s.publisher.is_some());
    let _share = share(&s, id).await?;
    let report = revert::revert_message(&s.pool, id, stand_in.asker(), q.dry_run, owed).await?;
    if !q.dry_run {
        s.metrics.revert(report.outcome.as_str());
    }
    let mut body = serde_json::to_value(&report).map_err(|e| {
        tracing::error!(error = %e, "revert report is not serialisable");
        ApiError::Internal
    })?;
    match report.outcome {
        RevertOutcome::Reverted | RevertOutcome::AlreadyReverted => {
            if s.publisher.is_some() && !report.dry_run {
                let published = deliver(&s, id, report.recovery_id, &report.outbox).await?;
                body["published"] = json!({
                    "moderation": published.moderation,
                    "pending": published.pending,
                    "unroutable": published.unroutable,
                });
            }
            Ok(answer(
                StatusCode::OK,
                &body,
                report.outcome.as_str(),
                report.dry_run,
            ))
        }
        RevertOutcome::NothingToRevert | RevertOutcome::Conflict => Err(ApiError::Refused {
            code: report.outcome.as_str(),
            message: report.reason.clone().unwrap_or_default(),
            recovery: body,
        }),
    }
}

fn unprocessable(report: &Report, message: String) -> ApiError {
    ApiError::Unprocessable {
        code: report.outcome.as_str(),
        message,
        recovery: report_body(report, None),
    }
}

/// Sends what the pass wrote to the outbox. A broker failure is not the caller's failure:
/// the change is committed and what it owes is in the outbox, which the worker's relay
/// sends once the broker is back; the answer says how much is still pending.
async fn publish(s: &AdminState, report: &Report) -> Result<PublishedCounts, ApiError> {
    deliver(s, report.message_id, report.recovery_id, &report.outbox).await
}

async fn deliver(
    s: &AdminState,
    id: MessageId,
    recovery_id: Option<i64>,
    rows: &[Queued],
) -> Result<PublishedCounts, ApiError> {
    let Some(publisher) = &s.publisher else {
        return Ok(PublishedCounts::default());
    };
    match publisher.deliver(&s.pool, rows).await {
        Ok(counts) => Ok(counts),
        Err(e @ Error::Database(_)) => Err(e.into()),
        Err(e) => {
            tracing::warn!(message_id = %id, recovery_id, error = %e,
                "committed; its publishes stay in the outbox for the relay");
            let sent = PublishedCounts {
                pending: rows.len(),
                ..PublishedCounts::default()
            };
            Ok(sent)
        }
    }
}

/// What a pass did (or would do), as JSON.
fn report_body(r: &Report, published: Option<PublishedCounts>) -> Value {
    let calls: Vec<Value> = r
        .calls
        .iter()
        .map(|c| {
            json!({
                "family": c.family.as_str(),
                "name": c.name,
                "arguments": c.arguments,
                "outcome": c.outcome.as_str(),
                "detail": c.detail,
                "memory_id": c.memory_id,
                "tool_message_id": c.tool_message_id,
            })
        })
        .collect();
    let mut families: Vec<&str> = r.calls.iter().map(|c| c.family.as_str()).collect();
    families.dedup();
    let forwarded: Vec<Value> = r
        .forward
        .iter()
        .map(|f| json!({"event_id": f.event_id.to_string(), "name": f.name, "family": f.family}))
        .collect();
    let mut body = json!({
        "message_id": r.message_id.get(),
        "chat_id": r.chat_id.get(),
        "agent_id": r.agent_id.map(|a| a.get()),
        "outcome": r.outcome.as_str(),
        "mode": r.mode.as_str(),
        "families": families,
        "calls": calls,
        "content": r.content,
        "tools_used": r.tools_used,
        "memories_created": r.memories_created,
        "forwarded": forwarded,
        "repaired_tool_messages": r.repaired_tool_messages,
        "recovery_id": r.recovery_id,
    });
    if let Some(p) = published {
        body["published"] = json!({
            "moderation": p.moderation,
            "tool_calls": p.tool_calls,
            "pending": p.pending,
            "unroutable": p.unroutable,
        });
    }
    body
}

fn leaks_body(d: &Detection) -> Value {
    d.leaks
        .iter()
        .map(|l| {
            json!({
                "family": l.family.as_str(),
                "start": l.span.start,
                "end": l.span.end,
                "calls": l.calls.iter().map(|c| json!({"name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
                "results": l.results.iter().map(|r| r.value.clone()).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn preview(s: &str) -> String {
    recover::preview(s, PREVIEW_CHARS)
}
