//! The walk's window: candidates started and not yet reported, in id order. Examinations
//! finish in any order; one is reported, counted and covered by the checkpoint only once
//! it and everything before it is done.
//!
//! May depend on: the sibling `examine` (its result type). No I/O.

use super::examine::Examined;
use std::collections::VecDeque;

/// A started candidate.
pub(super) enum Slot {
    /// Being examined.
    Running,
    /// Examined; reported and counted once everything before it is.
    Done(Examined),
    /// Its examination failed and ends the run: the checkpoint stays before it.
    Failed,
}

/// The candidates started and not yet reported, in id order. The checkpoint is the last
/// one taken out, and one is taken out only when it and everything before it is done, so
/// the checkpoint never covers a candidate that is not done, however the examinations
/// finish.
#[derive(Default)]
pub(super) struct Window {
    slots: VecDeque<Slot>,
    /// Sequence number of `slots[0]`.
    first: u64,
}

impl Window {
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Takes in the next candidate; its sequence number.
    pub(super) fn start(&mut self) -> u64 {
        self.slots.push_back(Slot::Running);
        self.first + self.slots.len() as u64 - 1
    }

    /// Records how candidate `seq` ended.
    pub(super) fn finish(&mut self, seq: u64, slot: Slot) {
        let at = seq
            .checked_sub(self.first)
            .and_then(|i| usize::try_from(i).ok());
        if let Some(s) = at.and_then(|i| self.slots.get_mut(i)) {
            *s = slot;
        }
    }

    /// The oldest candidate, when it is done (and so is everything before it).
    pub(super) fn pop_done(&mut self) -> Option<Examined> {
        if !matches!(self.slots.front(), Some(Slot::Done(_))) {
            return None;
        }
        self.first += 1;
        match self.slots.pop_front() {
            Some(Slot::Done(e)) => Some(e),
            _ => None,
        }
    }

    /// Empties the window: what is done behind a failed or unfinished one, in id order.
    pub(super) fn done_past_failure(&mut self) -> impl Iterator<Item = Examined> + '_ {
        self.slots.drain(..).filter_map(|s| match s {
            Slot::Done(e) => Some(e),
            Slot::Running | Slot::Failed => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examined(id: i64) -> Examined {
        Examined {
            message_id: id,
            agent_id: None,
            outcome: "clean",
            mode: "recover",
            model: std::sync::Arc::from(crate::model::UNKNOWN),
            recorded: None,
            calls: Vec::new(),
            memory_preview: None,
            memories_created: 0,
            changed: false,
            published: crate::publish::PublishedCounts::default(),
            error: None,
        }
    }

    fn ids(w: &mut Window) -> Vec<i64> {
        std::iter::from_fn(|| w.pop_done())
            .map(|e| e.message_id)
            .collect()
    }

    #[test]
    fn takes_out_only_a_prefix_that_is_entirely_done() {
        let mut w = Window::default();
        let seqs: Vec<u64> = (0..4).map(|_| w.start()).collect();
        w.finish(seqs[3], Slot::Done(examined(40)));
        w.finish(seqs[1], Slot::Done(examined(20)));
        assert!(ids(&mut w).is_empty(), "the first is still running");
        w.finish(seqs[0], Slot::Done(examined(10)));
        assert_eq!(ids(&mut w), vec![10, 20]);
        assert_eq!(w.len(), 2);
        // Sequence numbers go on across what was taken out.
        let fifth = w.start();
        assert_eq!(fifth, 4);
        w.finish(fifth, Slot::Done(examined(50)));
        w.finish(seqs[2], Slot::Done(examined(30)));
        assert_eq!(ids(&mut w), vec![30, 40, 50]);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn a_failed_examination_holds_everything_after_it() {
        let mut w = Window::default();
        let seqs: Vec<u64> = (0..4).map(|_| w.start()).collect();
        w.finish(seqs[0], Slot::Done(examined(1)));
        w.finish(seqs[1], Slot::Failed);
        w.finish(seqs[3], Slot::Done(examined(4)));
        assert_eq!(ids(&mut w), vec![1]);
        let rest: Vec<i64> = w.done_past_failure().map(|e| e.message_id).collect();
        assert_eq!(rest, vec![4], "done, but never covered by the checkpoint");
        assert_eq!(w.len(), 0);
    }
}
