//! One dead letter, read: what the worker wrote in its `x-tcr-*` headers
//! (`worker/dead_letter.rs`), or what the broker wrote in `x-death` when it dead-lettered a
//! delivery by itself (the queue's delivery limit), and the event's ids from the body when
//! it is JSON. Also the headers a replay carries. Pure: no broker here.
//!
//! May depend on: `event` (the lenient scan of a body), `error` (the reasons), `lapin`
//! (header types), `chrono`, `serde_json`, `uuid`.

use chrono::{DateTime, Utc};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::time::Duration;

/// How many times a dead letter was replayed: set on the replayed message, copied into the
/// dead letter when the worker dead-letters it again.
pub const REPLAYS_HEADER: &str = "x-tcr-replays";

/// The message id the worker knew when it dead-lettered (`worker/dead_letter.rs`).
const MESSAGE_ID_HEADER: &str = "x-tcr-message-id";

/// The reason of a dead letter that carries none the worker or the broker wrote.
const UNKNOWN_REASON: &str = "unknown";

/// The reasons the broker writes in `x-death` when it dead-letters by itself.
const BROKER_REASONS: &[&str] = &["delivery_limit", "rejected", "expired", "maxlen"];

/// Every reason a dead letter can show: the worker's (`x-tcr-reason`), the broker's, and
/// `unknown`.
pub fn reasons() -> impl Iterator<Item = &'static str> {
    crate::error::DEAD_LETTER_REASONS
        .iter()
        .chain(BROKER_REASONS)
        .copied()
        .chain([UNKNOWN_REASON])
}

/// Headers a replay leaves behind: the worker's dead-letter headers (it writes them anew if
/// the event fails again; the replay count is written anew by the replay) and the broker's
/// dead-lettering and redelivery bookkeeping.
fn is_dead_letter_header(name: &str) -> bool {
    name.starts_with("x-tcr-")
        || name == "x-death"
        || name.starts_with("x-first-death-")
        || name.starts_with("x-last-death-")
        || name == "x-delivery-count"
}

/// A dead letter as read from the queue.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// Stable while it sits in the queue: a hash of its body, reason and time, 12 hex digits.
    pub id: String,
    /// `x-tcr-reason`, or the broker's reason (`delivery_limit`, ...), or `unknown`.
    pub reason: String,
    /// `x-tcr-error`.
    pub error: Option<String>,
    /// `x-tcr-event-id`, or the body's `event_id`.
    pub event_id: Option<String>,
    /// The message: `x-tcr-message-id` (what the worker knew), else the one the body names
    /// (`message.id`, read leniently as the worker reads a body that did not decode).
    pub message_id: Option<i64>,
    /// `x-tcr-dead-lettered-at`, or the broker's `x-death` time.
    pub dead_lettered_at: Option<DateTime<Utc>>,
    /// The routing key the event was first published with.
    pub routing_key: Option<String>,
    /// Replays so far ([`REPLAYS_HEADER`]).
    pub replays: u64,
    /// Times the queue handed it out and got it back (`x-delivery-count`): looking at the
    /// queue counts too.
    pub returns: u64,
    /// Every header, as it is in the queue.
    pub headers: FieldTable,
    /// The body, unchanged.
    pub body: Vec<u8>,
}

