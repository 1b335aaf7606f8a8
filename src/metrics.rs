//! Every metric of the worker, with its help text, and the small functions that record
//! them. Other modules call these functions and never build metric names themselves.
//!
//! Each running worker owns its own [`Metrics`] (its own registry), so several workers in
//! one process (the integration tests) do not mix their counts.
//!
//! The definitions (names, help texts, labels) are a table, `table`; this module makes
//! and records them.
//!
//! May depend on: `prometheus`. No I/O.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::time::Duration;
use table::Def;

mod table;

/// The label values shown at 0 from the start ([`Metrics::prime`]).
pub struct Prime<'a> {
    /// Event-level outcomes.
    pub outcomes: &'a [&'a str],
    /// Recovery modes.
    pub modes: &'a [&'a str],
    /// Dead-letter reasons.
    pub dead_letter_reasons: &'a [&'a str],
    /// Revert results.
    pub revert_results: &'a [&'a str],
    /// Every value of the `model` label (`model::Models::names`).
    pub models: &'a [&'a str],
}

/// The call outcomes [`Metrics::model_pass`] counts as unrecovered: the leak stays for a
/// person (`needs_review`) or the call could not run (`invalid_args`, `tool_not_enabled`).
/// The same labels as the recovery's outcomes (a test in `recover` keeps them so).
pub const UNRECOVERED_OUTCOMES: [&str; 3] = ["needs_review", "invalid_args", "tool_not_enabled"];

/// A counter of one set of label values, looked up once: counting with it hashes no label
/// (what the worker does per event; [`Metrics::event`] looks the labels up each time).
#[derive(Clone)]
pub struct Counter(IntCounter);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }
}

/// The worker's metrics.
pub struct Metrics {
    registry: Registry,
    events: IntCounterVec,
    calls: IntCounterVec,
    memories: IntCounterVec,
    published: IntCounterVec,
    unroutable: IntCounterVec,
    outbox_pending: IntGauge,
    outbox_unroutable: IntGauge,
    outbox_relayed: IntCounterVec,
    dead_lettered: IntCounterVec,
    transient_errors: IntCounterVec,
    duration: Histogram,
    per_commit: Histogram,
    in_flight: IntGauge,
    recoveries: IntCounterVec,
    backfill_progress: IntGauge,
    broker_consuming: IntGauge,
    transcript_index_ready: IntGauge,
    reverts: IntCounterVec,
    mode: IntGaugeVec,
    family_mode: IntGaugeVec,
    messages_seen: IntCounterVec,
    leaked_messages: IntCounterVec,
    leaks: IntCounterVec,
    unrecovered: IntCounterVec,
    in_flight_bytes: IntGauge,
    delivery_window: IntGauge,
}

/// A metric type made from its definition in the table.
trait FromDef: prometheus::core::Collector + Clone + 'static {
    fn from_def(def: &Def) -> prometheus::Result<Self>;
}

impl FromDef for IntCounterVec {
    fn from_def(def: &Def) -> prometheus::Result<Self> {
        IntCounterVec::new(Opts::new(def.name, def.help), def.labels)
    }
}

impl FromDef for IntGaugeVec {
    fn from_def(def: &Def) -> prometheus::Result<Self> {
        IntGaugeVec::new(Opts::new(def.name, def.help), def.labels)
    }
}

impl FromDef for IntGauge {
    fn from_def(def: &Def) -> prometheus::Result<Self> {
        IntGauge::new(def.name, def.help)
    }
}

impl FromDef for Histogram {
    fn from_def(def: &Def) -> prometheus::Result<Self> {
        Histogram::with_opts(HistogramOpts::new(def.name, def.help).buckets(def.buckets.to_vec()))
    }
}

