//! The bodies of what the worker publishes (contract §5): the moderation message of a
//! finalized message, the tool-calls message of a forwarded call, and the stand-in
//! `message.finalized` event of a pass that did not come from an event (backfill, admin API,
//! revert). Plain JSON built from plain data, identical wherever it is published from. The
//! [`Envelope`]s say what a pass owes the broker ([`ForEvent`] for the worker, [`StandIn`]
//! for the backfill, the admin API and revert); the recovery transaction writes that to the
//! outbox and `publish` sends it. The moderation body itself is written by [`moderation`].
//!
//! May depend on: `ids`, `event` (the decoded event), `recover` (the report types and the envelopes),
//! `outbox` (the row type),
//! `error`. No I/O: no broker, no database.

mod moderation;

pub use moderation::{moderation_body, moderation_unchanged, written_once};

use crate::error::Error;
use crate::event::{self, FinalizedEvent, Named};
use crate::ids::{self, AgentId, ChatId, EventId, MessageId, ID_NAMESPACE};
use crate::outbox::{Outgoing, Target};
use crate::recover::revert::{RevertEnvelope, RevertReport};
use crate::recover::{self, Envelope, ForwardedCall, Mode, Outcome, Report, Request, Source};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;
use uuid::Uuid;

/// Routing key of moderation messages.
pub const MODERATION_ROUTING_KEY: &str = "message.ready";
/// Routing key of forwarded tool calls.
pub const TOOL_CALLS_ROUTING_KEY: &str = "tool_call.recovered";

/// The tool-calls message of one forwarded call (contract §5); `source` is the event (or
/// the stand-in event) it came with.
pub fn tool_call_body(report: &Report, call: &ForwardedCall, source: EventId) -> Value {
    json!({
        "event_id": call.event_id.to_string(),
        "message_id": report.message_id.get(),
        "chat_id": report.chat_id.get(),
        "agent_id": report.agent_id.map(|a| a.get()),
        "name": call.name,
        "arguments": call.arguments,
        "family": call.family,
        "source_event_id": source.to_string(),
    })
}

/// The id of the stand-in source event of a ledger row.
pub fn source_event_id(recovery_id: i64) -> EventId {
    EventId::new(Uuid::new_v5(
        &ID_NAMESPACE,
        format!("recovery:{recovery_id}").as_bytes(),
    ))
}

/// The id of the stand-in source event of the revert of a ledger row (one per row: a
/// row is reverted at most once).
pub fn revert_event_id(recovery_id: i64) -> EventId {
    EventId::new(Uuid::new_v5(
        &ID_NAMESPACE,
        format!("revert:{recovery_id}").as_bytes(),
    ))
}

/// The [`StandInMessage`] of a report of a pass or of a revert: both name the message
/// alike, and neither type knows the other.
macro_rules! stand_in_message {
    ($report:expr) => {
        StandInMessage {
            message_id: $report.message_id,
            chat_id: $report.chat_id,
            agent_id: $report.agent_id,
            content: &$report.content,
            tools_used: &$report.tools_used,
        }
    };
}

/// The stand-in `message.finalized` event of a reverted message: the message as the revert
/// restored it, under the id of the revert of ledger row `recovery_id`.
pub fn restored_event(
    report: &RevertReport,
    recovery_id: i64,
    origin: &str,
) -> Result<FinalizedEvent, Error> {
    stand_in(
        revert_event_id(recovery_id),
        &stand_in_message!(report),
        origin,
    )
}

/// The message a stand-in event carries.
struct StandInMessage<'a> {
    message_id: MessageId,
    chat_id: ChatId,
    agent_id: Option<AgentId>,
    content: &'a Option<String>,
    tools_used: &'a [String],
}

/// The stand-in `message.finalized` event of a recovered message: the message as it is
/// after the pass, and `origin` (`backfill`, `admin`) saying who recovered it.
pub fn stand_in_event(
    report: &Report,
    recovery_id: i64,
    origin: &str,
) -> Result<FinalizedEvent, Error> {
    stand_in(
        source_event_id(recovery_id),
        &stand_in_message!(report),
        origin,
    )
}