impl DeadLetter {
    /// Reads a dead letter's headers and body.
    pub fn read(headers: FieldTable, body: Vec<u8>) -> DeadLetter {
        let event: Option<Value> = serde_json::from_slice(&body).ok();
        let death = first_death(&headers);
        let text = |name: &str| headers.inner().get(name).and_then(as_text);
        let reason = text("x-tcr-reason")
            .or_else(|| {
                death
                    .and_then(|d| d.inner().get("reason"))
                    .and_then(as_text)
            })
            .unwrap_or_else(|| UNKNOWN_REASON.to_string());
        let dead_lettered_at = text("x-tcr-dead-lettered-at")
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&Utc))
            .or_else(|| death.and_then(death_time));
        let routing_key = text("x-tcr-original-routing-key").or_else(|| {
            death
                .and_then(|d| d.inner().get("routing-keys"))
                .and_then(|keys| match keys {
                    AMQPValue::FieldArray(a) => a.as_slice().first().and_then(as_text),
                    _ => None,
                })
        });
        let event_id = text("x-tcr-event-id").or_else(|| {
            event
                .as_ref()
                .and_then(|e| e.get("event_id")?.as_str().map(str::to_string))
        });
        let message_id = headers
            .inner()
            .get(MESSAGE_ID_HEADER)
            .and_then(|v| match v {
                AMQPValue::LongString(_) | AMQPValue::ShortString(_) => as_text(v)?.parse().ok(),
                v => value_json(v).as_i64(),
            })
            .or_else(|| {
                event
                    .as_ref()
                    .and_then(|e| e.get("message")?.get("id")?.as_i64())
            })
            .or_else(|| crate::event::named(&body).map(|n| n.message_id.get()));
        let id = fingerprint(&reason, dead_lettered_at, &body);
        DeadLetter {
            id,
            error: text("x-tcr-error"),
            replays: count(&headers, REPLAYS_HEADER),
            returns: count(&headers, "x-delivery-count"),
            reason,
            event_id,
            message_id,
            dead_lettered_at,
            routing_key,
            headers,
            body,
        }
    }

    /// Whether `key` names this dead letter: its id, or its event id.
    pub fn is(&self, key: &str) -> bool {
        let key = key.trim();
        self.id.eq_ignore_ascii_case(key)
            || self
                .event_id
                .as_deref()
                .is_some_and(|e| e.eq_ignore_ascii_case(key))
    }

    /// How long it has been dead, when it says since when.
    pub fn age(&self, now: DateTime<Utc>) -> Option<Duration> {
        (now - self.dead_lettered_at?).to_std().ok()
    }

    /// The headers of its replay: the original event's own headers, without what
    /// dead-lettering added, and [`REPLAYS_HEADER`] one higher.
    pub fn replay_headers(&self) -> FieldTable {
        let mut headers = FieldTable::default();
        for (name, value) in self.headers.inner() {
            if !is_dead_letter_header(name.as_str()) {
                headers.insert(name.clone(), value.clone());
            }
        }
        let replays = i64::try_from(self.replays.saturating_add(1)).unwrap_or(i64::MAX);
        headers.insert(
            ShortString::from(REPLAYS_HEADER),
            AMQPValue::LongLongInt(replays),
        );
        headers
    }

    /// The fields `list --json` prints: no content, no error text.
    pub fn summary_json(&self, now: DateTime<Utc>) -> Value {
        json!({
            "id": self.id,
            "reason": self.reason,
            "event_id": self.event_id,
            "message_id": self.message_id,
            "dead_lettered_at": self.dead_lettered_at.map(|t| t.to_rfc3339()),
            "age_secs": self.age(now).map(|a| a.as_secs()),
            "replays": self.replays,
            "routing_key": self.routing_key,
            "bytes": self.body.len(),
        })
    }

    /// The body as text, and whether that is it byte for byte: verbatim when it is UTF-8;
    /// otherwise lossily, each invalid sequence as U+FFFD, and `false`.
    pub fn body_text(&self) -> (Cow<'_, str>, bool) {
        match std::str::from_utf8(&self.body) {
            Ok(text) => (Cow::Borrowed(text), true),
            Err(_) => (String::from_utf8_lossy(&self.body), false),
        }
    }

    /// Everything, for `show --json`, as one line of JSON: the summary, the error, every
    /// header, and the body as received: a JSON body as it came (its key order, spacing
    /// and escapes kept, not parsed and written again), any other as a string
    /// ([`Self::body_text`], with `"body_utf8": false` when that is lossy).
    pub fn full_json(&self, now: DateTime<Utc>) -> Result<String, serde_json::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Body<'a> {
            Json(&'a RawValue),
            Text(Cow<'a, str>),
        }
        #[derive(Serialize)]
        struct Full<'a> {
            #[serde(flatten)]
            summary: Value,
            error: &'a Option<String>,
            headers: Value,
            body: Body<'a>,
            body_utf8: bool,
        }
        let (text, utf8) = self.body_text();
        let body = match serde_json::from_slice::<&RawValue>(&self.body) {
            Ok(raw) => Body::Json(raw),
            Err(_) => Body::Text(text),
        };
        serde_json::to_string(&Full {
            summary: self.summary_json(now),
            error: &self.error,
            headers: table_json(&self.headers),
            body,
            body_utf8: utf8,
        })
    }
}

/// A short, stable name for a dead letter. Its headers change while it waits (the queue
/// counts returns in `x-delivery-count`), so only what dead-lettering fixed goes in.
fn fingerprint(reason: &str, at: Option<DateTime<Utc>>, body: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(body.len() + 64);
    bytes.extend_from_slice(reason.as_bytes());
    bytes.push(0);
    if let Some(at) = at {
        bytes.extend_from_slice(at.to_rfc3339().as_bytes());
    }
    bytes.push(0);
    bytes.extend_from_slice(body);
    let hash = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, &bytes);
    hash.simple().to_string()[..12].to_string()
}