/// The metric `def` defines, registered in `r`.
fn register<M: FromDef>(r: &Registry, def: &Def) -> M {
    let metric = M::from_def(def)
        .unwrap_or_else(|e| unreachable!("metric {} is well-formed: {e}", def.name));
    // Names are unique constants of the table, so registration cannot collide.
    let _ = r.register(Box::new(metric.clone()));
    metric
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates the metrics in a fresh registry, from the table.
    pub fn new() -> Self {
        let r = Registry::new();
        let metrics = Metrics {
            events: register(&r, &table::EVENTS),
            calls: register(&r, &table::CALLS),
            memories: register(&r, &table::MEMORIES),
            published: register(&r, &table::PUBLISHED),
            unroutable: register(&r, &table::UNROUTABLE),
            outbox_pending: register(&r, &table::OUTBOX_PENDING),
            outbox_unroutable: register(&r, &table::OUTBOX_UNROUTABLE),
            outbox_relayed: register(&r, &table::OUTBOX_RELAYED),
            dead_lettered: register(&r, &table::DEAD_LETTERED),
            transient_errors: register(&r, &table::TRANSIENT_ERRORS),
            duration: register(&r, &table::DURATION),
            per_commit: register(&r, &table::PER_COMMIT),
            in_flight: register(&r, &table::IN_FLIGHT),
            recoveries: register(&r, &table::RECOVERIES),
            backfill_progress: register(&r, &table::BACKFILL_PROGRESS),
            broker_consuming: register(&r, &table::BROKER_CONSUMING),
            transcript_index_ready: register(&r, &table::TRANSCRIPT_INDEX_READY),
            reverts: register(&r, &table::REVERTS),
            mode: register(&r, &table::MODE),
            family_mode: register(&r, &table::FAMILY_MODE),
            messages_seen: register(&r, &table::MESSAGES_SEEN),
            leaked_messages: register(&r, &table::LEAKED_MESSAGES),
            leaks: register(&r, &table::LEAKS),
            unrecovered: register(&r, &table::UNRECOVERED),
            in_flight_bytes: register(&r, &table::IN_FLIGHT_BYTES),
            delivery_window: register(&r, &table::DELIVERY_WINDOW),
            registry: r,
        };
        for dependency in ["database", "broker"] {
            metrics.transient_errors.with_label_values(&[dependency]);
            metrics.recoveries.with_label_values(&[dependency]);
        }
        metrics
    }

    /// Shows every label value that can occur at 0 from the start, so that `increase()`
    /// and `rate()` see the first event instead of a series appearing at 1.
    pub fn prime(&self, labels: &Prime<'_>) {
        for m in labels.modes {
            for o in labels.outcomes {
                self.events.with_label_values(&[o, m]);
            }
            self.memories.with_label_values(&[m]);
        }
        for r in labels.dead_letter_reasons {
            self.dead_lettered.with_label_values(&[r]);
        }
        for r in labels.revert_results {
            self.reverts.with_label_values(&[r]);
        }
        for r in ["sent", "unroutable", "failed"] {
            self.outbox_relayed.with_label_values(&[r]);
        }
        // What the rates and the alert divide is primed, so increase() sees every first leak
        // of a process. Leaks by model and family are not: models x families would be
        // hundreds of zeros; they appear at their first increment, as calls by family do.
        for m in labels.models {
            self.messages_seen.with_label_values(&[m]);
            self.leaked_messages.with_label_values(&[m]);
            for o in UNRECOVERED_OUTCOMES {
                self.unrecovered.with_label_values(&[m, o]);
            }
        }
    }

    /// The policy in force: the global mode among `modes`, and each family's mode.
    pub fn policy<'a>(
        &self,
        mode: &str,
        modes: &[&str],
        families: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        for m in modes {
            self.mode.with_label_values(&[m]).set(i64::from(*m == mode));
        }
        self.family_mode.reset();
        for (family, family_mode) in families {
            self.family_mode
                .with_label_values(&[family, family_mode])
                .set(1);
        }
    }

    /// Whether a broker session is consuming (read at scrape time).
    pub fn broker_consuming(&self, consuming: bool) {
        self.broker_consuming.set(i64::from(consuming));
    }

    /// Whether the transcript-repair index is valid (`store::transcript_index`).
    pub fn transcript_index_ready(&self, ready: bool) {
        self.transcript_index_ready.set(i64::from(ready));
    }

    /// An event finished with this event-level outcome, in this mode.
    pub fn event(&self, outcome: &str, mode: &str) {
        self.events.with_label_values(&[outcome, mode]).inc();
    }

    /// A recovery pass (worker, backfill or admin) in `mode` handled these calls, as
    /// `(family, tool, outcome)` labels, and created (observe: would have created)
    /// `memories` memories.
    pub fn recovery_pass<'a>(
        &self,
        mode: &str,
        calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        memories: usize,
    ) {
        for (family, tool, outcome) in calls {
            self.calls
                .with_label_values(&[family, tool, outcome, mode])
                .inc();
        }
        self.memories
            .with_label_values(&[mode])
            .inc_by(memories as u64);
    }

    /// [`Self::event`] of these labels, looked up now.
    pub fn event_counter(&self, outcome: &str, mode: &str) -> Counter {
        Counter(self.events.with_label_values(&[outcome, mode]))
    }

    /// [`Self::message_seen`] of this model, looked up now.
    pub fn message_seen_counter(&self, model: &str) -> Counter {
        Counter(self.messages_seen.with_label_values(&[model]))
    }

    /// The worker processed and acked an event of a message written by `model` (a label of
    /// `model::Models`).
    pub fn message_seen(&self, model: &str) {
        self.messages_seen.with_label_values(&[model]).inc();
    }

    /// A recovery pass of a message written by `model` handled these calls, as the
    /// `(family, tool, outcome)` labels of [`Self::recovery_pass`]: one leaked message, one
    /// leak for each family among them, one unrecovered call for each call with an
    /// [`UNRECOVERED_OUTCOMES`] outcome. A pass without calls counts nothing.
    pub fn model_pass<'a>(
        &self,
        model: &str,
        calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) {
        // A message has one or two families; a linear scan beats a set.
        let mut families: Vec<&str> = Vec::new();
        for (family, _, outcome) in calls {
            if families.is_empty() {
                self.leaked_messages.with_label_values(&[model]).inc();
            }
            if !families.contains(&family) {
                families.push(family);
                self.leaks.with_label_values(&[model, family]).inc();
            }
            if UNRECOVERED_OUTCOMES.contains(&outcome) {
                self.unrecovered.with_label_values(&[model, outcome]).inc();
            }
        }
    }

    /// A revert through the admin API came to `result`.
    pub fn revert(&self, result: &str) {
        self.reverts.with_label_values(&[result]).inc();
    }

    /// A publish to `exchange` was confirmed.
    pub fn published(&self, exchange: &str) {
        self.published.with_label_values(&[exchange]).inc();
    }

    /// A confirmed publish to `exchange` was returned as unroutable.
    pub fn unroutable(&self, exchange: &str) {
        self.unroutable.with_label_values(&[exchange]).inc();
    }

    /// The outbox holds `pending` rows not yet confirmed and `unroutable` rows parked
    /// because no queue took their last publish.
    pub fn outbox_pending(&self, pending: i64, unroutable: i64) {
        self.outbox_pending.set(pending);
        self.outbox_unroutable.set(unroutable);
    }

    /// The relay tried a pending outbox row: `sent`, `unroutable` or `failed`.
    pub fn outbox_relayed(&self, result: &str) {
        self.outbox_relayed.with_label_values(&[result]).inc();
    }

    /// A delivery was dead-lettered.
    pub fn dead_lettered(&self, reason: &str) {
        self.dead_lettered.with_label_values(&[reason]).inc();
    }

    /// A transient failure of `dependency` (`database`, `broker`) will be retried.
    pub fn transient_error(&self, dependency: &str) {
        self.transient_errors.with_label_values(&[dependency]).inc();
    }

    /// A delivery took this long from take to ack.
    pub fn processed_in(&self, d: Duration) {
        self.duration.observe(d.as_secs_f64());
    }

    /// One commit of the worker's recoveries held `n` of them.
    pub fn committed(&self, n: usize) {
        self.per_commit.observe(n as f64);
    }

    /// A delivery was taken (+1) or finished (-1).
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.add(delta);
    }

    /// A connection to `dependency` was re-established.
    pub fn connection_recovered(&self, dependency: &str) {
        self.recoveries.with_label_values(&[dependency]).inc();
    }

    /// The backfill examined messages up to this id.
    pub fn backfill_progress(&self, last_message_id: i64) {
        self.backfill_progress.set(last_message_id);
    }

    /// Bytes of deliveries taken (`+`) or finished (`-`).
    pub fn in_flight_bytes(&self, delta: i64) {
        self.in_flight_bytes.add(delta);
    }

    /// The delivery window now.
    pub fn delivery_window(&self, window: u16) {
        self.delivery_window.set(i64::from(window));
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let families = self.registry.gather();
        if TextEncoder::new().encode(&families, &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_recorded_values() {
        let m = Metrics::new();
        m.event("recovered", "recover");
        m.recovery_pass("observe", [("hermes", "save_memory", "recovered")], 1);
        let text = m.render();
        assert!(text
            .contains("toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"} 1"));
        assert!(text.contains(
            "toolcall_recovery_calls_total{family=\"hermes\",mode=\"observe\",outcome=\"recovered\",tool=\"save_memory\"} 1"
        ));
        assert!(text.contains("toolcall_recovery_memories_created_total{mode=\"observe\"} 1"));
        assert!(text.contains("# HELP toolcall_recovery_in_flight_deliveries"));
    }

    #[test]
    fn a_counter_looked_up_once_counts_in_its_series() {
        let m = Metrics::new();
        let clean = m.event_counter("clean", "recover");
        clean.inc();
        clean.inc();
        m.event("clean", "recover");
        m.message_seen_counter("gpt-4o").inc();
        let text = m.render();
        assert!(
            text.contains("toolcall_recovery_events_total{mode=\"recover\",outcome=\"clean\"} 3")
        );
        assert!(text.contains("toolcall_recovery_messages_seen_total{model=\"gpt-4o\"} 1"));
    }

    #[test]
    fn primed_labels_show_at_zero() {
        let m = Metrics::new();
        m.prime(&Prime {
            outcomes: &["clean", "recovered"],
            modes: &["recover", "observe"],
            dead_letter_reasons: &["malformed_json"],
            revert_results: &["conflict"],
            models: &["gpt-4o", "other"],
        });
        let text = m.render();
        assert!(
            text.contains("toolcall_recovery_events_total{mode=\"observe\",outcome=\"clean\"} 0")
        );
        assert!(text.contains("toolcall_recovery_dead_lettered_total{reason=\"malformed_json\"} 0"));
        assert!(text.contains("toolcall_recovery_reverts_total{result=\"conflict\"} 0"));
        assert!(text.contains("toolcall_recovery_memories_created_total{mode=\"recover\"} 0"));
        assert!(
            text.contains("toolcall_recovery_transient_errors_total{dependency=\"database\"} 0")
        );
        assert!(text.contains("toolcall_recovery_messages_seen_total{model=\"other\"} 0"));
        assert!(text.contains("toolcall_recovery_leaked_messages_total{model=\"gpt-4o\"} 0"));
        assert!(text.contains(
            "toolcall_recovery_unrecovered_calls_total{model=\"gpt-4o\",outcome=\"invalid_args\"} 0"
        ));
        assert!(!text.contains("toolcall_recovery_leaks_total{"));
    }

    #[test]
    fn the_unrecovered_outcomes_are_outcomes_of_the_recovery() {
        let labels = crate::recover::Outcome::ALL.map(crate::recover::Outcome::as_str);
        for o in UNRECOVERED_OUTCOMES {
            assert!(labels.contains(&o), "{o}");
        }
    }

    #[test]
    fn a_pass_counts_each_family_once_and_the_unrecovered_calls() {
        let m = Metrics::new();
        m.message_seen("gpt-4o");
        m.model_pass(
            "gpt-4o",
            [
                ("hermes", "save_memory", "recovered"),
                ("hermes", "other", "forwarded"),
                ("result_only", "none", "needs_review"),
                ("hermes", "save_memory", "invalid_args"),
            ],
        );
        m.model_pass("gpt-4o", []);
        let text = m.render();
        for line in [
            "toolcall_recovery_messages_seen_total{model=\"gpt-4o\"} 1",
            "toolcall_recovery_leaked_messages_total{model=\"gpt-4o\"} 1",
            "toolcall_recovery_leaks_total{family=\"hermes\",model=\"gpt-4o\"} 1",
            "toolcall_recovery_leaks_total{family=\"result_only\",model=\"gpt-4o\"} 1",
            "toolcall_recovery_unrecovered_calls_total{model=\"gpt-4o\",outcome=\"needs_review\"} 1",
            "toolcall_recovery_unrecovered_calls_total{model=\"gpt-4o\",outcome=\"invalid_args\"} 1",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("outcome=\"forwarded\""));
    }

    #[test]
    fn policy_gauges_name_the_mode_and_each_family_once() {
        let m = Metrics::new();
        m.policy("observe", &["recover", "observe"], [("hermes", "observe")]);
        m.policy("recover", &["recover", "observe"], [("hermes", "disabled")]);
        let text = m.render();
        assert!(text.contains("toolcall_recovery_mode{mode=\"recover\"} 1"));
        assert!(text.contains("toolcall_recovery_mode{mode=\"observe\"} 0"));
        assert!(
            text.contains("toolcall_recovery_family_mode{family=\"hermes\",mode=\"disabled\"} 1")
        );
        assert!(!text.contains("toolcall_recovery_family_mode{family=\"hermes\",mode=\"observe\"}"));
    }
}
