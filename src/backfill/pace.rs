//! The rate limit: slot `n` may start no earlier than `n / rate` seconds after the first,
//! whichever task takes it. Shared by the concurrent tasks of a run; a slot is claimed
//! under a short lock and waited for outside it.
//!
//! May depend on: `tokio`.

use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// Hands out start times `1 / rate` apart.
pub struct Pacer {
    interval: Option<Duration>,
    next: Mutex<Option<Instant>>,
}

impl Pacer {
    /// At most `rate` starts per second; 0 means no limit.
    pub fn new(rate: f64) -> Self {
        let interval =
            (rate > 0.0 && rate.is_finite()).then(|| Duration::from_secs_f64(1.0 / rate));
        Pacer {
            interval,
            next: Mutex::new(None),
        }
    }

    /// Waits for the next slot.
    pub async fn tick(&self) {
        let Some(interval) = self.interval else {
            return;
        };
        let at = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let at = next.map_or(now, |n| n.max(now));
            *next = Some(at + interval);
            at
        };
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn spaces_starts_by_the_rate() {
        let p = Pacer::new(100.0);
        let t = std::time::Instant::now();
        for _ in 0..6 {
            p.tick().await;
        }
        assert!(t.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn zero_is_unlimited() {
        let p = Pacer::new(0.0);
        let t = std::time::Instant::now();
        for _ in 0..1000 {
            p.tick().await;
        }
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
