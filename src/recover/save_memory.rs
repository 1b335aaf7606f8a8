//! The effects of save_memory, the one tool the worker runs itself: the memories, and the
//! `role='tool'` messages that record each result (or error) one second before the
//! assistant message. What to run is decided in `plan.rs`; this lays the rows of a whole
//! batch out as columns for the batch's effects statement (`effects.rs`) and puts the ids
//! that come back in the passes' items.
//!
//! May depend on: the parent `recover`, `error`, `chrono`.

use super::ledger::without_nul;
use super::pass::Work;
use super::plan::{Effect, MemoryArgs};
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The `tool_call_id` of a pass's call: the message and the call's place among its calls.
fn tool_call_id(message_id: i64, ordinal: usize) -> String {
    format!("tcr-{message_id}-{ordinal}")
}

/// The result a saved memory's tool message records.
fn saved(memory_id: i64, memory: &MemoryArgs) -> Value {
    json!({
        "success": true,
        "memory_id": memory_id,
        "memory_type": memory.memory_type,
        "content": memory.content,
        "recovered": true,
    })
}

/// The memory id written in place of the real one, to cut the body around it.
const PLACEHOLDER: i64 = i64::MIN;

/// The tool message of a saved memory before its id is known: the body exactly as
/// [`saved`] serialises, cut where the id goes. Inside a JSON string every `"` is escaped,
/// so `"memory_id":` followed by the placeholder can only be the key itself.
fn saved_body(memory: &MemoryArgs) -> Result<(String, String), Error> {
    let body = without_nul(&saved(PLACEHOLDER, memory)).to_string();
    let key = "\"memory_id\":";
    let marker = format!("{key}{PLACEHOLDER}");
    let at = body
        .find(&marker)
        .ok_or_else(|| Error::Bug("the memory id is not in its tool message".into()))?;
    Ok((
        body[..at + key.len()].to_string(),
        body[at + marker.len()..].to_string(),
    ))
}

/// The save_memory rows of a batch, one array per column: the memories, and the tool
/// messages (a saved memory's body is `body || memory id || body_after`, `memory` its
/// place among the memories, from 1).
#[derive(Default)]
pub(super) struct Writes {
    pub(super) memory_agents: Vec<i64>,
    pub(super) memory_contents: Vec<String>,
    pub(super) memory_types: Vec<String>,
    pub(super) memory_expiries: Vec<Option<DateTime<Utc>>>,
    pub(super) chats: Vec<i64>,
    pub(super) agents: Vec<Option<i64>>,
    pub(super) bodies: Vec<String>,
    pub(super) bodies_after: Vec<Option<String>>,
    pub(super) memories: Vec<Option<i64>>,
    pub(super) call_ids: Vec<String>,
    pub(super) created: Vec<DateTime<Utc>>,
    /// Which item each tool message is for: (pass, item).
    items: Vec<(usize, usize)>,
}

impl Writes {
    /// The rows the effects of `works` write.
    pub(super) fn of(works: &[&mut Work<'_>]) -> Result<Writes, Error> {
        let mut w = Writes::default();
        for (pass, work) in works.iter().enumerate() {
            let row = &work.row;
            let created_at = row.created_at - chrono::Duration::seconds(1);
            for (item, effect) in work.pass.effects.iter().enumerate() {
                let (body, after, memory, ordinal) = match effect {
                    Effect::None => continue,
                    Effect::SaveMemory { memory, ordinal } => {
                        let Some(agent_id) = row.agent_id else {
                            return Err(Error::Bug(
                                "save_memory run on a message without agent".into(),
                            ));
                        };
                        w.memory_agents.push(agent_id);
                        w.memory_contents.push(memory.content.clone());
                        w.memory_types.push(memory.memory_type.clone());
                        w.memory_expiries.push(memory.expires_at);
                        let (body, after) = saved_body(memory)?;
                        let n = w.memory_agents.len() as i64;
                        (body, Some(after), Some(n), *ordinal)
                    }
                    Effect::RecordError { reason, ordinal } => {
                        let result = json!({"success": false, "error": reason});
                        (without_nul(&result).to_string(), None, None, *ordinal)
                    }
                };
                w.chats.push(row.chat_id);
                w.agents.push(row.agent_id);
                w.bodies.push(body);
                w.bodies_after.push(after);
                w.memories.push(memory);
                w.call_ids.push(tool_call_id(row.id, ordinal));
                w.created.push(created_at);
                w.items.push((pass, item));
            }
        }
        Ok(w)
    }

    /// Puts the ids that came back in the items: the memories' (by place) and the tool
    /// messages' (by `tool_call_id`, unique in a batch).
    pub(super) fn assign(
        self,
        works: &mut [&mut Work<'_>],
        memory_ids: &HashMap<i64, i64>,
        tool_message_ids: &HashMap<String, i64>,
    ) -> Result<(), Error> {
        let rows = self.items.into_iter().zip(self.memories).zip(self.call_ids);
        for (((pass, item), memory), call_id) in rows {
            let item = &mut works[pass].pass.items[item];
            item.report.memory_id = match memory {
                Some(n) => Some(
                    memory_ids
                        .get(&n)
                        .copied()
                        .ok_or_else(|| Error::Bug(format!("no memory came back for {call_id}")))?,
                ),
                None => None,
            };
            item.report.tool_message_id =
                Some(tool_message_ids.get(&call_id).copied().ok_or_else(|| {
                    Error::Bug(format!("no tool message came back for {call_id}"))
                })?);
            item.tool_call_id = Some(call_id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_memory_body_is_cut_where_its_id_goes() {
        let memory = MemoryArgs {
            content: "the \"memory_id\":-9223372036854775808 \\ of \u{0} it".into(),
            memory_type: "fact".into(),
            expires_at: None,
        };
        let (body, after) = saved_body(&memory).unwrap();
        let whole = format!("{body}{}{after}", 4711);
        assert_eq!(whole, without_nul(&saved(4711, &memory)).to_string());
        let parsed: Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(parsed["memory_id"], json!(4711));
        assert_eq!(parsed["content"], json!(memory.content.replace('\0', "")));
    }
}
