//! Who may call the admin API: the bearer token, compared in constant time, and the
//! reading of the `Authorization` header.
//!
//! May depend on: `settings` (the token type), `axum` (headers), `subtle`.

use crate::settings::AdminToken;
use axum::http::{header, HeaderMap};
use subtle::ConstantTimeEq;

/// Whether `presented` is the token, compared in time independent of where they differ.
fn matches(token: &AdminToken, presented: &str) -> bool {
    bool::from(token.expose().as_bytes().ct_eq(presented.as_bytes()))
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
            matches(token, presented.trim())
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
        assert!(matches(&t, "s3cret-token"));
        assert!(!matches(&t, "s3cret-tokeN"));
        assert!(!matches(&t, "s3cret"));
        assert!(!matches(&t, ""));
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
