//! The events the worker reads and writes, decoded at the edge into types that can only
//! hold valid values. Bytes in, [`FinalizedEvent`] out; nothing else in the crate looks at
//! raw JSON of an incoming event.
//!
//! Decoding order: size limit, UTF-8, JSON and shape in one pass (ids, types), timestamp,
//! event type. A body that is not JSON (broken, or cut short: `malformed_json`) or not the
//! event's shape (`invalid_event`) but shows a `type` other than `message.finalized` is
//! `unknown_type`: it is no finalized message, whatever else is wrong with it. Unknown fields are ignored (and carried through to the moderation message,
//! verbatim); a field of the wrong type is poison, named by its path. A body that does not
//! decode may still name its message: [`scan`] reads that leniently.
//!
//! Memory: the event owns the delivery's bytes (moved in, not copied) and points into
//! them. The content stays the JSON string it was received as; it is unescaped (copied)
//! only when read, and only when it holds escapes (a newline, a quote), for as long as it
//! is read. Nothing builds a JSON tree of the event.
//!
//! May depend on: `ids`, `error`, `serde`, `serde_json`, `uuid`, `chrono`, `memchr`. No I/O.

pub mod scan;
mod wire;

pub use scan::{named, Kind, Named};

use crate::error::Poison;
use crate::ids::{AgentId, ChatId, EventId, MessageId, ModelId};
use chrono::{DateTime, FixedOffset};
use serde::de::IgnoredAny;
use serde_json::error::Category;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::ops::Range;
use wire::{Extra, WireEvent};

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

    /// The role as spelled on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Role::Assistant => "assistant",
            Role::Other(s) => s,
        }
    }
}

/// A decoded `message.finalized` event. It owns the body it was decoded from; the
/// content and the members it does not read are places in that body.
#[derive(Debug)]
pub struct FinalizedEvent {
    /// The event's id.
    pub event_id: EventId,
    /// When the app finalized the message.
    pub occurred_at: DateTime<FixedOffset>,
    /// The message as the app sent it.
    pub message: EventMessage,
    body: String,
    /// Where the content's JSON string is in the body (quotes included).
    content: Option<Range<usize>>,
    occurred_at_text: Text,
    /// `message.model_id` as received: `None` absent, `Some(None)` null.
    model_id_text: Option<Option<Text>>,
    extra: Vec<Member>,
    message_extra: Vec<Member>,
}

/// The message inside a [`FinalizedEvent`] (its content: [`FinalizedEvent::content`]).
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
    /// `messages.tools_used`.
    pub tools_used: Vec<String>,
    /// The model that wrote it (`message.model_id`); `None` when the event names none
    /// (absent, `null` or blank).
    pub model_id: Option<ModelId>,
}

/// A string of the event: a place in its body, or (when the JSON string held escapes)
/// the unescaped copy.
#[derive(Debug)]
enum Text {
    At(Range<usize>),
    Copied(Box<str>),
}

/// A member the worker does not read: its key, and where its raw JSON value is.
#[derive(Debug)]
struct Member {
    key: Box<str>,
    value: Range<usize>,
}

/// A member of the event as received, for building the moderation message.
pub struct RawMember<'a> {
    /// Its key.
    pub key: &'a str,
    /// Its value, raw JSON text exactly as received.
    pub value: &'a RawValue,
}

impl FinalizedEvent {
    /// The message's content (`None` when null or absent): a slice of the body, or, when
    /// its JSON string holds escapes (a newline, a quote), a copy unescaped now. Hold it
    /// only while it is read: the event keeps the body, not the copy.
    pub fn content(&self) -> Option<Cow<'_, str>> {
        let raw = self.body.get(self.content.clone()?)?;
        let inner = raw.get(1..raw.len().saturating_sub(1))?;
        if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
            return Some(Cow::Borrowed(inner));
        }
        // Validated when decoded, so this cannot fail.
        serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
    }

    /// The content's JSON string exactly as received (`None` when null or absent), to be
    /// carried to the moderation message of a message that stays as it is, unread.
    pub fn content_json(&self) -> Option<&RawValue> {
        serde_json::from_str(self.body.get(self.content.clone()?)?).ok()
    }

    /// The body as delivered.
    pub fn body(&self) -> &[u8] {
        self.body.as_bytes()
    }

    /// `occurred_at` as received.
    pub fn occurred_at_text(&self) -> &str {
        self.text(&self.occurred_at_text)
    }

    /// `message.model_id` as received: `None` when absent, `Some(None)` when null.
    pub fn model_id_text(&self) -> Option<Option<&str>> {
        self.model_id_text
            .as_ref()
            .map(|t| t.as_ref().map(|t| self.text(t)))
    }

    /// The top-level members this worker does not read, in the order received.
    pub fn extra(&self) -> impl Iterator<Item = RawMember<'_>> {
        self.members(&self.extra)
    }

    /// The members of `message` this worker does not read, in the order received.
    pub fn message_extra(&self) -> impl Iterator<Item = RawMember<'_>> {
        self.members(&self.message_extra)
    }

    fn members<'a>(&'a self, members: &'a [Member]) -> impl Iterator<Item = RawMember<'a>> {
        members.iter().filter_map(|m| {
            // Validated when decoded; read again only to hand out the type.
            let value = serde_json::from_str(self.body.get(m.value.clone())?).ok()?;
            Some(RawMember { key: &m.key, value })
        })
    }

    fn text<'a>(&'a self, t: &'a Text) -> &'a str {
        match t {
            Text::At(r) => self.body.get(r.clone()).unwrap_or_default(),
            Text::Copied(s) => s,
        }
    }
}

