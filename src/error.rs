//! The one error type of the worker, split by what to do next:
//!
//! - [`ErrorKind::Transient`]: the database or the broker is unavailable; retry with
//!   backoff and do not ack.
//! - [`ErrorKind::Poison`]: this delivery can never succeed; dead-letter it with
//!   [`Poison::reason`] and ack.
//! - [`ErrorKind::Bug`]: an invariant of ours broke; log it loudly, dead-letter the
//!   delivery as `internal_error` so it is kept for inspection, and go on.
//!
//! The split lives here, in types, so that no caller inspects error strings.
//! May depend on: `ids`, `sqlx`, `lapin`.

use crate::ids::MessageId;

/// Why a delivery can never be processed. Each variant has a stable label
/// ([`Poison::reason`]) used in the dead-letter header and the metrics.
#[derive(Debug, thiserror::Error)]
pub enum Poison {
    /// The body is larger than the configured limit.
    #[error("body of {size} bytes exceeds the limit of {limit} bytes")]
    Oversized {
        /// Size of the body.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The body is not UTF-8.
    #[error("body is not valid UTF-8: {0}")]
    InvalidUtf8(#[from] std::str::Utf8Error),
    /// The body is not JSON.
    #[error("body is not valid JSON: {0}")]
    MalformedJson(String),
    /// JSON of the wrong shape: missing fields, wrong types, bad ids or timestamps.
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// An event type this worker does not handle.
    #[error("unknown event type {0:?}")]
    UnknownType(String),
    /// The event names a message that is not in the database.
    #[error("message {0} not found")]
    MissingMessage(MessageId),
}

/// Every dead-letter reason a delivery can carry ([`Poison::reason`] and
/// [`Error::dead_letter_reason`]), so metrics can show each label from the start.
pub const DEAD_LETTER_REASONS: &[&str] = &[
    "oversized",
    "invalid_utf8",
    "malformed_json",
    "invalid_event",
    "unknown_type",
    "missing_message",
    "rejected_by_database",
    "internal_error",
];

impl Poison {
    /// The stable label: dead-letter header `x-tcr-reason` and metrics label.
    pub fn reason(&self) -> &'static str {
        match self {
            Poison::Oversized { .. } => "oversized",
            Poison::InvalidUtf8(_) => "invalid_utf8",
            Poison::MalformedJson(_) => "malformed_json",
            Poison::InvalidEvent(_) => "invalid_event",
            Poison::UnknownType(_) => "unknown_type",
            Poison::MissingMessage(_) => "missing_message",
        }
    }

    /// The `recovery.outcome` the message of a body that did not decode is moderated
    /// with, as stored, when the body still names it: `oversized` (too large to examine),
    /// `unreadable` (not UTF-8, not JSON, not the event's shape). `None` for the reasons
    /// that leave nothing to moderate: an event of another type is no finalized message,
    /// and a missing message has no stored content.
    pub fn unexamined_outcome(&self) -> Option<&'static str> {
        match self {
            Poison::Oversized { .. } => Some("oversized"),
            Poison::InvalidUtf8(_) | Poison::MalformedJson(_) | Poison::InvalidEvent(_) => {
                Some("unreadable")
            }
            Poison::UnknownType(_) | Poison::MissingMessage(_) => None,
        }
    }
}

/// What to do about an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Retry with backoff; do not ack.
    Transient,
    /// Dead-letter with a reason; ack.
    Poison,
    /// Log and alert; dead-letter as `internal_error`; ack.
    Bug,
}

