//! What a recovery pass reports: its source, the outcome labels, per-call reports, the
//! calls to forward. Plain data, shared by the worker, the backfill and the admin API.
//!
//! May depend on: `ids`, `toolcall_detect` (families), `outbox`.

use super::Mode;
use crate::ids::{AgentId, ChatId, EventId, MessageId, ModelId};
use serde_json::Value;
use toolcall_detect::Family;
use uuid::Uuid;

/// Who asked: for a recovery, with the model that wrote the message where the asker knows
/// it (both recorded in the ledger, `recoveries.source`, `recoveries.model`); for a revert
/// (`recoveries.reverted_by`); and the `origin` of the stand-in event of what either owes
/// the broker (`outbound::StandIn`). The one name of who asked.
#[derive(Debug, Clone)]
pub enum Source {
    /// A `message.finalized` event.
    Event {
        /// The event.
        event_id: EventId,
        /// The event's `message.model_id`.
        model: Option<ModelId>,
    },
    /// The historical backfill.
    Backfill {
        /// The model the message row names (when the app's `messages` table has the
        /// backfill's `--model-column`).
        model: Option<ModelId>,
    },
    /// The admin API (the app's "fix" button, its revert): no model.
    Admin,
    /// `toolcall-recovery revert` (it reverts; it never recovers).
    Cli,
}

impl Source {
    /// The label recorded in the ledger and carried as a stand-in event's `origin`.
    pub fn label(&self) -> &'static str {
        match self {
            Source::Event { .. } => "event",
            Source::Backfill { .. } => "backfill",
            Source::Admin => "admin",
            Source::Cli => "cli",
        }
    }
    pub(super) fn event_id(&self) -> Option<Uuid> {
        match self {
            Source::Event { event_id, .. } => Some(event_id.get()),
            _ => None,
        }
    }
    pub(super) fn model(&self) -> Option<&str> {
        match self {
            Source::Event { model, .. } | Source::Backfill { model } => {
                model.as_ref().map(ModelId::as_str)
            }
            Source::Admin | Source::Cli => None,
        }
    }
}

/// The outcome of a message (event level) or of one leaked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No leak.
    Clean,
    /// The tool did run; only the echoed markup was removed (also: a foreign tool's fake
    /// result object, stripped with nothing to run).
    StrippedOnly,
    /// A leak on a message without an agent: nothing written.
    NoAgent,
    /// save_memory ran: memory created.
    Recovered,
    /// save_memory is not enabled for the agent.
    ToolNotEnabled,
    /// save_memory with arguments that cannot be saved.
    InvalidArgs,
    /// A call the worker cannot run, published for the app.
    Forwarded,
    /// Content that is nothing but a result object: left untouched, recorded for review.
    NeedsReview,
    /// A pass already did the work (in observe mode: already recorded it).
    AlreadyRecovered,
    /// An operator reverted the message's recovery: only an explicit admin recover
    /// touches it again.
    Reverted,
}

impl Outcome {
    /// Every outcome, so metrics can show each label from the start.
    pub const ALL: [Outcome; 10] = [
        Outcome::Clean,
        Outcome::StrippedOnly,
        Outcome::NoAgent,
        Outcome::Recovered,
        Outcome::ToolNotEnabled,
        Outcome::InvalidArgs,
        Outcome::Forwarded,
        Outcome::NeedsReview,
        Outcome::AlreadyRecovered,
        Outcome::Reverted,
    ];

    /// The label used in metrics, the ledger and published messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::StrippedOnly => "stripped_only",
            Outcome::NoAgent => "no_agent",
            Outcome::Recovered => "recovered",
            Outcome::ToolNotEnabled => "tool_not_enabled",
            Outcome::InvalidArgs => "invalid_args",
            Outcome::Forwarded => "forwarded",
            Outcome::NeedsReview => "needs_review",
            Outcome::AlreadyRecovered => "already_recovered",
            Outcome::Reverted => "reverted",
        }
    }

    /// The outcome as a log line says it in `mode`: the label itself in recover mode; in
    /// observe mode, where nothing is changed, what would have happened (`would_recover`,
    /// `would_forward`, `would_strip`, `would_strip_tool_not_enabled`,
    /// `would_strip_invalid_args`, `already_observed`), and the label of an outcome that
    /// changes nothing in either mode (`clean`, `no_agent`, `needs_review`, `reverted`).
    /// The metrics and the ledger keep [`Outcome::as_str`] beside the mode.
    pub fn logged(self, mode: Mode) -> &'static str {
        match (mode, self) {
            (Mode::Recover, _) => self.as_str(),
            (Mode::Observe, Outcome::Recovered) => "would_recover",
            (Mode::Observe, Outcome::Forwarded) => "would_forward",
            (Mode::Observe, Outcome::StrippedOnly) => "would_strip",
            (Mode::Observe, Outcome::ToolNotEnabled) => "would_strip_tool_not_enabled",
            (Mode::Observe, Outcome::InvalidArgs) => "would_strip_invalid_args",
            (Mode::Observe, Outcome::AlreadyRecovered) => "already_observed",
            (
                Mode::Observe,
                Outcome::Clean | Outcome::NoAgent | Outcome::NeedsReview | Outcome::Reverted,
            ) => self.as_str(),
        }
    }

    /// Which call outcome names the message: the one with the most consequence.
    pub(super) fn rank(self) -> u8 {
        match self {
            Outcome::Recovered => 9,
            Outcome::Forwarded => 8,
            Outcome::ToolNotEnabled => 7,
            Outcome::InvalidArgs => 6,
            Outcome::NeedsReview => 5,
            Outcome::StrippedOnly => 4,
            Outcome::NoAgent => 3,
            Outcome::AlreadyRecovered | Outcome::Reverted => 2,
            Outcome::Clean => 1,
        }
    }
}