/// The stand-in event, written as the app would write it and decoded like a delivery, so
/// its moderation message is built exactly as a delivered event's.
fn stand_in(
    event_id: EventId,
    m: &StandInMessage<'_>,
    origin: &str,
) -> Result<FinalizedEvent, Error> {
    let body = json!({
        "event_id": event_id.to_string(),
        "type": event::FINALIZED,
        "occurred_at": chrono::Utc::now().fixed_offset().to_rfc3339(),
        "origin": origin,
        "message": {
            "id": m.message_id.get(),
            "chat_id": m.chat_id.get(),
            "agent_id": m.agent_id.map(|a| a.get()),
            "role": "assistant",
            "content": m.content,
            "tools_used": m.tools_used,
        },
    });
    let bytes = serde_json::to_vec(&body)
        .map_err(|e| Error::Bug(format!("stand-in event not serialisable: {e}")))?;
    event::decode(bytes, usize::MAX)
        .map_err(|u| Error::Bug(format!("stand-in event does not decode: {}", u.poison)))
}

/// Serialises a body for the outbox (it is sent byte for byte as written).
fn text<T: Serialize>(body: &T) -> Result<String, Error> {
    serde_json::to_string(body).map_err(|e| Error::Bug(format!("body not serialisable: {e}")))
}

/// The moderation message of `event` with this content, `tools_used` and `recovery`
/// object; none for blank content (nothing to moderate).
pub fn moderation(
    event: &FinalizedEvent,
    content: Option<&str>,
    tools_used: &[String],
    recovery: &Value,
) -> Result<Option<Outgoing>, Error> {
    let Some(content) = content.filter(|c| !c.trim().is_empty()) else {
        return Ok(None);
    };
    Ok(Some(Outgoing {
        target: Target::Moderation,
        key: event.event_id.moderation_event_id().to_string(),
        body: moderation_body(event, content, tools_used, recovery)?,
    }))
}

/// A message as stored, for the moderation of an event the worker could not examine.
pub struct StoredMessage {
    /// `messages.chat_id`.
    pub chat_id: ChatId,
    /// `messages.agent_id`.
    pub agent_id: Option<AgentId>,
    /// `messages.role`.
    pub role: String,
    /// `messages.content`.
    pub content: Option<String>,
    /// `messages.tools_used` (string entries).
    pub tools_used: Vec<String>,
    /// `messages.updated_at`: the event's `occurred_at` could not be read.
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// The `recovery` object of a message moderated without being examined: `outcome` says
/// why (`oversized`, `unreadable`), `reason` is the dead-letter reason.
pub fn unexamined_summary(mode: Mode, outcome: &str, reason: &str) -> Value {
    let mut summary = recover::failed_summary(mode, reason);
    summary["outcome"] = json!(outcome);
    summary
}

/// The moderation message of an event the worker could not examine but which names
/// `named.message_id`: the message as stored, unchanged, shaped like every moderation
/// message (a `message.finalized` event with `source_event_id` and `recovery`), under the
/// stand-in source event of the message ([`ids::unexamined_event_id`]), whatever event id
/// the body shows (that one, when readable, is `recovery.unexamined_event_id`): every
/// unexamined body of one message is one moderation message to a consumer, and an examined
/// event of the message is current over it (docs/contract.md). None for null or blank
/// content. The stored content is moved into the body, not copied.
pub fn unexamined_moderation(
    named: Named,
    stored: StoredMessage,
    mut recovery: Value,
) -> Result<Option<Outgoing>, Error> {
    let Some(content) = stored.content.filter(|c| !c.trim().is_empty()) else {
        return Ok(None);
    };
    let stand_in = ids::unexamined_event_id(named.message_id);
    let key = stand_in.moderation_event_id();
    recovery["unexamined_event_id"] = json!(named.event_id.map(|id| id.to_string()));
    let out = json!({
        "event_id": key.to_string(),
        "type": event::FINALIZED,
        "occurred_at": stored.updated_at.to_rfc3339(),
        "source_event_id": stand_in.to_string(),
        "message": {
            "id": named.message_id.get(),
            "chat_id": stored.chat_id.get(),
            "agent_id": stored.agent_id.map(AgentId::get),
            "role": stored.role,
            "content": content,
            "tools_used": stored.tools_used,
        },
        "recovery": recovery,
    });
    Ok(Some(Outgoing {
        target: Target::Moderation,
        key: key.to_string(),
        body: text(&out)?,
    }))
}

/// The forwarded calls of `report`, then its moderation message when the content is not
/// blank: the order the worker has always published in.
fn owed(report: &Report, event: &FinalizedEvent) -> Result<Vec<Outgoing>, Error> {
    let mut out = Vec::with_capacity(report.forward.len() + 1);
    for call in &report.forward {
        out.push(Outgoing {
            target: Target::ToolCalls,
            key: call.event_id.to_string(),
            body: text(&tool_call_body(report, call, event.event_id))?,
        });
    }
    out.extend(moderation(
        event,
        report.content.as_deref(),
        &report.tools_used,
        &report.summary,
    )?);
    Ok(out)
}

/// What a pass on a delivered event owes: the moderation message of the event (every
/// finalized message is moderated, observed ones with their original text) and the
/// forwarded calls.
pub struct ForEvent<'a>(pub &'a FinalizedEvent);

