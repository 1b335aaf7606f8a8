//! The lenient scan of a body that does not decode: which message it names
//! (`message.id`), its type (`type`) and, when it shows one, its event id (`event_id`),
//! read from whatever is readable around them. The worker still sends the message of such
//! a body to moderation, as stored, when the body shows it is a `message.finalized` event,
//! so that a body too large to examine, or broken somewhere else, does not make the app's
//! message skip moderation; a body of another type is no finalized message and is never
//! moderated.
//!
//! One forward pass over the bytes, allocation-free but for the nesting it tracks (at most
//! [`MAX_DEPTH`] levels): strings are skipped with `memchr`, a byte that cannot stand where
//! it is is passed over, a container that is not closed is left open. Only the three paths
//! it looks for are read: `event_id` and `type` at the top level and `id` in the top-level
//! `message` object; the first of each wins, and the scan stops once it has all three. Works on bytes, so
//! a body that is not UTF-8 is scanned too.
//!
//! May depend on: `ids`, `uuid`, `memchr`. No I/O.

use crate::ids::{EventId, MessageId};
use uuid::Uuid;

/// The longest event type kept for the dead-letter reason, in bytes.
const MAX_TYPE_BYTES: usize = 100;

/// What a body's `type` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `message.finalized`: the type this worker consumes.
    Finalized,
    /// Another type (`message.deleted`, ...).
    Other,
    /// No readable `type` (absent, not a string, or past where the body breaks).
    Unknown,
}

/// Nesting the scan follows; deeper than this it gives up (the two paths it reads are at
/// depth one and two).
pub const MAX_DEPTH: usize = 128;

/// What a body that does not decode still names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    /// `message.id`: a JSON integer, or a string holding only one.
    pub message_id: MessageId,
    /// `event_id`, when it is a readable UUID.
    pub event_id: Option<EventId>,
    /// What its `type` says: only a `message.finalized` body's message is moderated.
    pub kind: Kind,
}

/// The message a body names, or `None` when it names none (no readable `message.id`).
pub fn named(body: &[u8]) -> Option<Named> {
    let found = Scan::default().run(body);
    let kind = found.kind();
    found.message_id.map(|message_id| Named {
        message_id,
        event_id: found.event_id,
        kind,
    })
}

/// What a body that did not decode shows at its top level: its event id (`event_id`, a
/// readable UUID), and its type when it is one this worker does not consume (as
/// received, escapes and all, cut at [`MAX_TYPE_BYTES`]).
pub fn shown(body: &[u8]) -> (Option<EventId>, Option<String>) {
    let found = Scan::default().run(body);
    let other = (found.kind() == Kind::Other)
        .then(|| found.kind.map(other_type))
        .flatten();
    (found.event_id, other)
}

/// The text of a type this worker does not consume, for the dead-letter reason.
fn other_type(raw: &[u8]) -> String {
    let mut end = raw.len().min(MAX_TYPE_BYTES);
    while end > 0 && std::str::from_utf8(&raw[..end]).is_err() {
        end -= 1;
    }
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// The key of the member being read, where it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// Not a path the scan reads.
    Other,
    /// `event_id` of the top-level object.
    EventId,
    /// `type` of the top-level object.
    Type,
    /// `message` of the top-level object.
    Message,
    /// `id` of the `message` object.
    Id,
}

/// One open container.
#[derive(Debug, Clone, Copy)]
struct Frame {
    object: bool,
    /// This container is the top-level `message` object.
    message: bool,
    /// In an object: the key read, whose value is awaited.
    key: Option<Key>,
}

#[derive(Default)]
struct Scan<'a> {
    stack: Vec<Frame>,
    event_id: Option<EventId>,
    message_id: Option<MessageId>,
    /// The raw contents of the first top-level `type` string.
    kind: Option<&'a [u8]>,
    /// A top-level `type` was seen (its value may not be a string).
    type_seen: bool,
}

