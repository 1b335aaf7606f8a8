//! The errors of the admin API and the one place that maps them to statuses and to the
//! JSON body `{"error": {"code": ..., "message": ...}}` (plus `recovery`, what the pass
//! did, where a pass ran).
//!
//! May depend on: `error`, `axum`, `sqlx`.

use super::audit::Said;
use super::MAX_BODY_BYTES;
use crate::error::{Error, ErrorKind, Poison};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// Every failure of an admin request, and the one place that maps them to statuses.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No such message, or the API is disabled.
    #[error("{0}")]
    NotFound(String),
    /// Missing or wrong bearer token.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// The id in the path is not a message id.
    #[error("{0:?} is not a message id")]
    InvalidId(String),
    /// The query string is not one the endpoint takes (unknown parameter, bad value).
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    /// The path exists, the method does not (only with a valid token: without one, the API
    /// does not exist and answers 404).
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The request is larger than [`MAX_BODY_BYTES`].
    #[error("the request is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    /// The request took longer than its limit.
    #[error("the request took too long")]
    Timeout,
    /// Nothing to recover.
    #[error("{0}")]
    NothingToRecover(String),
    /// A leak that cannot be executed.
    #[error("{message}")]
    Unprocessable {
        /// The outcome label.
        code: &'static str,
        /// Why.
        message: String,
        /// What the pass did.
        recovery: Value,
    },
    /// The request was understood and refused as the message stands (nothing to revert,
    /// changed since recovery): 409 with its own code.
    #[error("{message}")]
    Refused {
        /// The code (`nothing_to_revert`, `conflict`).
        code: &'static str,
        /// Why.
        message: String,
        /// What the revert found.
        recovery: Value,
    },
    /// The database is unavailable; retry later.
    #[error("the database is unavailable, retry later")]
    Unavailable,
    /// A bug of ours.
    #[error("internal error")]
    Internal,
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::InvalidId(_) | ApiError::InvalidQuery(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Timeout | ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NothingToRecover(_) | ApiError::Refused { .. } => StatusCode::CONFLICT,
            ApiError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) => "not_found",
            ApiError::Unauthorized => "unauthorized",
            ApiError::InvalidId(_) => "invalid_id",
            ApiError::InvalidQuery(_) => "invalid_query",
            ApiError::TooLarge => "payload_too_large",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Timeout => "timeout",
            ApiError::NothingToRecover(_) => "nothing_to_recover",
            ApiError::Unprocessable { code, .. } | ApiError::Refused { code, .. } => code,
            ApiError::Unavailable => "unavailable",
            ApiError::Internal => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code(), "message": self.to_string()}});
        if let ApiError::Unprocessable { recovery, .. } | ApiError::Refused { recovery, .. } = &self
        {
            body["recovery"] = recovery.clone();
        }
        let mut response = json_response(self.status(), &body);
        response.extensions_mut().insert(Said {
            outcome: self.code(),
            dry_run: false,
        });
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"toolcall-recovery\""),
            );
        }
        response
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match &e {
            Error::Poison(Poison::MissingMessage(id)) => {
                ApiError::NotFound(format!("message {id} not found"))
            }
            _ if e.kind() == ErrorKind::Transient => {
                tracing::warn!(error = %e, "admin request failed on a transient error");
                ApiError::Unavailable
            }
            _ => {
                tracing::error!(error = %e, "admin request failed");
                ApiError::Internal
            }
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(Error::from(e))
    }
}

pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
