//! Shutdown as a small type: a [`Trigger`] fires once, every task holds a [`Shutdown`]
//! (a watch receiver) and finishes its current unit of work before it returns.
//!
//! Drain order (written down once, carried out by `startup`): 1. the consumer is
//! cancelled, so the broker sends nothing more; 2. in-flight deliveries finish (commit,
//! publish, confirm, ack), bounded by the drain timeout; 3. channels and the broker
//! connection close (anything unacked goes back to the queue); 4. the database pool
//! closes; 5. the HTTP server stops.
//!
//! May depend on: `tokio`.

use tokio::sync::watch;

/// Fires the shutdown. Cloneable; firing twice is harmless.
#[derive(Clone, Debug)]
pub struct Trigger(watch::Sender<bool>);

/// Tells a task that shutdown has begun.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new trigger and its first handle.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Shutdown(rx))
}

impl Trigger {
    /// Begins shutdown.
    pub fn fire(&self) {
        self.0.send_replace(true);
    }

    /// A new handle.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Shutdown {
    /// Whether shutdown has begun.
    pub fn is_shutdown(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until shutdown begins (returns at once if it has).
    pub async fn wait(&mut self) {
        // An error means the trigger was dropped: nobody can fire it any more, which we
        // treat as shutdown so no task waits forever.
        let _ = self.0.wait_for(|v| *v).await;
    }
}

/// Fires `trigger` on SIGTERM or SIGINT (Ctrl-C).
pub async fn on_signals(trigger: Trigger) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received, shutting down"),
        _ = term => tracing::info!("SIGTERM received, shutting down"),
    }
    trigger.fire();
}
