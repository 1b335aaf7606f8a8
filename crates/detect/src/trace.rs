//! What detection did with one message, step by step, for an operator who finds a leak that
//! was missed (`scan --explain`): which detectors the prefilter ran, which spans each looked
//! at, and why each candidate was taken, declined or dropped.
//!
//! The sink is generic: [`crate::detect`] runs with [`NoTrace`], whose `ENABLED` is false,
//! so the driver's calls compile away and no detector records anything (a detector's note is
//! one check of an empty option, made only after the prefilter found a marker: the clean
//! path never reaches one).
//!
//! May depend on: `crate::types`. Nothing else.

use crate::types::{Call, Family};
use std::cell::RefCell;
use std::ops::Range;

/// Receives the steps of one detection. Every method does nothing by default.
pub trait Trace {
    /// Whether anything is recorded at all; `false` makes every step free.
    const ENABLED: bool = true;

    /// The detectors the prefilter ran (their name and what of theirs it found in this text:
    /// the markers that occur, or the place it looked, such as the first line), in the order
    /// they run. Empty: the message holds no marker and is clean.
    fn prefilter(&mut self, _detectors: &[(&'static str, Vec<String>)]) {}

    /// One step: a candidate taken, declined or dropped.
    fn note(&mut self, _note: Note) {}
}

/// The sink `detect` uses: records nothing.
pub struct NoTrace;

impl Trace for NoTrace {
    const ENABLED: bool = false;
}

/// What became of one span.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Read as a leak with these calls.
    Taken(Vec<Call>),
    /// A detector looked and declined, for this reason.
    Declined(String),
    /// A leak a detector read that the driver dropped afterwards (in code, in reasoning,
    /// overlapping another leak, its family switched off).
    Dropped(String),
}

/// One step of a detection.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    /// The detector that looked (a family, or an own finder's name), or `detect` itself for
    /// what the driver dropped.
    pub detector: &'static str,
    /// The family the detector reports.
    pub family: Family,
    /// The bytes it looked at (a candidate's start, or the whole markup read).
    pub span: Range<usize>,
    /// What became of them.
    pub verdict: Verdict,
}

/// Where detectors write their notes: nothing unless a trace asked for them.
#[derive(Default)]
pub struct Notes {
    notes: Option<RefCell<Vec<Note>>>,
}

impl Notes {
    /// Notes that record (`enabled`) or not.
    pub fn new(enabled: bool) -> Notes {
        Notes {
            notes: enabled.then(|| RefCell::new(Vec::new())),
        }
    }

    /// How many notes are recorded so far.
    pub fn len(&self) -> usize {
        self.notes.as_ref().map_or(0, |n| n.borrow().len())
    }

    /// Records a declined candidate; `why` is built only when notes are recorded.
    pub fn declined(
        &self,
        (detector, family): (&'static str, Family),
        span: Range<usize>,
        why: impl FnOnce() -> String,
    ) {
        if let Some(n) = &self.notes {
            n.borrow_mut().push(Note {
                detector,
                family,
                span,
                verdict: Verdict::Declined(why()),
            });
        }
    }

    /// The notes recorded, in order.
    pub fn take(&self) -> Vec<Note> {
        self.notes
            .as_ref()
            .map(|n| std::mem::take(&mut *n.borrow_mut()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_notes_record_nothing_and_build_nothing() {
        let n = Notes::new(false);
        n.declined(("hermes", Family::Hermes), 0..1, || {
            unreachable!("never built")
        });
        assert!(n.take().is_empty());
        let n = Notes::new(true);
        n.declined(("hermes", Family::Hermes), 0..1, || "why".into());
        assert_eq!(n.take().len(), 1);
    }
}
