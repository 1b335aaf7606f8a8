//! Who may call the admin API: the bearer token, compared in constant time, and the
//! reading of the `Authorization` header.
//!
//! May depend on: `axum` (headers), `subtle`.

use axum::http::{header, HeaderMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The admin bearer token. Prints as `***`.
#[derive(Clone)]
pub struct AdminToken(Arc<str>);

impl AdminToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        AdminToken(Arc::from(token.into()))
    }

    /// Whether `presented` is the token, compared in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(presented.as_bytes()))
    }
}

impl FromStr for AdminToken {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err("the admin token is blank".into());
        }
        Ok(AdminToken::new(s))
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

pub(super) fn authorized(headers: &HeaderMap, token: &AdminToken) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    match value.trim().split_once(' ') {
        Some((scheme, presented)) if scheme.eq_ignore_ascii_case("bearer") => {
            token.matches(presented.trim())
        }
        _ => false,
    }
}

pub(super) fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_matches_only_itself_and_never_prints() {
        let t = AdminToken::new("s3cret-token");
        assert!(t.matches("s3cret-token"));
        assert!(!t.matches("s3cret-tokeN"));
        assert!(!t.matches("s3cret"));
        assert!(!t.matches(""));
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn bearer_scheme_is_required() {
        let t = AdminToken::new("abc");
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, &t));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert!(!authorized(&h, &t));
        h.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert!(authorized(&h, &t));
    }
}