/// A body that did not decode: why, the event id when the body shows one (for the log
/// line and the dead letter), and the body, given back for the dead letter.
#[derive(Debug)]
pub struct Undecoded {
    /// Why it cannot be processed.
    pub poison: Poison,
    /// The event id, when readable.
    pub event_id: Option<EventId>,
    /// The body as delivered.
    pub body: Vec<u8>,
}

/// Decodes a delivery body, taking it over (no copy). Never panics.
pub fn decode(body: Vec<u8>, max_bytes: usize) -> Result<FinalizedEvent, Undecoded> {
    let refuse = |poison, event_id, body| {
        Err(Undecoded {
            poison,
            event_id,
            body,
        })
    };
    if body.len() > max_bytes {
        let size = body.len();
        let poison = Poison::Oversized {
            size,
            limit: max_bytes,
        };
        return refuse(poison, None, body);
    }
    let body = match String::from_utf8(body) {
        Ok(body) => body,
        Err(e) => return refuse(Poison::InvalidUtf8(e.utf8_error()), None, e.into_bytes()),
    };
    match read(&body) {
        Ok(mut event) => {
            // The places `read` took point into this body.
            event.body = body;
            Ok(event)
        }
        Err(poison) => {
            // A body of another type is that, however broken: it is no finalized message,
            // and its dead letter says so (`unknown_type`), not how it is broken.
            let (event_id, other_type) = scan::shown(body.as_bytes());
            let poison = other_type.map_or(poison, Poison::UnknownType);
            refuse(poison, event_id, body.into_bytes())
        }
    }
}

/// Reads the event out of `body`, in one pass: everything but the body itself, which
/// the caller puts in (the places point into it).
fn read(body: &str) -> Result<FinalizedEvent, Poison> {
    let wire: WireEvent = serde_json::from_str(body).map_err(|e| match e.classify() {
        // A value of the wrong shape read before the body breaks off (an `event_id` that
        // is no UUID, then the body cut short) is still a body that is not JSON.
        Category::Data => match serde_json::from_str::<IgnoredAny>(body) {
            Err(syntax) if !syntax.is_data() => Poison::MalformedJson(syntax.to_string()),
            _ => Poison::InvalidEvent(named_error(body)),
        },
        Category::Syntax | Category::Eof | Category::Io => Poison::MalformedJson(e.to_string()),
    })?;
    if wire.kind != FINALIZED {
        return Err(Poison::UnknownType(wire.kind.into_owned()));
    }
    let occurred_at = DateTime::parse_from_rfc3339(&wire.occurred_at)
        .map_err(|e| Poison::InvalidEvent(format!("occurred_at is not RFC 3339: {e}")))?;
    let m = wire.message;
    Ok(FinalizedEvent {
        body: String::new(),
        event_id: EventId::new(wire.event_id),
        occurred_at,
        message: EventMessage {
            id: MessageId::new(m.id),
            chat_id: ChatId::new(m.chat_id),
            agent_id: m.agent_id.map(AgentId::new),
            role: Role::parse(&m.role),
            tools_used: m.tools_used,
            model_id: m
                .model_id
                .as_ref()
                .and_then(|id| id.as_deref().and_then(ModelId::parse)),
        },
        content: m.content.map(|c| place(body, c.get())),
        occurred_at_text: text(body, wire.occurred_at),
        model_id_text: m.model_id.map(|id| id.map(|t| text(body, t))),
        extra: members(body, wire.extra),
        message_extra: members(body, m.extra),
    })
}

