//! The delivery window: how many unacked deliveries the broker may push to this worker
//! (the consumer's prefetch), sized so that what it may push fits the byte budget beside
//! what the worker already holds. RabbitMQ's `basic.qos` counts deliveries only (its
//! prefetch-size is not implemented) and lapin holds every delivery the broker pushes: with
//! 256 deliveries of 900 KB in flight the bodies alone are 225 MB. So the worker bounds the
//! bytes itself. A window is sized for a body size `size`: `room / size` deliveries, where
//! `room` is the budget less the bytes held (received, not yet finished), at most
//! `--prefetch`.
//!
//! - It starts sized for `--max-body-bytes` (with nothing held: `budget / max-body-bytes`,
//!   at least 1), so a burst of the largest bodies the worker examines fits from the start.
//! - A body larger than the window was sized for, when the window no longer fits the room
//!   for such bodies, changes it at once: to what the room holds of them, or, when the room
//!   holds none, to a pause until enough of what is held is finished ([`Window::resume`]).
//! - A full window of deliveries since the last change whose largest body a larger window
//!   would fit (in the room left) grows it, at most doubling: small bodies take it back to
//!   `--prefetch` in a few round trips.
//! - With nothing held and no delivery for [`IDLE`], it goes back to the start, so a burst
//!   into an idle worker meets the window sized for the largest bodies, whatever came
//!   before.
//!
//! A change is applied by consuming anew (`amqp::Session::consume`), and the new
//! consumer's window comes on top of the deliveries the old one still holds: that is why
//! every window is sized to the room left, never to the whole budget. Pure arithmetic.
//!
//! May depend on: nothing of the crate.

use std::time::Duration;

/// No delivery for this long, and nothing held: back to the starting window.
pub const IDLE: Duration = Duration::from_secs(5);

/// What the consumer must do after a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Consume with this window instead.
    To(u16),
    /// Stop consuming until [`Window::resume`] says how to go on.
    Pause,
}

/// The window and what it was sized from.
#[derive(Debug, Clone)]
pub struct Window {
    budget: usize,
    max_body: usize,
    most: u16,
    start: u16,
    current: u16,
    /// The body size the window is sized for.
    size: usize,
    /// Deliveries since the last change, and the largest of them.
    seen: u32,
    largest: usize,
}

impl Window {
    /// The starting window for a budget of `budget` bytes, bodies of up to `max_body` bytes
    /// examined, and a window of at most `prefetch`.
    pub fn new(budget: usize, max_body: usize, prefetch: u16) -> Self {
        let most = prefetch.max(1);
        let max_body = max_body.max(1);
        let start = count(budget, max_body, most).max(1);
        Window {
            budget,
            max_body,
            most,
            start,
            current: start,
            size: max_body,
            seen: 0,
            largest: 0,
        }
    }

    /// The window now.
    pub fn current(&self) -> u16 {
        self.current
    }

    /// A delivery of `len` bytes arrived; `held` is what the worker holds now, that
    /// delivery included. Says whether the window must change.
    pub fn arrived(&mut self, len: usize, held: usize) -> Option<Change> {
        self.seen = self.seen.saturating_add(1);
        self.largest = self.largest.max(len);
        let room = self.budget.saturating_sub(held);
        if len > self.size {
            self.size = len;
            if count(room, len, self.most) >= self.current {
                return None;
            }
            self.restart();
            return Some(match count(room, len, self.most) {
                0 => Change::Pause,
                n => Change::To(self.set(n)),
            });
        }
        if self.seen < u32::from(self.current) {
            return None;
        }
        let largest = self.largest.max(1);
        self.restart();
        let grown = count(room, largest, self.most).min(self.current.saturating_mul(2));
        if grown <= self.current {
            return None;
        }
        self.size = largest;
        Some(Change::To(self.set(grown)))
    }

    /// While paused: the window to consume with now that the worker holds `held` bytes, or
    /// `None` to go on waiting (the room does not hold one body of the window's size yet).
    pub fn resume(&mut self, held: usize) -> Option<u16> {
        let room = self.budget.saturating_sub(held);
        match count(room, self.size, self.most) {
            0 if held > 0 => None,
            n => Some(self.set(n.max(1))),
        }
    }

    /// No delivery for [`IDLE`], and the worker holds `held` bytes. `Some(window)` when the
    /// window goes back to the start.
    pub fn idle(&mut self, held: usize) -> Option<u16> {
        if held > 0 || (self.current == self.start && self.size == self.max_body) {
            return None;
        }
        self.size = self.max_body;
        self.restart();
        Some(self.set(self.start))
    }

