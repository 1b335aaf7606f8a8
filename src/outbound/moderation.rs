//! The body of a moderation message, written in one pass from the decoded event: the
//! members this worker does not read copied as received, the message as recovered (or,
//! when it stays as it is, its content copied as received, never unescaped), the
//! deterministic `event_id`, `source_event_id` and `recovery`. Nothing of the event is
//! copied on the way but into the body itself, and the body is written into a buffer sized
//! for it from the start. A `recovery` object the same for every message (a clean one's)
//! may come already written ([`RawValue`]).
//!
//! May depend on: the parent `outbound`, `event`, `outbox`, `error`, `serde`.

use crate::error::Error;
use crate::event::{self, FinalizedEvent};
use crate::outbox::{Outgoing, Target};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

/// The body of a moderation message: the in-event with `content` and `tools_used` as
/// cleaned, a deterministic `event_id`, the `source_event_id` and the `recovery` object.
pub fn moderation_body(
    event: &FinalizedEvent,
    content: &str,
    tools_used: &[String],
    recovery: &Value,
) -> Result<String, Error> {
    written(&ModerationBody {
        event,
        moderation_id: event.event_id.moderation_event_id(),
        content: Content::Text(content),
        tools_used,
        recovery,
    })
}

/// The moderation message of a message that stays as the event carried it (a clean
/// one): its content and `tools_used` copied as received, with this `recovery` object.
/// The caller has read the content and says whether it is blank (then nothing is owed).
/// `recovery` is a [`Value`] or, written once for every such message, a [`RawValue`].
pub fn moderation_unchanged<R: Serialize + ?Sized>(
    event: &FinalizedEvent,
    blank: bool,
    recovery: &R,
) -> Result<Option<Outgoing>, Error> {
    if blank {
        return Ok(None);
    }
    let moderation_id = event.event_id.moderation_event_id();
    let body = ModerationBody {
        event,
        moderation_id,
        content: Content::AsReceived,
        tools_used: &event.message.tools_used,
        recovery,
    };
    Ok(Some(Outgoing {
        target: Target::Moderation,
        key: moderation_id.to_string(),
        body: written(&body)?,
    }))
}

/// A moderation message's body as a serde value, written in one pass.
struct ModerationBody<'a, R: ?Sized> {
    event: &'a FinalizedEvent,
    /// The body's `event_id` (derived from the event's: worked out once, it is also the
    /// message id the body is published under).
    moderation_id: Uuid,
    content: Content<'a>,
    tools_used: &'a [String],
    recovery: &'a R,
}

/// The JSON text of `body`, written into a buffer the size of the event's body and some:
/// the moderation body is the event's with a few members more, so it seldom grows.
fn written<R: Serialize + ?Sized>(body: &ModerationBody<'_, R>) -> Result<String, Error> {
    let mut out = Vec::with_capacity(body.event.body().len() + 512);
    serde_json::to_writer(&mut out, body)
        .map_err(|e| Error::Bug(format!("body not serialisable: {e}")))?;
    String::from_utf8(out).map_err(|e| Error::Bug(format!("body not UTF-8: {e}")))
}

/// [`RawValue`] of a value, for a `recovery` object written once and used for many bodies.
pub fn written_once(value: &Value) -> Result<Box<RawValue>, Error> {
    serde_json::value::to_raw_value(value)
        .map_err(|e| Error::Bug(format!("recovery not serialisable: {e}")))
}

/// The content a moderation message carries.
#[derive(Clone, Copy)]
enum Content<'a> {
    /// This text (the message as recovered).
    Text(&'a str),
    /// The event's own, copied as received, never unescaped (a message that stays as it
    /// is).
    AsReceived,
}

impl<R: Serialize + ?Sized> Serialize for ModerationBody<'_, R> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let event = self.event;
        let mut map = s.serialize_map(None)?;
        // A UUID serialises as its hyphenated lower-case text, as `to_string` spells it.
        map.serialize_entry("event_id", &self.moderation_id)?;
        map.serialize_entry("type", event::FINALIZED)?;
        map.serialize_entry("occurred_at", event.occurred_at_text())?;
        map.serialize_entry("source_event_id", &event.event_id.get())?;
        for member in event.extra() {
            // Members the outgoing message sets itself are not carried twice.
            if !matches!(member.key, "source_event_id" | "recovery") {
                map.serialize_entry(member.key, member.value)?;
            }
        }
        map.serialize_entry("message", &ModerationMessage(self))?;
        map.serialize_entry("recovery", self.recovery)?;
        map.end()
    }
}

