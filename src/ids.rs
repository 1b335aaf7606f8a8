//! The ids the crate passes around: database ids of messages, chats and agents, and event
//! ids (UUIDs), each its own type so that one cannot stand in for another. Also the UUID
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
    /// The deterministic id of the moderation message published for this source event.
    pub fn moderation_event_id(self) -> Uuid {
        Uuid::new_v5(&ID_NAMESPACE, format!("moderation:{}", self.0).as_bytes())
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