    fn set(&mut self, window: u16) -> u16 {
        self.current = window;
        window
    }

    fn restart(&mut self) {
        self.seen = 0;
        self.largest = 0;
    }
}

/// How many bodies of `len` bytes `room` holds, at most `most`.
fn count(room: usize, len: usize, most: u16) -> u16 {
    u16::try_from(room / len.max(1))
        .unwrap_or(u16::MAX)
        .min(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;
    const B: usize = 32 * MIB;

    /// A window grown to 256 by small bodies, as after a long run of them.
    fn grown() -> Window {
        let mut w = Window::new(B, MIB, 256);
        for _ in 0..300 {
            w.arrived(1_000, 256_000);
        }
        assert_eq!(w.current(), 256);
        w
    }

    #[test]
    fn starts_where_the_largest_examined_bodies_fit_and_grows_while_bodies_are_small() {
        let mut w = Window::new(B, MIB, 256);
        assert_eq!(w.current(), 32);
        let mut changes = Vec::new();
        for _ in 0..300 {
            changes.extend(w.arrived(1_000, 100_000));
        }
        // A full window at each size before it doubles; never beyond --prefetch.
        let to = |n| Change::To(n);
        assert_eq!(changes, [to(64), to(128), to(256)]);
        assert_eq!(Window::new(100, MIB, 256).current(), 1, "never 0");
        assert_eq!(Window::new(1 << 40, 1, 16).current(), 16);
    }

    #[test]
    fn a_burst_of_the_largest_bodies_keeps_the_starting_window() {
        let mut w = Window::new(B, MIB, 256);
        // The window fills with them and they wait (on a locked table, say).
        for i in 1..=200 {
            let held = (i % 33) * 900_000;
            assert_eq!(w.arrived(900_000, held), None, "at {i}");
        }
        assert_eq!(w.current(), 32);
    }

    #[test]
    fn a_large_body_after_small_ones_lowers_the_window_to_the_room_left() {
        let mut w = grown();
        // 10 MB held: the room holds 26 bodies of 900 KB.
        assert_eq!(w.arrived(900_000, 10_000_000), Some(Change::To(26)));
        assert_eq!(w.arrived(900_000, 11_000_000), None, "sized for them now");
        // A body larger than the budget: one at a time, once nothing else is held.
        assert_eq!(w.arrived(40 * MIB, 50 * MIB), Some(Change::Pause));
        assert_eq!(w.resume(45 * MIB), None);
        assert_eq!(w.resume(0), Some(1));
        // Room for one of them, not yet for two.
        let mut w = grown();
        assert_eq!(w.arrived(2 * MIB, 31 * MIB), Some(Change::Pause));
        assert_eq!(w.resume(31 * MIB), None);
        assert_eq!(w.resume(29 * MIB), Some(1));
        assert_eq!(w.resume(20 * MIB), Some(6));
    }

    #[test]
    fn it_grows_back_only_into_the_room_left() {
        let mut w = Window::new(B, MIB, 256);
        assert_eq!(w.arrived(4 * MIB, 4 * MIB), Some(Change::To(7)));
        let mut changes = Vec::new();
        for _ in 0..600 {
            changes.extend(w.arrived(1_000, 50_000));
        }
        let to = |n| Change::To(n);
        assert_eq!(changes, [to(14), to(28), to(56), to(112), to(224), to(256)]);
        // A window whose deliveries are all still held grows no further than the room.
        let mut w = Window::new(B, MIB, 256);
        for i in 1..32 {
            assert_eq!(w.arrived(500_000, i * 500_000), None);
        }
        assert_eq!(
            w.arrived(500_000, 16_000_000),
            Some(Change::To(35)),
            "16 MB held leaves room for 35 more, not 64"
        );
    }

    #[test]
    fn idle_with_nothing_held_goes_back_to_the_start() {
        let mut w = grown();
        assert_eq!(w.idle(5_000), None, "something is held");
        assert_eq!(w.idle(0), Some(32));
        assert_eq!(w.idle(0), None, "already there");
        let mut w = Window::new(B, MIB, 256);
        assert_eq!(w.arrived(64 * MIB, 64 * MIB), Some(Change::Pause));
        assert_eq!(w.resume(0), Some(1));
        assert_eq!(w.idle(0), Some(32), "as a fresh worker starts");
    }
}
