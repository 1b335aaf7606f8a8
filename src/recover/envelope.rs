//! What a pass owes the broker: the caller's [`Envelope`] turns a pass's [`Report`] into
//! the outbox rows the pass writes in its own transaction (the worker's from the delivered
//! event, the others' from a stand-in event, `outbound`'s bodies both).
//!
//! May depend on: the parent `recover` (the report), `outbox` (the row type), `error`.

use super::Report;
use crate::error::Error;
use crate::outbox::Outgoing;

/// What a pass owes the broker, given what it did. The worker's envelope builds the
/// moderation message from the delivered event; the others from a stand-in event.
pub trait Envelope: Sync {
    /// The messages owed for a recovery pass, in the order they must be sent.
    fn outgoing(&self, report: &Report) -> Result<Vec<Outgoing>, Error>;

    /// About how many bytes the message weighs (its event's body, when the caller holds
    /// one; 0 when it does not know): a group commit holds every message of a batch at
    /// once, several copies each, so batches are cut by weight as well as by count.
    fn weight(&self) -> usize {
        0
    }
}
