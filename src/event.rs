//! The events the worker reads and writes, decoded at the edge into types that can only
//! hold valid values. Bytes in, [`FinalizedEvent`] out; nothing else in the crate looks at
//! raw JSON of an incoming event.
//!
//! Decoding order: size limit, UTF-8, JSON, shape (ids, types, timestamps), event type.
//! Unknown fields are ignored (and carried through to the moderation message); a field of
//! the wrong type is poison. A body that does not decode may still name its message:
//! [`scan`] reads that leniently.
//!
//! May depend on: `ids`, `error`, `serde`, `uuid`, `chrono`, `memchr`. No I/O.

pub mod scan;

pub use scan::{named, Named};

use crate::error::Poison;
use crate::ids::{AgentId, ChatId, EventId, MessageId, ModelId};
use chrono::{DateTime, FixedOffset};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

/// The only event type this worker consumes.
pub const FINALIZED: &str = "message.finalized";

/// A message role; only `assistant` messages can hold leaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// `assistant`.
    Assistant,
    /// Anything else (`user`, `system`, `tool`, or a role this worker does not know).
    Other(String),
}

impl Role {
    /// Reads a role as stored.
    pub fn parse(s: &str) -> Role {
        if s == "assistant" {
            Role::Assistant
        } else {
            Role::Other(s.to_string())
        }
    }
}

/// A decoded `message.finalized` event.
#[derive(Debug, Clone)]
pub struct FinalizedEvent {
    /// The event's id.
    pub event_id: EventId,
    /// When the app finalized the message.
    pub occurred_at: DateTime<FixedOffset>,
    /// The message as the app sent it.
    pub message: EventMessage,
    /// The whole event as received (unknown fields included), the base of the moderation
    /// message.
    pub raw: serde_json::Map<String, Value>,
}

/// The message inside a [`FinalizedEvent`].
#[derive(Debug, Clone)]
pub struct EventMessage {
    /// `messages.id`.
    pub id: MessageId,
    /// `messages.chat_id`.
    pub chat_id: ChatId,
    /// `messages.agent_id`.
    pub agent_id: Option<AgentId>,
    /// `messages.role`.
    pub role: Role,
    /// `messages.content`.
    pub content: Option<String>,
    /// `messages.tools_used`.
    pub tools_used: Vec<String>,
    /// The model that wrote it (`message.model_id`); `None` when the event names none
    /// (absent, `null` or blank).
    pub model_id: Option<ModelId>,
}

#[derive(Deserialize)]
struct WireEvent {
    event_id: Uuid,
    #[serde(rename = "type")]
    kind: String,
    occurred_at: String,
    message: WireMessage,
}

#[derive(Deserialize)]
struct WireMessage {
    id: i64,
    chat_id: i64,
    agent_id: Option<i64>,
    role: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tools_used: Vec<String>,
    #[serde(default)]
    model_id: Option<String>,
}

/// What decoding a delivery body gives: the event, or the poison reason together with the
/// event id when the body got far enough to show one (for the log line).
pub type Decoded = Result<FinalizedEvent, (Poison, Option<EventId>)>;

/// Decodes a delivery body. Never panics.
pub fn decode(body: &[u8], max_bytes: usize) -> Decoded {
    if body.len() > max_bytes {
        return Err((
            Poison::Oversized {
                size: body.len(),
                limit: max_bytes,
            },
            None,
        ));
    }
    let text = std::str::from_utf8(body).map_err(|e| (Poison::InvalidUtf8(e), None))?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| (Poison::MalformedJson(e.to_string()), None))?;
    let Value::Object(raw) = value else {
        return Err((
            Poison::InvalidEvent("the event is not a JSON object".into()),
            None,
        ));
    };
    let event_id = raw
        .get("event_id")
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
        .map(EventId::new);
    let wire: WireEvent = serde_path_to_error::deserialize(Value::Object(raw.clone()))
        .map_err(|e| (Poison::InvalidEvent(shape_error(&e)), event_id))?;
    if wire.kind != FINALIZED {
        return Err((Poison::UnknownType(wire.kind), event_id));
    }
    let occurred_at = DateTime::parse_from_rfc3339(&wire.occurred_at).map_err(|e| {
        (
            Poison::InvalidEvent(format!("occurred_at is not RFC 3339: {e}")),
            event_id,
        )
    })?;
    let m = wire.message;
    Ok(FinalizedEvent {
        event_id: EventId::new(wire.event_id),
        occurred_at,
        message: EventMessage {
            id: MessageId::new(m.id),
            chat_id: ChatId::new(m.chat_id),
            agent_id: m.agent_id.map(AgentId::new),
            role: Role::parse(&m.role),
            content: m.content,
            tools_used: m.tools_used,
            model_id: m.model_id.as_deref().and_then(ModelId::parse),
        },
        raw,
    })
}