impl<'a> Scan<'a> {
    /// What the `type` read says.
    fn kind(&self) -> Kind {
        match self.kind {
            Some(raw) if raw == super::FINALIZED.as_bytes() => Kind::Finalized,
            Some(_) => Kind::Other,
            None => Kind::Unknown,
        }
    }

    fn run(mut self, body: &'a [u8]) -> Self {
        let mut i = 0;
        while i < body.len()
            && !(self.event_id.is_some() && self.message_id.is_some() && self.type_seen)
        {
            match body[i] {
                b'"' => {
                    let Some(end) = string_end(body, i + 1) else {
                        break;
                    };
                    self.string(&body[i + 1..end], true);
                    i = end + 1;
                }
                b'{' | b'[' => {
                    if self.stack.len() >= MAX_DEPTH {
                        break;
                    }
                    let message = self.stack.len() == 1 && self.awaited() == Some(Key::Message);
                    if self.stack.len() == 1 && self.awaited() == Some(Key::Type) {
                        // A `type` that is no string: seen, and not readable.
                        self.type_seen = true;
                    }
                    self.value_taken();
                    self.stack.push(Frame {
                        object: body[i] == b'{',
                        message: message && body[i] == b'{',
                        key: None,
                    });
                    i += 1;
                }
                b'}' | b']' => {
                    self.stack.pop();
                    i += 1;
                }
                b',' => {
                    if let Some(top) = self.stack.last_mut() {
                        top.key = None;
                    }
                    i += 1;
                }
                b':' | b' ' | b'\t' | b'\n' | b'\r' => i += 1,
                _ => {
                    let end = body[i..]
                        .iter()
                        .position(|b| b",:{}[]\" \t\n\r".contains(b))
                        .map_or(body.len(), |n| i + n);
                    self.scalar(&body[i..end], false);
                    i = end;
                }
            }
        }
        self
    }

    /// The key whose value the innermost object awaits.
    fn awaited(&self) -> Option<Key> {
        self.stack.last().filter(|f| f.object).and_then(|f| f.key)
    }

    /// The awaited value has started (or was read): the object awaits a key again.
    fn value_taken(&mut self) {
        if let Some(top) = self.stack.last_mut() {
            top.key = None;
        }
    }

    /// A string: a key when the innermost object awaits one, a value otherwise.
    fn string(&mut self, raw: &'a [u8], quoted: bool) {
        let depth = self.stack.len();
        let Some(top) = self.stack.last_mut() else {
            return;
        };
        if top.object && top.key.is_none() {
            top.key = Some(match (depth, raw) {
                (1, b"event_id") => Key::EventId,
                (1, b"type") => Key::Type,
                (1, b"message") => Key::Message,
                (2, b"id") if top.message => Key::Id,
                _ => Key::Other,
            });
            return;
        }
        self.scalar(raw, quoted);
    }

    /// A value that is not a container (a string's contents, `quoted`, or a number or a
    /// bare word).
    fn scalar(&mut self, raw: &'a [u8], quoted: bool) {
        match self.awaited() {
            Some(Key::Type) if !self.type_seen => {
                self.type_seen = true;
                self.kind = quoted.then_some(raw);
            }
            Some(Key::EventId) if self.event_id.is_none() => {
                self.event_id = std::str::from_utf8(raw)
                    .ok()
                    .and_then(|s| Uuid::parse_str(s).ok())
                    .map(EventId::new);
            }
            Some(Key::Id) if self.message_id.is_none() => {
                self.message_id = integer(raw).map(MessageId::new);
            }
            _ => {}
        }
        self.value_taken();
    }
}

/// The index of the quote that closes the string whose contents start at `from`.
fn string_end(body: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr2(b'"', b'\\', &body[from..])?;
        if body[at] == b'"' {
            return Some(at);
        }
        from = at + 2;
        if from > body.len() {
            return None;
        }
    }
}

