//! Acking one session's deliveries, several with one frame where that says exactly the
//! same thing as one ack each.
//!
//! A finished delivery's tag goes into the session's [`Book`] and an acking task sends
//! what is due: one `basic.ack` with `multiple` for the finished tags below the oldest
//! delivery still being worked on (every tag below that one is finished), and one plain ack
//! for each finished tag above it. While one round of acks is written, the deliveries that
//! finish meanwhile gather for the next, so under load one frame acks many deliveries;
//! alone, a delivery is acked at once, as before. A slow delivery (a leak waiting on the
//! database) therefore holds back no ack: the ones that finish after it are acked one by one
//! in the next round, and only the multiple ack waits for it.
//!
//! What is never acked stays open in the book: a delivery left unacked on purpose (a
//! shutdown or a broken session interrupted it), and one whose task was dropped. No
//! multiple ack passes an open tag, so either goes back to the queue when the session
//! closes. A multiple ack stands only for tags this worker took in: were a tag ever skipped
//! (the broker numbers a channel's deliveries 1, 2, 3, ...), the book acks one by one for
//! the rest of the session.
//!
//! Nothing is acked that was not finished: a tag enters the book only through
//! [`Acks::done`], which the worker calls after the delivery's publishes are confirmed.
//!
//! May depend on: `amqp` (the session's ack), `tokio`, `futures_util`.

use crate::amqp::Session;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// One ack frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ack {
    /// This delivery and every one before it on the channel (`multiple`).
    UpTo(u64),
    /// This delivery alone.
    One(u64),
}

/// The deliveries of one channel, by tag: open (taken in, not finished) and finished (to
/// be acked). Pure bookkeeping, no I/O.
#[derive(Debug)]
pub(super) struct Book {
    open: BTreeSet<u64>,
    /// Finished and not acked yet, in the order they finished.
    finished: Vec<u64>,
    /// The last tag taken in.
    last: u64,
    /// Every tag taken in so far followed the one before it, from 1: only then does a
    /// multiple ack name nothing but deliveries this book knows.
    in_sequence: bool,
    /// What [`Book::due`] handed out so far.
    sent: Sent,
}

impl Default for Book {
    fn default() -> Self {
        Book {
            open: BTreeSet::new(),
            finished: Vec::new(),
            last: 0,
            in_sequence: true,
            sent: Sent::default(),
        }
    }
}

impl Book {
    /// A delivery was taken in.
    pub(super) fn taken(&mut self, tag: u64) {
        if tag != self.last.wrapping_add(1) {
            self.in_sequence = false;
        }
        self.last = self.last.max(tag);
        self.open.insert(tag);
    }

    /// A delivery is finished and may be acked. `None` (and nothing to ack) for a tag that
    /// is not open: never taken in, or finished before; else whether it is the first
    /// finished since the last [`Book::due`] (then the acking task needs waking).
    pub(super) fn finished(&mut self, tag: u64) -> Option<bool> {
        if !self.open.remove(&tag) {
            return None;
        }
        self.finished.push(tag);
        Some(self.finished.len() == 1)
    }

    /// The acks due now, each finished tag in exactly one of them; they leave the book.
    pub(super) fn due(&mut self) -> Vec<Ack> {
        if self.finished.is_empty() {
            return Vec::new();
        }
        self.finished.sort_unstable();
        let mut acks = Vec::new();
        let mut rest = &self.finished[..];
        if self.in_sequence {
            let oldest_open = self.open.first().copied().unwrap_or(u64::MAX);
            let below = rest.partition_point(|&t| t < oldest_open);
            if below > 0 {
                acks.push(Ack::UpTo(rest[below - 1]));
                rest = &rest[below..];
            }
        }
        acks.extend(rest.iter().map(|&t| Ack::One(t)));
        self.sent.deliveries += self.finished.len() as u64;
        self.sent.frames += acks.len() as u64;
        self.finished.clear();
        acks
    }
}

/// A session's book and the acking task's wake-up, shared by the deliveries' tasks.
#[derive(Debug, Default)]
pub(super) struct Acks {
    book: Mutex<Book>,
    wake: Notify,
    closing: AtomicBool,
}

/// The acks handed out over a session, for the log line when it ends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    /// Deliveries acked.
    pub deliveries: u64,
    /// Ack frames that acked them.
    pub frames: u64,
}

impl Acks {
    fn book(&self) -> MutexGuard<'_, Book> {
        // The book is consistent between any two statements of its methods, none of which
        // can panic, so a poisoned lock holds a usable book.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A delivery was taken in (before its task starts).
    pub(super) fn taken(&self, tag: u64) {
        self.book().taken(tag);
    }

