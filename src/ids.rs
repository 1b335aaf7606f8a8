//! The ids the crate passes around: database ids of messages, chats and agents, event ids
//! (UUIDs) and the model id an event names, each its own type so that one cannot stand in
//! for another. Also the UUID
//! namespace of the ids the worker derives, so that a redelivery derives the same id again.
//!
//! May depend on: `uuid`, `serde`. Nothing of the crate: every module may name a message.

use std::fmt;
use uuid::Uuid;

/// Namespace of the UUID v5 ids the worker derives (moderation event ids, tool-call
/// event ids), so that a redelivery publishes the same id again.
pub const ID_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2d1e_8a4b_4c3e_9f2a_7b5d_0e6c_1a90);

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(i64);

        impl $name {
            /// Wraps a database id.
            pub fn new(id: i64) -> Self {
                $name(id)
            }
            /// The id as stored in the database.
            pub fn get(self) -> i64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// `messages.id`.
    MessageId
);
id_type!(
    /// `chats.id`.
    ChatId
);
id_type!(
    /// `agents.id`.
    AgentId
);

/// The id of an event (a UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId(Uuid);

impl EventId {
    /// Wraps a UUID.
    pub fn new(id: Uuid) -> Self {
        EventId(id)
    }
    /// The UUID.
    pub fn get(self) -> Uuid {
        self.0
    }
    /// The deterministic id of the moderation message published for this source event:
    /// the UUID v5 of `moderation:` and the id's hyphenated lower-case text.
    pub fn moderation_event_id(self) -> Uuid {
        // Spelled into a buffer on the stack: it is worked out for every event.
        const PREFIX: &[u8] = b"moderation:";
        let mut name = [0u8; PREFIX.len() + uuid::fmt::Hyphenated::LENGTH];
        let (prefix, id) = name.split_at_mut(PREFIX.len());
        prefix.copy_from_slice(PREFIX);
        self.0.hyphenated().encode_lower(id);
        Uuid::new_v5(&ID_NAMESPACE, &name)
    }
}

/// The stand-in source event of every body the worker could not examine that names
/// `message` (docs/contract.md, "Which moderation message is current"): the UUID v5 of
/// `unexamined:` and the message id. Its moderation id
/// ([`EventId::moderation_event_id`]) is the one every such body's moderation message
/// carries, however many there are and whatever event id each shows, so a consumer drops
/// the repeats by event id.
pub fn unexamined_event_id(message: MessageId) -> EventId {
    EventId::new(Uuid::new_v5(
        &ID_NAMESPACE,
        format!("unexamined:{}", message.get()).as_bytes(),
    ))
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The model an event says wrote the message (`message.model_id`), as recorded in the
/// ledger: trimmed, without NUL (PostgreSQL text cannot hold it), at most
/// [`ModelId::MAX_BYTES`] bytes (cut on a character boundary), never blank. Kept as the
/// event spelled it, provider prefix and snapshot included: it is the audit record. The
/// bounded label the metrics use is `model::Models::label` of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelId(String);

impl ModelId {
    /// The longest id kept, in bytes; no real model id comes close (a Bedrock
    /// inference-profile ARN is about 100).
    pub const MAX_BYTES: usize = 200;

    /// The id as recorded, or `None` for a blank one.
    pub fn parse(raw: &str) -> Option<ModelId> {
        let mut id = if raw.contains('\0') {
            raw.replace('\0', "")
        } else {
            raw.to_string()
        };
        let trimmed = id.trim();
        if trimmed.is_empty() {
            return None;
        }
        if trimmed.len() != id.len() {
            id = trimmed.to_string();
        }
        if id.len() > Self::MAX_BYTES {
            let mut end = Self::MAX_BYTES;
            while !id.is_char_boundary(end) {
                end -= 1;
            }
            id.truncate(end);
            id.truncate(id.trim_end().len());
        }
        Some(ModelId(id))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_moderation_id_is_the_uuid_v5_of_the_source_id_spelled_out() {
        // Python: uuid.uuid5(ID_NAMESPACE, "moderation:7d8f7a4e-6a5b-4bb0-9a43-1d5bc1f4b1a1")
        let source = EventId::new(Uuid::from_u128(0x7d8f7a4e_6a5b_4bb0_9a43_1d5bc1f4b1a1));
        assert_eq!(
            source.moderation_event_id().to_string(),
            "cc06843f-19e2-52d6-a19c-cfd9ac822ef4"
        );
    }

    #[test]
    fn the_stand_in_of_an_unexamined_body_is_derived_from_its_message_id_alone() {
        // Python: s = uuid.uuid5(ID_NAMESPACE, "unexamined:42"); uuid.uuid5(ID_NAMESPACE,
        // "moderation:" + str(s))
        let stand_in = unexamined_event_id(MessageId::new(42));
        assert_eq!(stand_in.to_string(), "c75a6bd1-c0e5-5cfa-ab7f-bdffa0efe163");
        assert_eq!(
            stand_in.moderation_event_id().to_string(),
            "b3c95fb4-1798-5f4a-9415-1db76a6279af"
        );
        assert_ne!(stand_in, unexamined_event_id(MessageId::new(43)));
    }

    #[test]
    fn model_ids_are_trimmed_cut_and_never_blank() {
        assert_eq!(
            ModelId::parse(" gemini-2.5-flash\n").unwrap().as_str(),
            "gemini-2.5-flash"
        );
        assert_eq!(ModelId::parse("gpt\0-4o").unwrap().as_str(), "gpt-4o");
        assert_eq!(ModelId::parse(" \0 "), None);
        assert_eq!(ModelId::parse(""), None);
        let long = ModelId::parse(&format!("m{}", "é".repeat(300))).unwrap();
        assert!(long.as_str().len() <= ModelId::MAX_BYTES);
        assert!(long.as_str().starts_with("mé"));
    }
}
