//! Secrets in settings: a connection URL ([`SecretUrl`]) and the admin token
//! ([`AdminToken`]) print masked in `Debug` and `Display`, so settings can be logged whole;
//! the one place that connects or compares asks for the secret by name (`expose`).
//!
//! May depend on: std only.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A connection URL that may carry a password. Prints as `scheme://user:***@host/...`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        SecretUrl(url.into())
    }
    /// The URL with its password, for the one place that connects.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// The URL with the password (in the authority and in `password=` parameters) masked.
    pub fn masked(&self) -> String {
        mask_url(&self.0)
    }
}

impl FromStr for SecretUrl {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(SecretUrl(s.to_string()))
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretUrl({})", self.masked())
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

/// The URL with every password replaced by `***`: the userinfo's (found by the last `@`,
/// so a password holding an unencoded `@`, `#`, `?` or `/` is masked whole) and the value of
/// every `password=` and `sslpassword=` parameter, case-insensitively, up to the next `&`
/// or whitespace. It masks too much rather than too little: an `@` later in the URL can
/// only make it hide more.
fn mask_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(rest_start) = userinfo_start(&out) {
        if let Some(at) = out[rest_start..].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "***");
            }
        }
    }
    mask_password_params(&out)
}

/// Where a userinfo would start: after `scheme://`, and after `scheme:` when the slashes
/// are missing (`amqp:user:pw@host` is no URL, which is exactly when an error message quotes
/// it whole). `None` when the text does not start with a scheme (a libpq keyword string).
fn userinfo_start(url: &str) -> Option<usize> {
    let colon = url.find(':')?;
    let scheme = &url[..colon];
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme {
        return None;
    }
    let rest = &url[colon + 1..];
    Some(colon + 1 + (rest.len() - rest.trim_start_matches('/').len()))
}

/// `password=...` and `sslpassword=...` values (libpq parameters), each one.
fn mask_password_params(url: &str) -> String {
    const KEY: &str = "password=";
    let lower = url.to_ascii_lowercase();
    let mut out = String::with_capacity(url.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = lower[from..].find(KEY) {
        let key_start = from + found;
        let value_start = key_start + KEY.len();
        let name_start = if lower[..key_start].ends_with("ssl") {
            key_start - 3
        } else {
            key_start
        };
        let starts_a_parameter = name_start == 0
            || matches!(
                url.as_bytes()[name_start - 1],
                b'?' | b'&' | b';' | b' ' | b'\t'
            );
        let value_end = url[value_start..]
            .find(['&', ' ', '\t', '\n'])
            .map_or(url.len(), |i| value_start + i);
        if starts_a_parameter {
            out.push_str(&url[copied..value_start]);
            out.push_str("***");
            copied = value_end;
        }
        from = value_end.max(value_start);
    }
    out.push_str(&url[copied..]);
    out
}

/// The admin bearer token. Prints as `***`.
#[derive(Clone)]
pub struct AdminToken(Arc<str>);

impl AdminToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        AdminToken(Arc::from(token.into()))
    }

    /// The token, for the one place that compares it (in constant time).
    pub fn expose(&self) -> &str {
        &self.0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_passwords() {
        let u = SecretUrl::new("amqps://guest:s3cret@mq.example:5671/%2f");
        assert_eq!(u.to_string(), "amqps://guest:***@mq.example:5671/%2f");
        assert!(!format!("{u:?}").contains("s3cret"));
        let p = SecretUrl::new("postgres://app:pw@db/x?sslmode=require&password=pw2");
        assert_eq!(
            p.masked(),
            "postgres://app:***@db/x?sslmode=require&password=***"
        );
        let n = SecretUrl::new("postgres://postgres@127.0.0.1:5432/db");
        assert_eq!(n.masked(), "postgres://postgres@127.0.0.1:5432/db");
    }

    #[test]
    fn masks_every_password_parameter_and_passwords_with_reserved_characters() {
        let cases = [
            (
                "postgres://db/x?password=a&sslpassword=b&PassWord=c",
                "postgres://db/x?password=***&sslpassword=***&PassWord=***",
            ),
            (
                "postgres://app:p#ss@db:5432/x",
                "postgres://app:***@db:5432/x",
            ),
            (
                "postgres://app:p?ss/w@rd@db:5432/x?sslmode=require",
                "postgres://app:***@db:5432/x?sslmode=require",
            ),
            (
                "amqp://guest:a/b#c?d@mq:5672/%2f",
                "amqp://guest:***@mq:5672/%2f",
            ),
            (
                "postgres://db/x?sslmode=verify-full&sslpassword=k3y&application_name=w",
                "postgres://db/x?sslmode=verify-full&sslpassword=***&application_name=w",
            ),
            (
                "host=db password=s3cret dbname=x",
                "host=db password=*** dbname=x",
            ),
        ];
        for (url, masked) in cases {
            let u = SecretUrl::new(url);
            assert_eq!(u.masked(), masked, "{url}");
            for secret in ["p#ss", "p?ss/w@rd", "a/b#c?d", "k3y", "s3cret"] {
                assert!(!format!("{u} {u:?}").contains(secret), "{url}");
            }
        }
        // Without the slashes (no URL, but an error message would quote it whole).
        for (url, masked) in [
            (
                "amqp:guest:s3cret@mq:5672/%2f",
                "amqp:guest:***@mq:5672/%2f",
            ),
            ("postgres:/app:s3cret@db/x", "postgres:/app:***@db/x"),
            ("host=db:5432 user=a@b", "host=db:5432 user=a@b"),
        ] {
            assert_eq!(SecretUrl::new(url).masked(), masked, "{url}");
        }
        // A parameter that merely ends in the word is not a password.
        let u = SecretUrl::new("postgres://db/x?nopassword=1");
        assert_eq!(u.masked(), "postgres://db/x?nopassword=1");
    }
}