/// Where a string read from `body` is in it, or its copy when it had to be unescaped.
fn text(body: &str, s: Cow<'_, str>) -> Text {
    match s {
        Cow::Borrowed(b) => Text::At(place(body, b)),
        Cow::Owned(o) => Text::Copied(o.into_boxed_str()),
    }
}

fn members(body: &str, extra: Extra<'_>) -> Vec<Member> {
    extra
        .into_iter()
        .map(|(key, value)| Member {
            key: key.into_owned().into_boxed_str(),
            value: place(body, value.get()),
        })
        .collect()
}

/// Where `part`, a slice of `body`, is in it.
fn place(body: &str, part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(body.as_ptr() as usize);
    start..start + part.len()
}

/// The error of a body that is JSON but not the event's shape, naming the field by its
/// path: `message.id: invalid type: string "7", expected i64`, `message: missing field
/// `chat_id``. Read again only when it failed, so a good event pays nothing for it.
fn named_error(body: &str) -> String {
    let mut de = serde_json::Deserializer::from_str(body);
    match serde_path_to_error::deserialize::<_, WireEvent<'_>>(&mut de) {
        Ok(_) => "invalid event".to_string(),
        Err(e) => match e.path().to_string() {
            path if path == "." => e.inner().to_string(),
            path => format!("{path}: {}", e.inner()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"event_id":"7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1","type":"message.finalized","occurred_at":"2026-01-01T00:00:00Z","extra":1,"message":{"id":1,"chat_id":2,"agent_id":null,"role":"assistant","content":null,"tools_used":[],"model_id":null}}"#;

    #[test]
    fn decodes_a_good_event_and_ignores_unknown_fields() {
        let e = decode(GOOD.as_bytes().to_vec(), 1 << 20).unwrap();
        assert_eq!(e.message.id.get(), 1);
        assert_eq!(e.message.agent_id, None);
        assert_eq!(e.message.role, Role::Assistant);
        assert_eq!(e.message.model_id, None);
    }

    #[test]
    fn decodes_the_model_id_and_treats_a_wrong_type_as_poison() {
        let with =
            |model: &str| GOOD.replace("\"model_id\":null", &format!("\"model_id\":{model}"));
        let e = decode(with("\" models/gemini-2.5-flash \"").into_bytes(), 1 << 20).unwrap();
        assert_eq!(
            e.message.model_id.as_ref().map(ModelId::as_str),
            Some("models/gemini-2.5-flash")
        );
        let blank = decode(with("\"  \"").into_bytes(), 1 << 20).unwrap();
        assert_eq!(blank.message.model_id, None);
        let absent = decode(GOOD.replace(",\"model_id\":null", "").into_bytes(), 1 << 20).unwrap();
        assert_eq!(absent.message.model_id, None);
        for wrong in ["7", "[\"gpt-4o\"]", "{\"name\":\"gpt-4o\"}", "true"] {
            let err = decode(with(wrong).into_bytes(), 1 << 20).unwrap_err();
            assert_eq!(err.poison.reason(), "invalid_event", "{wrong}");
            assert!(
                err.event_id.is_some(),
                "the event id is known for the log line"
            );
        }
    }

    #[test]
    fn classifies_poison() {
        let reason = |b: &[u8]| decode(b.to_vec(), 1000).unwrap_err().poison.reason();
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
    fn a_body_cut_short_is_malformed_json_wherever_it_is_cut() {
        let reason = |b: &str| decode(b.as_bytes().to_vec(), 1 << 20).unwrap_err().poison;
        let cut = r#"{"type":"message.finalized","message_id":"#;
        assert_eq!(reason(cut).reason(), "malformed_json", "{}", reason(cut));
        // Cut after a value of the wrong shape: serde meets the shape first, but the body
        // is not JSON.
        let bad_id = r#"{"event_id":"poison-3","type":"message.finalized","message_id":"#;
        assert_eq!(
            reason(bad_id).reason(),
            "malformed_json",
            "{}",
            reason(bad_id)
        );
        let wrong = GOOD
            .replace("7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1", "poison-3")
            .replace("\"id\":1", "\"id\":\"1\"");
        assert_eq!(
            reason(&wrong).reason(),
            "invalid_event",
            "whole, it is JSON"
        );
        for body in [GOOD, wrong.as_str()] {
            for end in 0..body.len() {
                let poison = reason(&body[..end]);
                assert_eq!(
                    poison.reason(),
                    "malformed_json",
                    "cut at {end}: {:?}: {poison}",
                    &body[..end]
                );
            }
        }
    }

    #[test]
    fn a_body_of_another_type_is_unknown_type_however_broken() {
        let reason = |b: String| decode(b.into_bytes(), 1 << 20).unwrap_err().poison;
        let deleted = GOOD.replace("message.finalized", "message.deleted");
        let missing = reason(deleted.replace("\"chat_id\":2,", ""));
        assert_eq!(missing.reason(), "unknown_type", "{missing}");
        assert!(missing.to_string().contains("message.deleted"), "{missing}");
        let cut = reason(deleted[..deleted.len() - 10].to_string());
        assert_eq!(cut.reason(), "unknown_type", "{cut}");
        let finalized = reason(GOOD.replace("\"chat_id\":2,", ""));
        assert_eq!(finalized.reason(), "invalid_event", "{finalized}");
        let untyped = reason(GOOD.replace("\"type\":\"message.finalized\",", ""));
        assert_eq!(untyped.reason(), "invalid_event", "{untyped}");
    }

    #[test]
    fn a_field_of_the_wrong_shape_is_named() {
        let error = |b: String| {
            decode(b.into_bytes(), 1 << 20)
                .unwrap_err()
                .poison
                .to_string()
        };
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
    fn the_content_is_a_place_in_the_body_unless_it_had_to_be_unescaped() {
        let with = |content: &str| {
            let body = GOOD.replace("\"content\":null", &format!("\"content\":{content}"));
            decode(body.into_bytes(), 1 << 20).unwrap()
        };
        let plain = with("\"plain text\"");
        assert!(
            matches!(plain.content(), Some(Cow::Borrowed("plain text"))),
            "not copied"
        );
        let escaped = with("\"two\\nlines \\u00e9\"");
        assert!(matches!(escaped.content(), Some(Cow::Owned(_))));
        assert_eq!(escaped.content().as_deref(), Some("two\nlines é"));
        assert_eq!(
            escaped.content_json().map(RawValue::get),
            Some("\"two\\nlines \\u00e9\""),
            "as received"
        );
        assert_eq!(with("\"\"").content().as_deref(), Some(""));
        assert_eq!(with("null").content(), None);
        assert!(with("null").content_json().is_none());
        let absent = GOOD.replace("\"content\":null,", "");
        assert_eq!(
            decode(absent.into_bytes(), 1 << 20).unwrap().content(),
            None
        );
        let wrong = GOOD.replace("\"content\":null", "\"content\":7");
        let err = decode(wrong.into_bytes(), 1 << 20).unwrap_err();
        assert!(
            err.poison
                .to_string()
                .contains("message.content: invalid type"),
            "{}",
            err.poison
        );
    }

    #[test]
    fn members_it_does_not_read_are_kept_verbatim_and_a_repeated_one_it_reads_is_refused() {
        let body = GOOD.replace(
            "\"model_id\":null",
            "\"model_id\":null,\"x\":{\"a\": [1, 2.50]}",
        );
        let e = decode(body.into_bytes(), 1 << 20).unwrap();
        let top: Vec<(&str, &str)> = e.extra().map(|m| (m.key, m.value.get())).collect();
        assert_eq!(top, [("extra", "1")]);
        let inner: Vec<(&str, &str)> = e.message_extra().map(|m| (m.key, m.value.get())).collect();
        assert_eq!(
            inner,
            [("x", "{\"a\": [1, 2.50]}")],
            "as received, spacing included"
        );
        assert_eq!(e.occurred_at_text(), "2026-01-01T00:00:00Z");
        assert_eq!(e.model_id_text(), Some(None));
        let twice = GOOD.replace("\"content\":null", "\"content\":\"a\",\"content\":\"b\"");
        let len = twice.len();
        let err = decode(twice.into_bytes(), 1 << 20).unwrap_err();
        assert_eq!(err.poison.reason(), "invalid_event");
        assert!(
            err.poison.to_string().contains("duplicate field `content`"),
            "{}",
            err.poison
        );
        assert_eq!(
            err.body.len(),
            len,
            "the body comes back for the dead letter"
        );
    }

    #[test]
    fn moderation_id_is_deterministic() {
        let e = decode(GOOD.as_bytes().to_vec(), 1 << 20).unwrap();
        assert_eq!(
            e.event_id.moderation_event_id(),
            e.event_id.moderation_event_id()
        );
        assert_ne!(e.event_id.moderation_event_id(), e.event_id.get());
    }
}