/// What is wrong with a JSON body that is not the event's shape, naming the field:
/// `message.id: invalid type: string "7", expected i64`, `message: missing field
/// `chat_id``.
fn shape_error<E: std::fmt::Display>(e: &serde_path_to_error::Error<E>) -> String {
    match e.path().to_string() {
        path if path == "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"event_id":"7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1","type":"message.finalized","occurred_at":"2026-01-01T00:00:00Z","extra":1,"message":{"id":1,"chat_id":2,"agent_id":null,"role":"assistant","content":null,"tools_used":[],"model_id":null}}"#;

    #[test]
    fn decodes_a_good_event_and_ignores_unknown_fields() {
        let e = decode(GOOD.as_bytes(), 1 << 20).unwrap();
        assert_eq!(e.message.id.get(), 1);
        assert_eq!(e.message.agent_id, None);
        assert_eq!(e.message.role, Role::Assistant);
        assert_eq!(e.message.model_id, None);
    }

    #[test]
    fn decodes_the_model_id_and_treats_a_wrong_type_as_poison() {
        let with =
            |model: &str| GOOD.replace("\"model_id\":null", &format!("\"model_id\":{model}"));
        let e = decode(with("\" models/gemini-2.5-flash \"").as_bytes(), 1 << 20).unwrap();
        assert_eq!(
            e.message.model_id.as_ref().map(ModelId::as_str),
            Some("models/gemini-2.5-flash")
        );
        let blank = decode(with("\"  \"").as_bytes(), 1 << 20).unwrap();
        assert_eq!(blank.message.model_id, None);
        let absent = decode(GOOD.replace(",\"model_id\":null", "").as_bytes(), 1 << 20).unwrap();
        assert_eq!(absent.message.model_id, None);
        for wrong in ["7", "[\"gpt-4o\"]", "{\"name\":\"gpt-4o\"}", "true"] {
            let err = decode(with(wrong).as_bytes(), 1 << 20).unwrap_err();
            assert_eq!(err.0.reason(), "invalid_event", "{wrong}");
            assert!(err.1.is_some(), "the event id is known for the log line");
        }
    }

    #[test]
    fn classifies_poison() {
        let reason = |b: &[u8]| decode(b, 1000).unwrap_err().0.reason();
        assert_eq!(reason(b"\xff\xfe"), "invalid_utf8");
        assert_eq!(reason(b"{not json"), "malformed_json");
        assert_eq!(reason(&[b' '; 2000]), "oversized");
        assert_eq!(
            reason(GOOD.replace("\"id\":1", "\"id\":\"1\"").as_bytes()),
            "invalid_event"
        );
        assert_eq!(
            reason(GOOD.replace("\"id\":1,", "").as_bytes()),
            "invalid_event"
        );
        assert_eq!(
            reason(
                GOOD.replace("message.finalized", "message.deleted")
                    .as_bytes()
            ),
            "unknown_type"
        );
    }

    #[test]
    fn a_field_of_the_wrong_shape_is_named() {
        let error = |b: String| decode(b.as_bytes(), 1 << 20).unwrap_err().0.to_string();
        let wrong = error(GOOD.replace("\"id\":1", "\"id\":\"1\""));
        assert!(
            wrong.contains("message.id: invalid type: string"),
            "{wrong}"
        );
        let missing = error(GOOD.replace("\"chat_id\":2,", ""));
        assert!(
            missing.contains("message: missing field `chat_id`"),
            "{missing}"
        );
        let top = error(GOOD.replace("\"event_id\"", "\"id\""));
        assert!(top.contains("missing field `event_id`"), "{top}");
        let tools = error(GOOD.replace("\"tools_used\":[]", "\"tools_used\":[7]"));
        assert!(
            tools.contains("message.tools_used[0]: invalid type"),
            "{tools}"
        );
    }

    #[test]
    fn moderation_id_is_deterministic() {
        let e = decode(GOOD.as_bytes(), 1 << 20).unwrap();
        assert_eq!(
            e.event_id.moderation_event_id(),
            e.event_id.moderation_event_id()
        );
        assert_ne!(e.event_id.moderation_event_id(), e.event_id.get());
    }
}