/// A decimal integer (an optional `-`, then only digits) that fits an `i64`.
fn integer(raw: &[u8]) -> Option<i64> {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1";

    fn ids(body: &str) -> Option<(i64, Option<String>)> {
        named(body.as_bytes())
            .map(|n| (n.message_id.get(), n.event_id.map(|e| e.get().to_string())))
    }

    #[test]
    fn reads_the_ids_of_a_well_formed_event_wherever_they_are() {
        let body = format!(
            r#"{{"type":"message.finalized","message":{{"content":"a \"quoted\" }} brace","meta":{{"id":9}},"id":42}},"event_id":"{ID}"}}"#
        );
        assert_eq!(ids(&body), Some((42, Some(ID.to_string()))));
    }

    #[test]
    fn reads_around_what_does_not_parse() {
        // Truncated in the content, after the id.
        let cut = format!(r#"{{"event_id":"{ID}","message":{{"id":7,"content":"half a rep"#);
        assert_eq!(ids(&cut), Some((7, Some(ID.to_string()))));
        // A stray token and a missing comma before the id.
        let broken = r#"{"message":{"chat_id": oops "content":"x" "id": 8}}"#;
        assert_eq!(ids(broken), Some((8, None)));
        // Not UTF-8 around it.
        let mut bytes = br#"{"message":{"content":""#.to_vec();
        bytes.extend_from_slice(b"\xff\xfe");
        bytes.extend_from_slice(br#"","id":"12"}}"#);
        assert_eq!(named(&bytes).map(|n| n.message_id.get()), Some(12));
    }

    #[test]
    fn names_nothing_without_a_readable_message_id() {
        for body in [
            r#"{"message":{"id":"not a number"}}"#,
            r#"{"message":{"id":1.5}}"#,
            r#"{"message":{"id":99999999999999999999}}"#,
            r#"{"id":5,"message":{"chat_id":1}}"#,
            r#"{"other":{"message":{"id":5}}}"#,
            r#"[{"message":{"id":5}}]"#,
            r#"{"message":[{"id":5}]}"#,
            r#"{"message":{"content":"never closed, "id": 5"#,
            "",
        ] {
            assert_eq!(ids(body), None, "{body}");
        }
        let deep = format!(r#"{}{{"message":{{"id":5}}}}"#, "[".repeat(MAX_DEPTH + 1));
        assert_eq!(ids(&deep), None);
    }

    #[test]
    fn reads_the_type_at_the_top_level_only() {
        let kind = |body: &str| named(body.as_bytes()).map(|n| n.kind);
        assert_eq!(
            kind(r#"{"type":"message.finalized","message":{"id":1,"content":"cut"#),
            Some(Kind::Finalized)
        );
        assert_eq!(
            kind(r#"{"message":{"id":1,"type":"message.finalized"},"type":"message.deleted"}"#),
            Some(Kind::Other),
            "the message's own `type` is not the event's"
        );
        assert_eq!(kind(r#"{"message":{"id":1}}"#), Some(Kind::Unknown));
        assert_eq!(
            kind(r#"{"type":{"name":"message.finalized"},"message":{"id":1}}"#),
            Some(Kind::Unknown),
            "not a string"
        );
        assert_eq!(
            kind(r#"{"type":"message.finalized","type":"x","message":{"id":1}}"#),
            Some(Kind::Finalized),
            "the first wins"
        );
        let (id, other) =
            shown(format!(r#"{{"event_id":"{ID}","type":"message.deleted","#).as_bytes());
        assert_eq!(id.map(|e| e.get().to_string()), Some(ID.to_string()));
        assert_eq!(other.as_deref(), Some("message.deleted"));
        assert_eq!(shown(br#"{"type":"message.finalized""#).1, None);
        let long = format!(r#"{{"type":"{}"}}"#, "é".repeat(80));
        assert_eq!(
            shown(long.as_bytes()).1.map(|t| t.len()),
            Some(MAX_TYPE_BYTES)
        );
    }

    #[test]
    fn an_unreadable_event_id_is_left_out() {
        assert_eq!(
            ids(r#"{"event_id":"nope","message":{"id":3}}"#),
            Some((3, None))
        );
        assert_eq!(
            ids(r#"{"event_id":17,"message":{"id":3}}"#),
            Some((3, None))
        );
    }
}