    /// A delivery is finished: its ack is sent in the acking task's next round.
    pub(super) fn done(&self, tag: u64) {
        match self.book().finished(tag) {
            // The first since the last round wakes the task; the others find it woken.
            Some(true) => self.wake.notify_one(),
            Some(false) => {}
            None => tracing::debug!(
                tag,
                "a delivery finished twice or never taken in; not acked"
            ),
        }
    }

    /// The acking task ends once what is finished now is acked.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// The acking task of `session`: sends what is due, round after round, until
    /// [`Self::close`] (after a last round) or until an ack fails (the session is then
    /// broken: what is not acked is redelivered).
    pub(super) async fn run(self: Arc<Self>, session: Arc<Session>) -> Sent {
        loop {
            let due = self.book().due();
            if due.is_empty() {
                if self.closing.load(Ordering::SeqCst) {
                    return self.book().sent;
                }
                self.wake.notified().await;
                continue;
            }
            // All of a round's frames are handed to the connection together, and written
            // together; the deliveries finishing meanwhile make up the next round.
            let results = futures_util::future::join_all(due.iter().map(|ack| match *ack {
                Ack::UpTo(tag) => session.ack(tag, true),
                Ack::One(tag) => session.ack(tag, false),
            }))
            .await;
            if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                session.health.lost(
                    "an ack failed; the broker will redeliver (idempotent)",
                    Some(&e),
                );
                return self.book().sent;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(taken: impl IntoIterator<Item = u64>) -> Book {
        let mut b = Book::default();
        for t in taken {
            b.taken(t);
        }
        b
    }

    #[test]
    fn deliveries_finished_in_order_are_acked_with_one_multiple_ack() {
        let mut b = book(1..=5);
        assert_eq!(b.finished(2), Some(true), "the first wakes the task");
        assert_eq!(b.finished(1), Some(false));
        assert_eq!(b.finished(3), Some(false));
        assert_eq!(b.due(), vec![Ack::UpTo(3)]);
        assert_eq!(b.due(), vec![], "each finished tag once");
        assert_eq!(b.finished(5), Some(true));
        assert_eq!(b.finished(4), Some(false));
        assert_eq!(b.due(), vec![Ack::UpTo(5)]);
        assert_eq!(
            b.sent,
            Sent {
                deliveries: 5,
                frames: 2
            }
        );
    }

    #[test]
    fn a_slow_delivery_holds_back_no_ack_after_it_and_no_multiple_ack_passes_it() {
        let mut b = book(1..=6);
        // 3 is slow (a leak waiting on the database); the others finish.
        for t in [1, 2, 4, 6] {
            b.finished(t);
        }
        assert_eq!(b.due(), vec![Ack::UpTo(2), Ack::One(4), Ack::One(6)]);
        b.taken(7);
        b.finished(7);
        assert_eq!(b.due(), vec![Ack::One(7)], "3 still open");
        b.finished(3);
        b.finished(5);
        assert_eq!(b.due(), vec![Ack::UpTo(5)]);
    }

    #[test]
    fn a_delivery_left_unacked_is_never_covered() {
        let mut b = book(1..=4);
        // 2 is left unacked (shutdown interrupted it): it is never finished.
        for t in [1, 3, 4] {
            b.finished(t);
        }
        let acks = b.due();
        assert_eq!(acks, vec![Ack::UpTo(1), Ack::One(3), Ack::One(4)]);
        assert!(!acks.iter().any(|a| matches!(a, Ack::UpTo(t) if *t >= 2)));
    }

    #[test]
    fn a_tag_finished_twice_or_never_taken_is_not_acked() {
        let mut b = book(1..=2);
        assert_eq!(b.finished(1), Some(true));
        assert_eq!(b.finished(1), None);
        assert_eq!(b.finished(9), None);
        assert_eq!(b.due(), vec![Ack::UpTo(1)]);
    }

    #[test]
    fn a_skipped_tag_turns_multiple_acks_off() {
        // Tag 3 never reached the book: a multiple ack at 4 would ack it unexamined.
        let mut b = book([1, 2, 4]);
        for t in [1, 2, 4] {
            b.finished(t);
        }
        assert_eq!(b.due(), vec![Ack::One(1), Ack::One(2), Ack::One(4)]);
        let mut late = book([2, 3]);
        late.finished(2);
        assert_eq!(late.due(), vec![Ack::One(2)], "tags start at 1");
    }
}