/// One leaked call or result object and what was done with it.
#[derive(Debug, Clone)]
pub struct CallReport {
    /// Index of the leak in the message.
    pub leak_index: usize,
    /// The leak's family.
    pub family: Family,
    /// The call's name (None for a result object without a call).
    pub name: Option<String>,
    /// The tool as a metrics label: the name when it is save_memory or enabled for the
    /// agent, the known tool of a result object, `other` otherwise (bounded cardinality).
    pub tool_label: String,
    /// The call's arguments.
    pub arguments: Option<Value>,
    /// What happened.
    pub outcome: Outcome,
    /// Why, for the error outcomes.
    pub detail: Option<String>,
    /// The memory created.
    pub memory_id: Option<i64>,
    /// The `role='tool'` message created.
    pub tool_message_id: Option<i64>,
}

/// A call to publish on the tool-calls exchange.
#[derive(Debug, Clone)]
pub struct ForwardedCall {
    /// Deterministic per ledger item, so a republish carries the same id.
    pub event_id: Uuid,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// The family it leaked in.
    pub family: String,
}

/// What one recovery pass did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The message.
    pub message_id: MessageId,
    /// Its chat.
    pub chat_id: ChatId,
    /// Its agent.
    pub agent_id: Option<AgentId>,
    /// The message-level outcome (in observe mode: what recovery would have done).
    pub outcome: Outcome,
    /// Whether the pass changed the message (`Recover`) or only recorded what it would
    /// have done (`Observe`: content, memories and tool messages untouched).
    pub mode: Mode,
    /// Per call (empty for `clean`, `no_agent`, `already_recovered`).
    pub calls: Vec<CallReport>,
    /// The content as it is in the database after the pass (observe mode: unchanged).
    pub content: Option<String>,
    /// `tools_used` after the pass (string entries).
    pub tools_used: Vec<String>,
    /// The ledger row written, if any.
    pub recovery_id: Option<i64>,
    /// The `recovery` object of the moderation message (stored in the ledger, so a
    /// redelivery republishes the same one).
    pub summary: Value,
    /// Calls to publish for the app to run.
    pub forward: Vec<ForwardedCall>,
    /// `role='tool'` messages whose empty tool_name was repaired.
    pub repaired_tool_messages: Vec<i64>,
    /// Memories created.
    pub memories_created: usize,
    /// What the pass wrote to the outbox and is still to be sent (see [`super::recover`]).
    pub outbox: Vec<crate::outbox::Queued>,
}

impl Report {
    /// Whether the pass removed text from the message, i.e. whether moderation must see
    /// it again: an applied pass with an outcome of the recovery table that strips
    /// markup. `needs_review` leaves the content as it was, `already_recovered` was
    /// published by the pass that did it, an observe-mode pass changes nothing.
    pub fn content_changed(&self) -> bool {
        self.mode == Mode::Recover
            && matches!(
                self.outcome,
                Outcome::Recovered
                    | Outcome::StrippedOnly
                    | Outcome::ToolNotEnabled
                    | Outcome::InvalidArgs
                    | Outcome::Forwarded
            )
    }

    /// Whether this pass wrote a ledger row (not a pass that found the work done before).
    pub fn recorded(&self) -> bool {
        self.recovery_id.is_some() && self.outcome != Outcome::AlreadyRecovered
    }

    /// The `(family, tool, outcome)` metric labels of each call of the pass.
    pub fn call_labels(&self) -> impl Iterator<Item = (&str, &str, &str)> + '_ {
        self.calls
            .iter()
            .map(|c| (c.family.as_str(), c.tool_label.as_str(), c.outcome.as_str()))
    }
}

/// `s` cut to at most `max` characters, an ellipsis marking the cut.
pub fn preview(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observed_outcome_is_logged_as_what_would_have_happened() {
        for outcome in Outcome::ALL {
            assert_eq!(outcome.logged(Mode::Recover), outcome.as_str());
        }
        assert_eq!(Outcome::Recovered.logged(Mode::Observe), "would_recover");
        assert_eq!(Outcome::Forwarded.logged(Mode::Observe), "would_forward");
        assert_eq!(Outcome::StrippedOnly.logged(Mode::Observe), "would_strip");
        assert_eq!(Outcome::Clean.logged(Mode::Observe), "clean");
        let changing = [
            Outcome::Recovered,
            Outcome::Forwarded,
            Outcome::StrippedOnly,
            Outcome::ToolNotEnabled,
            Outcome::InvalidArgs,
        ];
        for outcome in Outcome::ALL {
            let logged = outcome.logged(Mode::Observe);
            assert_eq!(
                logged.starts_with("would_"),
                changing.contains(&outcome),
                "{logged}"
            );
            assert!(
                !changing.iter().any(|c| c.as_str() == logged),
                "observe mode never logs a change as done: {logged}"
            );
        }
    }
}