/// The broker's newest `x-death` entry (it puts the latest first).
fn first_death(headers: &FieldTable) -> Option<&FieldTable> {
    match headers.inner().get("x-death")? {
        AMQPValue::FieldArray(a) => match a.as_slice().first()? {
            AMQPValue::FieldTable(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

fn death_time(death: &FieldTable) -> Option<DateTime<Utc>> {
    match death.inner().get("time")? {
        AMQPValue::Timestamp(secs) => DateTime::from_timestamp(i64::try_from(*secs).ok()?, 0),
        _ => None,
    }
}

fn count(headers: &FieldTable, name: &str) -> u64 {
    headers
        .inner()
        .get(name)
        .and_then(|v| match v {
            AMQPValue::LongString(_) | AMQPValue::ShortString(_) => as_text(v)?.parse().ok(),
            v => value_json(v).as_u64(),
        })
        .unwrap_or(0)
}

fn as_text(v: &AMQPValue) -> Option<String> {
    match v {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// A header table as JSON, for people: strings as strings, numbers as numbers, times as
/// RFC 3339.
pub fn table_json(table: &FieldTable) -> Value {
    Value::Object(
        table
            .inner()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), value_json(v)))
            .collect::<Map<String, Value>>(),
    )
}

fn value_json(v: &AMQPValue) -> Value {
    match v {
        AMQPValue::Boolean(b) => json!(b),
        AMQPValue::ShortShortInt(n) => json!(n),
        AMQPValue::ShortShortUInt(n) => json!(n),
        AMQPValue::ShortInt(n) => json!(n),
        AMQPValue::ShortUInt(n) => json!(n),
        AMQPValue::LongInt(n) => json!(n),
        AMQPValue::LongUInt(n) => json!(n),
        AMQPValue::LongLongInt(n) => json!(n),
        AMQPValue::Float(n) => json!(n),
        AMQPValue::Double(n) => json!(n),
        AMQPValue::DecimalValue(d) => json!(f64::from(d.value) / 10f64.powi(i32::from(d.scale))),
        AMQPValue::ShortString(_) | AMQPValue::LongString(_) => json!(as_text(v)),
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(value_json).collect()),
        AMQPValue::Timestamp(secs) => i64::try_from(*secs)
            .ok()
            .and_then(|s| DateTime::from_timestamp(s, 0))
            .map_or(json!(secs), |t| json!(t.to_rfc3339())),
        AMQPValue::FieldTable(t) => table_json(t),
        AMQPValue::ByteArray(b) => json!(String::from_utf8_lossy(b.as_slice())),
        AMQPValue::Void => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};

    fn text(s: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(s.to_string()))
    }

    fn worker_letter(replays: Option<i64>) -> DeadLetter {
        let mut h = FieldTable::default();
        h.insert("x-tcr-reason".into(), text("missing_message"));
        h.insert("x-tcr-error".into(), text("message 4567 not found"));
        h.insert(
            "x-tcr-event-id".into(),
            text("0b7e2c1a-0000-4000-8000-000000000001"),
        );
        h.insert("x-tcr-original-exchange".into(), text("chat.events"));
        h.insert(
            "x-tcr-original-routing-key".into(),
            text("message.finalized"),
        );
        h.insert(
            "x-tcr-dead-lettered-at".into(),
            text("2026-11-22T04:00:00+00:00"),
        );
        h.insert("x-tcr-redelivered".into(), AMQPValue::Boolean(false));
        h.insert("x-delivery-count".into(), AMQPValue::LongLongInt(3));
        h.insert("traceparent".into(), text("00-abc-def-01"));
        if let Some(n) = replays {
            h.insert(REPLAYS_HEADER.into(), AMQPValue::LongLongInt(n));
        }
        let body = br#"{"event_id":"0b7e2c1a-0000-4000-8000-000000000001","message":{"id":4567}}"#;
        DeadLetter::read(h, body.to_vec())
    }

    #[test]
    fn reads_what_the_worker_wrote() {
        let d = worker_letter(None);
        assert_eq!(d.reason, "missing_message");
        assert_eq!(d.error.as_deref(), Some("message 4567 not found"));
        assert_eq!(
            d.event_id.as_deref(),
            Some("0b7e2c1a-0000-4000-8000-000000000001")
        );
        assert_eq!(d.message_id, Some(4567));
        assert_eq!(d.routing_key.as_deref(), Some("message.finalized"));
        assert_eq!((d.replays, d.returns), (0, 3));
        let now = DateTime::parse_from_rfc3339("2026-11-22T06:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(d.age(now), Some(Duration::from_secs(7200)));
        assert!(d.is(&d.id.to_uppercase()));
        assert!(d.is("0b7e2c1a-0000-4000-8000-000000000001"));
        assert!(!d.is("4567"));
    }

    #[test]
    fn the_id_ignores_the_returns_the_queue_counts() {
        let a = worker_letter(None);
        let mut headers = a.headers.clone();
        headers.insert("x-delivery-count".into(), AMQPValue::LongLongInt(9));
        let b = DeadLetter::read(headers, a.body.clone());
        assert_eq!(a.id, b.id);
        assert_eq!(a.id.len(), 12);
        let other = DeadLetter::read(a.headers.clone(), b"{}".to_vec());
        assert_ne!(a.id, other.id);
    }

    #[test]
    fn a_replay_drops_the_dead_letter_headers_keeps_the_events_and_counts_itself() {
        let replay = worker_letter(Some(2)).replay_headers();
        let names: Vec<&str> = replay.inner().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["traceparent", REPLAYS_HEADER]);
        assert_eq!(
            replay.inner().get(REPLAYS_HEADER),
            Some(&AMQPValue::LongLongInt(3))
        );
        let first = worker_letter(None).replay_headers();
        assert_eq!(
            first.inner().get(REPLAYS_HEADER),
            Some(&AMQPValue::LongLongInt(1))
        );
    }

    #[test]
    fn reads_what_the_broker_wrote_when_the_delivery_limit_dead_lettered_it() {
        let mut death = FieldTable::default();
        death.insert("reason".into(), text("delivery_limit"));
        death.insert("queue".into(), text("toolcall-recovery.finalized"));
        death.insert("time".into(), AMQPValue::Timestamp(1_795_000_000));
        death.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![text("message.finalized")])),
        );
        let mut h = FieldTable::default();
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
        );
        h.insert("x-first-death-reason".into(), text("delivery_limit"));
        let d = DeadLetter::read(h, b"not json".to_vec());
        assert_eq!(d.reason, "delivery_limit");
        assert_eq!(d.routing_key.as_deref(), Some("message.finalized"));
        assert_eq!(
            d.dead_lettered_at.map(|t| t.timestamp()),
            Some(1_795_000_000)
        );
        assert_eq!((d.event_id.as_deref(), d.message_id), (None, None));
        assert!(d
            .replay_headers()
            .inner()
            .keys()
            .all(|k| k.as_str() == REPLAYS_HEADER));
        let full: Value = serde_json::from_str(&d.full_json(Utc::now()).unwrap()).unwrap();
        assert_eq!(full["body"], json!("not json"));
        assert_eq!(full["body_utf8"], json!(true));
        assert_eq!(
            full["headers"]["x-death"][0]["reason"],
            json!("delivery_limit")
        );
    }

    /// Issue 32, item 10: the body as it came, not parsed and written again with its keys
    /// sorted; one that is not UTF-8 is said to be shown lossily.
    #[test]
    fn the_body_is_shown_as_received() {
        let body = br#"{"type": "message.finalized",  "event_id":"e\u00e9","message":{"id":7}}"#;
        let d = DeadLetter::read(FieldTable::default(), body.to_vec());
        assert_eq!(
            d.body_text(),
            (Cow::Borrowed(std::str::from_utf8(body).unwrap()), true)
        );
        let full = d.full_json(Utc::now()).unwrap();
        assert!(
            full.contains(&format!("\"body\":{}", std::str::from_utf8(body).unwrap())),
            "{full}"
        );
        let full: Value = serde_json::from_str(&full).unwrap();
        assert_eq!(full["body"]["message"]["id"], json!(7));

        let d = DeadLetter::read(FieldTable::default(), b"{\"a\": \"\xff\"}".to_vec());
        assert_eq!(
            d.body_text(),
            (Cow::Owned("{\"a\": \"\u{fffd}\"}".to_string()), false)
        );
        let full: Value = serde_json::from_str(&d.full_json(Utc::now()).unwrap()).unwrap();
        assert_eq!(full["body"], json!("{\"a\": \"\u{fffd}\"}"));
        assert_eq!(full["body_utf8"], json!(false));
    }

    /// Issue 32, item 10: the message the worker knew is listed, not `-`: from its
    /// `x-tcr-message-id` header, or read from the body as leniently as the worker reads it
    /// (a string id, a body cut short).
    #[test]
    fn the_message_id_is_what_the_worker_knew() {
        let mut h = FieldTable::default();
        h.insert(MESSAGE_ID_HEADER.into(), AMQPValue::LongLongInt(4567));
        assert_eq!(
            DeadLetter::read(h, b"not json".to_vec()).message_id,
            Some(4567)
        );
        let read = |body: &[u8]| DeadLetter::read(FieldTable::default(), body.to_vec()).message_id;
        assert_eq!(read(br#"{"message": {"id": "4567"}}"#), Some(4567));
        assert_eq!(
            read(br#"{"event_id": "x", "message": {"id": 4567, "content": "cut sh"#),
            Some(4567)
        );
        assert_eq!(read(br#"{"message": {"chat_id": 3}}"#), None);
    }

    #[test]
    fn a_letter_with_no_headers_is_unknown_not_an_error() {
        let d = DeadLetter::read(FieldTable::default(), Vec::new());
        assert_eq!(d.reason, "unknown");
        assert_eq!(d.age(Utc::now()), None);
    }
}
