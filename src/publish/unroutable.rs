//! Saying that publishes are unroutable, once per burst. When no queue is bound to an
//! output exchange every publish to it comes back, and the relay sends each pending row
//! again at every sweep: a WARN per message would be thousands of lines for one fault.
//! The first unroutable publish to an exchange is said at once; those that follow within
//! [`WINDOW`] are counted and said in one line at its end, and so on while they keep
//! coming. Every one of them is counted in `toolcall_recovery_messages_unroutable_total`.
//!
//! May depend on: `tokio` (the timer), `tracing`.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

/// How long the unroutable publishes after the first are counted before they are said.
pub const WINDOW: Duration = Duration::from_secs(60);

/// The process's bursts (every publisher and relay of the process says them together).
static BURSTS: LazyLock<Arc<Bursts>> = LazyLock::new(|| Arc::new(Bursts::new(WINDOW)));

/// Says one unroutable publish to `exchange` (at once, or within its burst's summary).
pub fn note(exchange: &str) {
    BURSTS.note(exchange);
}

/// Unroutable publishes counted per exchange while a burst is open.
pub(super) struct Bursts {
    window: Duration,
    open: Mutex<HashMap<String, u64>>,
}

impl Bursts {
    pub(super) fn new(window: Duration) -> Self {
        Bursts {
            window,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// One unroutable publish to `exchange`: said when it opens a burst, counted otherwise.
    pub(super) fn note(self: &Arc<Self>, exchange: &str) {
        {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = open.get_mut(exchange) {
                *n += 1;
                return;
            }
            open.insert(exchange.to_string(), 0);
        }
        tracing::warn!(
            exchange,
            "a published message was unroutable: no queue is bound to the exchange (further \
             ones are summarised every {}s)",
            self.window.as_secs()
        );
        self.close_later(exchange.to_string());
    }

    /// At the end of each window, says how many more came, and closes the burst after a
    /// window with none.
    fn close_later(self: &Arc<Self>, exchange: String) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No timer to summarise with (not in the process's runtime): every one is said.
            self.take(&exchange, true);
            return;
        };
        let bursts = self.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(bursts.window).await;
                let n = bursts.take(&exchange, false);
                if n == 0 {
                    bursts.take(&exchange, true);
                    return;
                }
                tracing::warn!(
                    exchange,
                    unroutable = n,
                    "more published messages were unroutable in the last {}s: no queue is \
                     bound to the exchange",
                    bursts.window.as_secs()
                );
            }
        });
    }

    /// The count of `exchange`'s burst since the last look, reset; its burst closed when
    /// `close`.
    fn take(&self, exchange: &str, close: bool) -> u64 {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if close {
            return open.remove(exchange).unwrap_or(0);
        }
        open.get_mut(exchange).map_or(0, std::mem::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// A warning logged: its message and its `unroutable` count, if any.
    type Line = (String, Option<u64>);

    /// The warnings logged.
    #[derive(Clone, Default)]
    struct Said(Arc<Mutex<Vec<Line>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Said {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            struct Fields(String, Option<u64>);
            impl tracing::field::Visit for Fields {
                fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
                    if field.name() == "unroutable" {
                        self.1 = Some(value);
                    }
                }
                fn record_debug(
                    &mut self,
                    field: &tracing::field::Field,
                    value: &dyn std::fmt::Debug,
                ) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}");
                    }
                }
            }
            let mut fields = Fields(String::new(), None);
            event.record(&mut fields);
            self.0.lock().unwrap().push((fields.0, fields.1));
        }
    }

    #[tokio::test]
    async fn a_burst_is_said_once_then_summarised() {
        let said = Said::default();
        let _guard =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(said.clone()));
        let bursts = Arc::new(Bursts::new(Duration::from_millis(200)));
        for _ in 0..500 {
            bursts.note("chat.moderation");
        }
        bursts.note("chat.tool_calls");
        let lines = || said.0.lock().unwrap().clone();
        assert_eq!(
            lines().len(),
            2,
            "one line per exchange at once: {:?}",
            lines()
        );
        // The summary comes at the end of the window (the test waits for it, however long
        // the machine takes), then the burst closes after a window with none.
        while bursts.open.lock().unwrap().contains_key("chat.moderation") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let summaries: Vec<u64> = lines().iter().filter_map(|l| l.1).collect();
        assert_eq!(summaries, vec![499], "{:?}", lines());
        bursts.note("chat.moderation");
        assert_eq!(
            lines().len(),
            4,
            "a new burst is said at once: {:?}",
            lines()
        );
    }
}
