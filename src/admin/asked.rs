//! What every endpoint of the admin API starts with: the message its path names and its
//! query, both checked ([`Asked`]). A bad id is a 400 (`invalid_id`); so is an unknown or
//! malformed query parameter (`invalid_query`: a mistyped `dry_run` must not turn into a
//! real revert).
//!
//! May depend on: the parent `admin` (its errors), `ids`, `axum`, `serde`.

use super::error::ApiError;
use crate::ids::MessageId;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// The message a request names, and its query `Q`.
pub(super) struct Asked<Q> {
    pub(super) id: MessageId,
    pub(super) query: Q,
}

impl<S: Send + Sync, Q: DeserializeOwned> FromRequestParts<S> for Asked<Q> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::InvalidId(e.body_text().chars().take(40).collect()))?;
        let id = parse_id(&raw)?;
        let Query(query) = Query::<Q>::from_request_parts(parts, state)
            .await
            .map_err(invalid_query)?;
        Ok(Asked { id, query })
    }
}

fn parse_id(raw: &str) -> Result<MessageId, ApiError> {
    match raw.parse::<i64>() {
        Ok(id) if id > 0 => Ok(MessageId::new(id)),
        _ => Err(ApiError::InvalidId(raw.chars().take(40).collect())),
    }
}

fn invalid_query(e: QueryRejection) -> ApiError {
    ApiError::InvalidQuery(e.body_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_must_be_positive_integers() {
        assert!(parse_id("12").is_ok());
        assert!(parse_id("0").is_err());
        assert!(parse_id("x1").is_err());
    }
}
