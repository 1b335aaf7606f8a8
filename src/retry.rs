//! Retrying transient failures: one backoff policy (exponential with jitter, capped, no
//! limit on attempts: an outage is waited out, the delivery is never acked or requeued
//! while it lasts) and a sleeper that cuts the wait short when shutdown begins.
//!
//! May depend on: `shutdown`, `backon`, `tokio`.

use crate::shutdown::Shutdown;
use backon::ExponentialBuilder;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The backoff between attempts: 100 ms doubling up to 5 s, with jitter, forever.
pub fn policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
}

/// A backon sleeper that returns early when shutdown begins.
pub fn sleeper(
    shutdown: Shutdown,
) -> impl Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    move |d| {
        let mut s = shutdown.clone();
        Box::pin(async move {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = s.wait() => {}
            }
        })
    }
}
