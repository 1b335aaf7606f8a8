//! What a backfill run counts: the [`Summary`] it prints at the end (and returns), by
//! outcome, by effect and by model.
//!
//! May depend on: `recover` (the mode labels), the sibling modules (`examine`,
//! `transcripts`). No I/O.

use super::examine::{Examined, FAILED};
use super::transcripts::Repaired;
use crate::recover::Mode;
use serde::Serialize;
use std::collections::BTreeMap;

/// Failed message ids kept in the summary.
const FAILED_IDS_KEPT: usize = 100;

/// What a run did (or, dry, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Nothing was written.
    pub dry_run: bool,
    /// Candidate messages examined.
    pub examined: u64,
    /// Messages by outcome label (`clean`, `recovered`, ..., `failed`, `missing`).
    pub by_outcome: BTreeMap<String, u64>,
    /// Messages whose content changed (or would).
    pub changed: u64,
    /// Memories created (dry run: that would be) by passes in recover mode.
    pub memories_created: u64,
    /// Memories passes in observe mode would have created: recorded in the ledger, none
    /// created.
    pub memories_observed: u64,
    /// Moderation messages published and confirmed.
    pub moderation_published: u64,
    /// Forwarded calls published and confirmed.
    pub tool_calls_published: u64,
    /// Publishes left pending in the outbox (unroutable: no queue bound); a worker's relay
    /// sends them.
    pub publishes_pending: u64,
    /// The first and last message examined.
    pub first_id: Option<i64>,
    /// The last message examined; the checkpoint (real runs).
    pub last_id: Option<i64>,
    /// Ids of messages that failed (the first 100).
    pub failed_ids: Vec<i64>,
    /// Transcript repair (`--repair-transcripts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcripts: Option<Repaired>,
    /// Reached the end of its range.
    pub finished: bool,
    /// Stopped by Ctrl-C / SIGTERM.
    pub interrupted: bool,
    /// Stopped by `--limit`.
    pub limit_reached: bool,
    /// Wall time, seconds.
    pub elapsed_secs: f64,
    /// Messages below the starting point revisited because an observe-mode pass recorded
    /// them (counted in `by_outcome`, not in `examined`).
    pub revisited: u64,
    /// The examined messages by the label of the model that wrote them (`--models`;
    /// `unknown` for all of them when `messages` has no model column). Revisited messages
    /// are not in it.
    pub by_model: BTreeMap<String, ModelSummary>,
}

/// The examined messages of one model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModelSummary {
    /// Candidate messages examined (those the SQL prefilter lets through, clean or not).
    pub examined: u64,
    /// Messages in which the pass recorded a leak (or, dry, would).
    pub leaked: u64,
    /// The same by leak family: a message with leaks of two families counts once for each.
    pub leaks: BTreeMap<&'static str, u64>,
    /// Calls the pass could not fix, by outcome (`needs_review`, `invalid_args`,
    /// `tool_not_enabled`).
    pub unrecovered: BTreeMap<&'static str, u64>,
}

impl ModelSummary {
    /// Unrecovered calls over every outcome.
    pub fn unrecovered_count(&self) -> u64 {
        self.unrecovered.values().sum()
    }
}

impl Summary {
    /// Counts one examined message.
    pub fn add(&mut self, e: &Examined) {
        self.examined += 1;
        self.first_id.get_or_insert(e.message_id);
        self.last_id = Some(e.message_id);
        self.count_effects(e);
        self.count_model(e);
    }

    /// The breakdown by model. The key is allocated once per label, not per message.
    fn count_model(&mut self, e: &Examined) {
        if !self.by_model.contains_key(&*e.model) {
            self.by_model
                .insert(e.model.to_string(), ModelSummary::default());
        }
        let Some(m) = self.by_model.get_mut(&*e.model) else {
            return;
        };
        m.examined += 1;
        if let Some(r) = &e.recorded {
            m.leaked += 1;
            for family in &r.leak_families {
                *m.leaks.entry(family).or_default() += 1;
            }
            for outcome in &r.unrecovered {
                *m.unrecovered.entry(outcome).or_default() += 1;
            }
        }
    }

    /// Counts one revisited observed message (not part of the walk: ids and the
    /// checkpoint are untouched).
    pub fn add_revisited(&mut self, e: &Examined) {
        self.revisited += 1;
        self.count_effects(e);
    }

    fn count_effects(&mut self, e: &Examined) {
        *self.by_outcome.entry(e.outcome.to_string()).or_default() += 1;
        self.changed += u64::from(e.changed);
        if e.mode == Mode::Observe.as_str() {
            self.memories_observed += e.memories_created as u64;
        } else {
            self.memories_created += e.memories_created as u64;
        }
        self.moderation_published += e.published.moderation;
        self.tool_calls_published += e.published.tool_calls;
        self.publishes_pending += (e.published.unroutable + e.published.pending) as u64;
        if e.outcome == FAILED && self.failed_ids.len() < FAILED_IDS_KEPT {
            self.failed_ids.push(e.message_id);
        }
    }

    /// Messages with this outcome label.
    pub fn count(&self, outcome: &str) -> u64 {
        self.by_outcome.get(outcome).copied().unwrap_or(0)
    }
}
