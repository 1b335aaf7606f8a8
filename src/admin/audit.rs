//! What the admin API says in the log (docs/backfill-and-admin.md, "What it logs"):
//!
//! - at start, whether it is on (and where) or off and why ([`announce`]);
//! - one INFO line per request that passed the token check ([`answered`]): method, route
//!   template, message id, status, outcome, whether it was a dry run, time taken. Never a
//!   header (the token), a query value or message content;
//! - a refused token: one WARN with the peer's address, at most one per [`EVERY`] per
//!   process, the next one counting those it left out ([`refused`]); a request while the
//!   API is off: the same, at INFO ([`while_off`]). A client hammering a wrong token or a
//!   scanner cannot flood the log.
//!
//! Handlers say their outcome by putting a [`Said`] into the response's extensions; the
//! guard reads it back for the request's line.
//!
//! May depend on: `settings` (the admin settings), `axum` (the request's parts), `tracing`.

use axum::extract::ConnectInfo;
use axum::http::{Extensions, Method};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one refused-token line (and one API-is-off line) per this long, per process.
pub const EVERY: Duration = Duration::from_secs(10);

/// What a handler says it did, for the request's log line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Said {
    /// The outcome (`recovered`, `reverted`, `listed`, an error code, ...).
    pub(super) outcome: &'static str,
    /// A diagnosis or `?dry_run=true`: nothing was written.
    pub(super) dry_run: bool,
}

/// Lets through one line per `every`, counting the ones it holds back.
#[derive(Debug)]
pub(super) struct Throttle {
    every: Duration,
    /// When the last line went out, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    pub(super) const fn new(every: Duration) -> Self {
        Throttle {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Whether a line may go out at `now`: `Some(n)` with the `n` lines held back since the
    /// last one, `None` to hold this one back (it is counted).
    pub(super) fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, held) = &mut *state;
        match last {
            Some(t) if now.saturating_duration_since(*t) < self.every => {
                *held += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(held))
            }
        }
    }
}

static REFUSED: Throttle = Throttle::new(EVERY);
static WHILE_OFF: Throttle = Throttle::new(EVERY);

/// The start-up line: on, at `addr`, or off and why.
pub fn announce(token_configured: bool, addr: SocketAddr, timeout: Duration) {
    if token_configured {
        tracing::info!(
            admin_api = %format!("http://{addr}/v1/messages/{{id}}/"),
            routes = "GET diagnosis, POST recover, POST revert, GET ledger",
            timeout_secs = timeout.as_secs(),
            "admin API on, behind the bearer token"
        );
    } else {
        tracing::info!(
            "admin API off: no admin token configured (TCR_ADMIN_TOKEN or --admin-token), so \
             its routes answer 404"
        );
    }
}

/// The route template of an admin path (`/v1/messages/{id}/recover`): what the log says
/// instead of the path as sent.
pub(super) fn route(path: &str) -> &'static str {
    match path.rsplit('/').next() {
        Some("diagnosis") => "/v1/messages/{id}/diagnosis",
        Some("recover") => "/v1/messages/{id}/recover",
        Some("revert") => "/v1/messages/{id}/revert",
        Some("ledger") => "/v1/messages/{id}/ledger",
        _ => "-",
    }
}

/// The message id of an admin path (`/v1/messages/{id}/...`), when it is one.
pub(super) fn message_id(path: &str) -> Option<i64> {
    let mut parts = path.trim_start_matches('/').split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("v1"), Some("messages"), Some(id)) => id.parse().ok(),
        _ => None,
    }
}

/// The peer's address, when the server recorded it.
pub(super) fn peer(extensions: &Extensions) -> Option<SocketAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| *a)
}

/// The line of a request that passed the token check.
pub(super) fn answered(
    method: &Method,
    route: &str,
    id: Option<i64>,
    status: u16,
    said: Option<Said>,
    took: Duration,
) {
    let outcome = said.map_or("-", |s| s.outcome);
    let dry_run = said.is_some_and(|s| s.dry_run);
    let took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    match id {
        Some(message_id) => tracing::info!(
            method = %method, route, message_id, status, outcome, dry_run, took_ms,
            "admin request"
        ),
        None => tracing::info!(
            method = %method, route, status, outcome, dry_run, took_ms,
            "admin request"
        ),
    }
}

/// A request refused for its token (401), rate-limited.
pub(super) fn refused(method: &Method, route: &str, peer: Option<SocketAddr>) {
    let Some(held_back) = REFUSED.admit(Instant::now()) else {
        return;
    };
    let peer = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
    tracing::warn!(
        method = %method, route, peer, held_back,
        "admin request refused: missing or wrong bearer token (at most one such line every \
         {}s; held_back counts the ones left out since the last)",
        EVERY.as_secs()
    );
}

/// A request to the API while it is off (404), rate-limited.
pub(super) fn while_off(method: &Method, route: &str, peer: Option<SocketAddr>) {
    let Some(held_back) = WHILE_OFF.admit(Instant::now()) else {
        return;
    };
    let peer = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
    tracing::info!(
        method = %method, route, peer, held_back,
        "admin request answered 404: the admin API is off (no TCR_ADMIN_TOKEN configured; at \
         most one such line every {}s)",
        EVERY.as_secs()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throttle_lets_one_line_through_per_period_and_counts_the_rest() {
        let t = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(t.admit(start), Some(0), "the first goes out");
        for s in 1..=5 {
            assert_eq!(t.admit(start + Duration::from_secs(s)), None);
        }
        assert_eq!(
            t.admit(start + Duration::from_secs(10)),
            Some(5),
            "the next period's first line counts the five held back"
        );
        assert_eq!(t.admit(start + Duration::from_secs(11)), None);
        assert_eq!(t.admit(start + Duration::from_secs(60)), Some(1));
    }

    #[test]
    fn the_message_id_is_read_off_admin_paths_only() {
        assert_eq!(message_id("/v1/messages/812/recover"), Some(812));
        assert_eq!(message_id("/v1/messages/abc/recover"), None);
        assert_eq!(message_id("/metrics"), None);
        assert_eq!(
            route("/v1/messages/abc/recover"),
            "/v1/messages/{id}/recover"
        );
    }
}
