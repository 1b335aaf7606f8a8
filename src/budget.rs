//! The byte budget: how many bytes of message bodies the process works on at once
//! (`--max-in-flight-bytes`). The broker's prefetch counts deliveries and the database
//! returns whole rows, so nothing else bounds the bytes; each place that takes in a body
//! (the worker's deliveries, the admin API's passes) holds a share of this budget, its
//! size, while it works on it. A body larger than the whole budget takes all of it, so it
//! is processed alone, never refused. Waiters are served in order (a large body is not
//! starved by the small ones behind it).
//!
//! May depend on: `tokio`. Nothing of the crate.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A shared budget of bytes; cloning shares it.
#[derive(Clone, Debug)]
pub struct Budget {
    bytes: Arc<Semaphore>,
    total: u32,
}

/// A share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Share(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

impl Budget {
    /// A budget of `total` bytes (at least 1, at most 4 GiB).
    pub fn new(total: usize) -> Self {
        let total = u32::try_from(total.max(1)).unwrap_or(u32::MAX);
        Budget {
            bytes: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// The whole budget, in bytes.
    pub fn total(&self) -> usize {
        self.total as usize
    }

    /// What a body of `len` bytes takes: its size, or the whole budget when larger.
    pub fn cost(&self, len: usize) -> u32 {
        u32::try_from(len).map_or(self.total, |l| l.clamp(1, self.total))
    }

    /// Waits until `len` bytes of the budget are free and takes them.
    pub async fn take(&self, len: usize) -> Share {
        // The semaphore is never closed, so this never fails; were it closed, going on
        // unbounded would be better than waiting forever.
        Share(
            self.bytes
                .clone()
                .acquire_many_owned(self.cost(len))
                .await
                .ok(),
        )
    }

    /// Bytes taken now.
    pub fn in_use(&self) -> usize {
        self.total as usize - self.bytes.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;

    /// Polls `fut` once: whether it is done.
    async fn ready<F: Future>(fut: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let mut fut = fut;
        match std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        }
    }

    #[tokio::test]
    async fn a_body_larger_than_the_budget_takes_it_all_and_waits_for_the_rest() {
        let budget = Budget::new(100);
        assert_eq!(budget.cost(0), 1);
        assert_eq!(budget.cost(40), 40);
        assert_eq!(budget.cost(1_000), 100);
        let small = budget.take(40).await;
        assert_eq!(budget.in_use(), 40);
        let mut big = pin!(budget.take(1_000));
        assert!(
            ready(big.as_mut()).await.is_none(),
            "waits while anything is held"
        );
        // A small one behind the big one waits too: the big one is not starved.
        let mut behind = pin!(budget.take(10));
        assert!(ready(behind.as_mut()).await.is_none());
        drop(small);
        let big = ready(big.as_mut()).await.expect("all of it is free");
        assert_eq!(budget.in_use(), 100, "alone");
        assert!(ready(behind.as_mut()).await.is_none());
        drop(big);
        let _behind = ready(behind.as_mut()).await.expect("its turn");
        assert_eq!(budget.in_use(), 10);
    }
}