/// The `message` of a [`ModerationBody`].
struct ModerationMessage<'a, R: ?Sized>(&'a ModerationBody<'a, R>);

impl<R: Serialize + ?Sized> Serialize for ModerationMessage<'_, R> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (event, m) = (self.0.event, &self.0.event.message);
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("id", &m.id)?;
        map.serialize_entry("chat_id", &m.chat_id)?;
        map.serialize_entry("agent_id", &m.agent_id)?;
        map.serialize_entry("role", m.role.as_str())?;
        match self.0.content {
            Content::Text(text) => map.serialize_entry("content", text)?,
            Content::AsReceived => map.serialize_entry("content", &event.content_json())?,
        }
        map.serialize_entry("tools_used", self.0.tools_used)?;
        if let Some(model_id) = event.model_id_text() {
            map.serialize_entry("model_id", &model_id)?;
        }
        for member in event.message_extra() {
            map.serialize_entry(member.key, member.value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const EVENT: &str = r#"{"event_id":"7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1","type":"message.finalized","occurred_at":"2026-01-01T00:00:00.123456Z","trace":{"id":"t-1", "hops": [1, 2.50]},"recovery":"stale","message":{"id":1,"chat_id":2,"agent_id":5,"role":"assistant","content":"{success: true}Hi","tools_used":[],"model_id":" gpt-4o ","attachments":[{"n":1}]}}"#;

    fn decoded(body: &str) -> FinalizedEvent {
        event::decode(body.as_bytes().to_vec(), 1 << 20).unwrap()
    }

    #[test]
    fn the_moderation_body_is_the_event_with_the_cleaned_message_and_what_was_done() {
        let event = decoded(EVENT);
        let recovery = json!({"outcome": "stripped_only"});
        let body =
            moderation_body(&event, "Hi \"there\"\n", &["web".to_string()], &recovery).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        let source = "7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1";
        assert_eq!(
            v["event_id"],
            json!(event.event_id.moderation_event_id().to_string())
        );
        assert_eq!(v["source_event_id"], json!(source));
        assert_eq!(v["type"], json!("message.finalized"));
        assert_eq!(v["occurred_at"], json!("2026-01-01T00:00:00.123456Z"));
        assert_eq!(v["recovery"], recovery, "the stale one is not carried");
        assert!(
            body.contains(r#""trace":{"id":"t-1", "hops": [1, 2.50]}"#),
            "unknown members verbatim: {body}"
        );
        let m = &v["message"];
        assert_eq!(m["content"], json!("Hi \"there\"\n"));
        assert_eq!(m["tools_used"], json!(["web"]));
        assert_eq!(
            (&m["id"], &m["chat_id"], &m["agent_id"], &m["role"]),
            (&json!(1), &json!(2), &json!(5), &json!("assistant"))
        );
        assert_eq!(m["model_id"], json!(" gpt-4o "), "as the event spelled it");
        assert_eq!(m["attachments"], json!([{"n": 1}]));
        assert_eq!(
            body.matches("\"recovery\"").count(),
            1,
            "no member twice: {body}"
        );
        let event = decoded(&EVENT.replace(r#","model_id":" gpt-4o ""#, ""));
        let body = moderation_body(&event, "x", &[], &recovery).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(
            v["message"].get("model_id").is_none(),
            "absent stays absent"
        );
    }

    #[test]
    fn an_unchanged_message_carries_its_content_as_received() {
        let event = decoded(EVENT);
        let recovery = json!({"outcome": "clean"});
        let owed = moderation_unchanged(&event, false, &recovery)
            .unwrap()
            .unwrap();
        assert!(
            owed.body.contains(r#""content":"{success: true}Hi""#),
            "{}",
            owed.body
        );
        let v: Value = serde_json::from_str(&owed.body).unwrap();
        assert_eq!(v["message"]["tools_used"], json!([]));
        assert_eq!(v["recovery"], recovery);
        assert_eq!(owed.key, event.event_id.moderation_event_id().to_string());
        assert!(moderation_unchanged(&event, true, &recovery)
            .unwrap()
            .is_none());
        let raw = written_once(&recovery).unwrap();
        let once = moderation_unchanged(&event, false, &*raw).unwrap().unwrap();
        assert_eq!(
            once.body, owed.body,
            "a recovery written once is the same bytes"
        );
        let event = decoded(&EVENT.replace(r#""{success: true}Hi""#, "null"));
        let body = moderation_body(&event, "x", &[], &recovery).unwrap();
        assert!(body.contains(r#""content":"x""#));
    }
}
