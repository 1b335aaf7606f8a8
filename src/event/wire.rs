//! The wire form of a `message.finalized` event, read in one pass over the body and
//! borrowing from it: a string without escapes (the content of most replies under a few
//! lines, every id and timestamp) is a slice of the body, not a copy; a member this worker
//! does not read is kept as its raw JSON text, to be carried to the moderation message
//! verbatim. Known members are typed as they are read, so a wrong type fails at once.
//!
//! May depend on: `serde`, `serde_json`, `uuid`. No I/O.

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use uuid::Uuid;

/// The members of an object this worker does not read, in the order received.
pub(super) type Extra<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// The event as received.
pub(super) struct WireEvent<'a> {
    pub event_id: Uuid,
    pub kind: Cow<'a, str>,
    pub occurred_at: Cow<'a, str>,
    pub message: WireMessage<'a>,
    pub extra: Extra<'a>,
}

/// The event's `message` as received.
pub(super) struct WireMessage<'a> {
    pub id: i64,
    pub chat_id: i64,
    pub agent_id: Option<i64>,
    pub role: Cow<'a, str>,
    /// The JSON string as received, escapes and all (read when needed); `None` for null.
    pub content: Option<&'a RawValue>,
    pub tools_used: Vec<String>,
    /// `None`: absent; `Some(None)`: null.
    pub model_id: Option<Option<Cow<'a, str>>>,
    pub extra: Extra<'a>,
}

/// A string, borrowed from the body when it holds no escape.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// An optional [`Text`] (`null` is `None`).
struct OptText<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for OptText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(OptText(Option::<Text<'de>>::deserialize(d)?.map(|t| t.0)))
    }
}

/// A JSON string or null, kept raw: a large content is not unescaped (copied) until it is
/// read, and then only for as long as it is read.
struct RawString<'a>(Option<&'a RawValue>);

impl<'de> Deserialize<'de> for RawString<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        match raw.get().as_bytes().first() {
            Some(b'"') => Ok(RawString(Some(raw))),
            Some(b'n') => Ok(RawString(None)),
            _ => Err(de::Error::invalid_type(
                de::Unexpected::Other(raw.get().get(..20).unwrap_or(raw.get())),
                &"a string or null",
            )),
        }
    }
}

/// Stores the first value of a member; a second one is an error (which one was meant?).
fn once<T, E: de::Error>(slot: &mut Option<T>, name: &'static str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value);
    Ok(())
}

fn required<T, E: de::Error>(slot: Option<T>, name: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(name))
}

impl<'de> Deserialize<'de> for WireEvent<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WireEvent<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message.finalized event (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut event_id, mut kind, mut occurred_at, mut message) =
                    (None, None, None, None);
                let mut extra = Vec::new();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    match &*key {
                        "event_id" => once(&mut event_id, "event_id", map.next_value()?)?,
                        "type" => once(&mut kind, "type", map.next_value::<Text>()?.0)?,
                        "occurred_at" => {
                            once(&mut occurred_at, "occurred_at", map.next_value::<Text>()?.0)?
                        }
                        "message" => once(&mut message, "message", map.next_value()?)?,
                        _ => extra.push((key, map.next_value()?)),
                    }
                }
                Ok(WireEvent {
                    event_id: required(event_id, "event_id")?,
                    kind: required(kind, "type")?,
                    occurred_at: required(occurred_at, "occurred_at")?,
                    message: required(message, "message")?,
                    extra,
                })
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for WireMessage<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WireMessage<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the finalized message (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut id, mut chat_id, mut agent_id, mut role) = (None, None, None, None);
                let (mut content, mut tools_used, mut model_id) = (None, None, None);
                let mut extra = Vec::new();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    match &*key {
                        "id" => once(&mut id, "id", map.next_value()?)?,
                        "chat_id" => once(&mut chat_id, "chat_id", map.next_value()?)?,
                        "agent_id" => once(&mut agent_id, "agent_id", map.next_value()?)?,
                        "role" => once(&mut role, "role", map.next_value::<Text>()?.0)?,
                        "content" => {
                            once(&mut content, "content", map.next_value::<RawString>()?.0)?
                        }
                        "tools_used" => once(&mut tools_used, "tools_used", map.next_value()?)?,
                        "model_id" => {
                            once(&mut model_id, "model_id", map.next_value::<OptText>()?.0)?
                        }
                        _ => extra.push((key, map.next_value()?)),
                    }
                }
                Ok(WireMessage {
                    id: required(id, "id")?,
                    chat_id: required(chat_id, "chat_id")?,
                    agent_id: agent_id.flatten(),
                    role: required(role, "role")?,
                    content: content.flatten(),
                    tools_used: tools_used.unwrap_or_default(),
                    model_id,
                    extra,
                })
            }
        }
        d.deserialize_map(V)
    }
}