/// Every failure of the worker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The delivery can never succeed.
    #[error(transparent)]
    Poison(#[from] Poison),
    /// A database error; [`Error::kind`] classifies it by SQLSTATE.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying migrations failed.
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A broker error (connection or channel lost, publish not confirmed, ...).
    #[error("broker: {0}")]
    Broker(#[from] lapin::Error),
    /// The broker refused a publish (negative confirm).
    #[error("broker did not confirm the publish to {0:?}")]
    NotConfirmed(String),
    /// An operation on a dependency took too long.
    #[error("timed out: {0}")]
    Timeout(&'static str),
    /// Shutdown (or a broken broker session) stopped work that was not finished and not
    /// failed: a retry or the wait for a message row. The delivery stays unacked, so the
    /// broker hands it to the next consumer.
    #[error("interrupted while {0}; left to the next consumer")]
    Interrupted(&'static str),
    /// Startup cannot go on (pending migrations, unusable configuration, port in use).
    #[error("{0}")]
    Startup(String),
    /// An invariant of ours broke.
    #[error("bug: {0}")]
    Bug(String),
    /// A command could not write its output (stdout closed, disk full).
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
}

impl Error {
    /// What to do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Poison(_) => ErrorKind::Poison,
            Error::Broker(_)
            | Error::NotConfirmed(_)
            | Error::Timeout(_)
            | Error::Interrupted(_) => ErrorKind::Transient,
            Error::Database(e) => classify_sqlx(e),
            Error::Migrate(_) | Error::Startup(_) | Error::Bug(_) | Error::Output(_) => {
                ErrorKind::Bug
            }
        }
    }

    /// Whether this is a database error with this SQLSTATE.
    pub fn has_sqlstate(&self, code: &str) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(db)) => db.code().as_deref() == Some(code),
            _ => false,
        }
    }

    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        self.kind() == ErrorKind::Transient
    }

    /// The label a delivery that failed with this error is dead-lettered with.
    pub fn dead_letter_reason(&self) -> &'static str {
        match self {
            Error::Poison(p) => p.reason(),
            Error::Database(_) if self.kind() == ErrorKind::Poison => "rejected_by_database",
            _ => "internal_error",
        }
    }
}

/// SQLSTATE classes: 08 connection, 28 authorization (credentials being rotated), 3D
/// database missing, 40 transaction rollback (serialization, deadlock), 53 insufficient
/// resources, 55 prerequisite state (connections not allowed, lock not available), 57
/// operator intervention (admin shutdown, pg_terminate_backend), 58 system error: all
/// worth waiting out. So are three codes of other classes that a failover or a pooler
/// causes: 25006 (a read-only server: the old primary, or a replica, until the client is
/// pointed at the new primary), 25P03 (the idle-in-transaction timeout ended the session)
/// and 26000 (a prepared statement the server no longer has: a pooler moved the session).
/// 22 data exception and 23 integrity violation: the data is refused. Anything else (42
/// syntax or missing column, ...) is a bug of ours or a schema we do not expect:
/// dead-lettered so it can be replayed after the fix.
fn classify_sqlx(e: &sqlx::Error) -> ErrorKind {
    match e {
        sqlx::Error::Database(db) => classify_sqlstate(db.code().as_deref().unwrap_or("")),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => ErrorKind::Transient,
        _ => ErrorKind::Bug,
    }
}

fn classify_sqlstate(code: &str) -> ErrorKind {
    match (code, code.get(..2).unwrap_or("")) {
        ("25006" | "25P03" | "26000", _) => ErrorKind::Transient,
        (_, "08" | "28" | "3D" | "40" | "53" | "55" | "57" | "58") => ErrorKind::Transient,
        (_, "22" | "23") => ErrorKind::Poison,
        _ => ErrorKind::Bug,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_and_pooler_codes_are_retried_and_bad_data_is_poison() {
        for code in [
            "25006", "25P03", "26000", "08006", "08P01", "40001", "40P01", "53300", "57P01",
            "57P03", "58030", "55P03", "3D000", "28P01",
        ] {
            assert_eq!(classify_sqlstate(code), ErrorKind::Transient, "{code}");
        }
        for code in ["22008", "22P02", "23505", "23514"] {
            assert_eq!(classify_sqlstate(code), ErrorKind::Poison, "{code}");
        }
        for code in ["42P01", "42703", "25001", "XX000", ""] {
            assert_eq!(classify_sqlstate(code), ErrorKind::Bug, "{code}");
        }
    }
}