impl Envelope for ForEvent<'_> {
    fn outgoing(&self, report: &Report) -> Result<Vec<Outgoing>, Error> {
        owed(report, self.0)
    }
}

/// [`ForEvent`] sharing its event, for a pass that runs on another task (the worker's
/// group committer, [`crate::recover::committer`]): the event is not copied for it.
pub struct ForOwnedEvent(pub Arc<FinalizedEvent>);

impl Envelope for ForOwnedEvent {
    fn outgoing(&self, report: &Report) -> Result<Vec<Outgoing>, Error> {
        owed(report, &self.0)
    }

    fn weight(&self) -> usize {
        self.0.body().len()
    }
}

/// What a pass without an event owes (the backfill, the admin API, `revert`: who asked is
/// carried as the stand-in event's `origin`, [`crate::recover::Source::label`]),
/// under a stand-in event derived from the ledger row: only a pass that changed the message
/// is published (moderation saw the text before), and a revert publishes the restored text.
pub struct StandIn {
    by: Source,
}

impl StandIn {
    /// What a pass (or a revert) that `by` asked for owes.
    pub fn by(by: Source) -> Self {
        StandIn { by }
    }

    /// Who asked.
    pub fn asker(&self) -> &Source {
        &self.by
    }

    /// The request of a pass over `message_id` by this stand-in's asker, owing what the
    /// stand-in says when `publishing` (nothing to publish with, `--no-publish`: nothing).
    pub fn request(&self, message_id: MessageId, publishing: bool) -> Request<'_> {
        Request::new(message_id, self.by.clone()).owing(publishing.then_some(self as &dyn Envelope))
    }

    /// What a revert by this stand-in's asker owes when `publishing`.
    pub fn revert_owed(&self, publishing: bool) -> Option<&dyn RevertEnvelope> {
        publishing.then_some(self as &dyn RevertEnvelope)
    }
}

impl Envelope for StandIn {
    fn outgoing(&self, report: &Report) -> Result<Vec<Outgoing>, Error> {
        match report.recovery_id {
            Some(id) if report.content_changed() => {
                owed(report, &stand_in_event(report, id, self.by.label())?)
            }
            _ => Ok(Vec::new()),
        }
    }
}

impl RevertEnvelope for StandIn {
    fn restored(&self, report: &RevertReport) -> Result<Vec<Outgoing>, Error> {
        let Some(id) = report.recovery_id else {
            return Ok(Vec::new());
        };
        let event = restored_event(report, id, self.by.label())?;
        let mut summary = recover::empty_summary(Outcome::Reverted, Mode::Recover);
        summary["reverted_recovery_id"] = json!(id);
        Ok(moderation(
            &event,
            report.content.as_deref(),
            &report.tools_used,
            &summary,
        )?
        .into_iter()
        .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stand_in_event_is_built_as_a_delivered_one() {
        let report = Report {
            message_id: MessageId::new(9),
            chat_id: ChatId::new(3),
            agent_id: None,
            outcome: Outcome::Recovered,
            mode: Mode::Recover,
            calls: Vec::new(),
            content: Some("cleaned".into()),
            tools_used: vec!["save_memory (recovered)".into()],
            recovery_id: Some(41),
            summary: json!({"outcome": "recovered"}),
            forward: Vec::new(),
            repaired_tool_messages: Vec::new(),
            memories_created: 1,
            outbox: Vec::new(),
        };
        let owed = StandIn::by(Source::Backfill { model: None })
            .outgoing(&report)
            .unwrap();
        assert_eq!(owed.len(), 1);
        let v: Value = serde_json::from_str(&owed[0].body).unwrap();
        assert_eq!(v["source_event_id"], json!(source_event_id(41).to_string()));
        assert_eq!(
            owed[0].key,
            source_event_id(41).moderation_event_id().to_string()
        );
        assert_eq!(v["origin"], json!("backfill"));
        assert_eq!(v["message"]["content"], json!("cleaned"));
        assert_eq!(v["message"]["id"], json!(9));
        assert_eq!(v["recovery"]["outcome"], json!("recovered"));
    }
}
