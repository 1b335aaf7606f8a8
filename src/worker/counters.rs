//! What every acked event is counted by and what is the same for every clean event,
//! looked up or written once when the worker starts, so the clean path hashes no label and
//! serialises no constant per event.
//!
//! May depend on: `metrics`, `model`, `recover` (its outcome and mode names).

use crate::metrics::{Counter, Metrics};
use crate::model::{Label, Models};
use crate::recover::{Mode, Outcome};
use serde_json::value::RawValue;

/// The `recovery` object of a clean message's moderation body, written once (`None` if it
/// could not be: then it is built per event, as before).
pub(super) struct Clean(pub(super) Option<Box<RawValue>>);

/// The counters every acked event adds to, by its outcome and mode and by its model's
/// label, looked up once: counting an event hashes no label.
pub(super) struct Counters {
    /// By [`Outcome::ALL`], then [`Mode::ALL`].
    events: Vec<Counter>,
    /// By [`Label::index`].
    seen: Vec<Counter>,
}

impl Counters {
    pub(super) fn new(metrics: &Metrics, models: &Models) -> Self {
        let events = Outcome::ALL
            .iter()
            .flat_map(|o| Mode::ALL.iter().map(|m| (o.as_str(), m.as_str())))
            .map(|(o, m)| metrics.event_counter(o, m))
            .collect();
        let seen = models
            .names()
            .map(|n| metrics.message_seen_counter(n))
            .collect();
        Counters { events, seen }
    }

    /// Counts an acked event (by looking its labels up when they are not in the tables).
    pub(super) fn count(
        &self,
        metrics: &Metrics,
        outcome: Outcome,
        mode: Mode,
        model: &str,
        label: Label,
    ) {
        let o = Outcome::ALL.iter().position(|x| *x == outcome);
        let m = Mode::ALL.iter().position(|x| *x == mode);
        match o
            .zip(m)
            .and_then(|(o, m)| self.events.get(o * Mode::ALL.len() + m))
        {
            Some(c) => c.inc(),
            None => metrics.event(outcome.as_str(), mode.as_str()),
        }
        match self.seen.get(label.index()) {
            Some(c) => c.inc(),
            None => metrics.message_seen(model),
        }
    }
}
