//! Every metric of the worker, with its help text, and the small functions that record
//! them. Other modules call these functions and never build metric names themselves.
//!
//! Each running worker owns its own [`Metrics`] (its own registry), so several workers in
//! one process (the integration tests) do not mix their counts.
//!
//! May depend on: `prometheus`. No I/O.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use std::time::Duration;

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

/// The worker's metrics.
pub struct Metrics {
    registry: Registry,
    events: IntCounterVec,
    calls: IntCounterVec,
    memories: IntCounterVec,
    published: IntCounterVec,
    unroutable: IntCounterVec,
    outbox_pending: IntGauge,
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

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| unreachable!("metric {name} is well-formed: {e}"));
    register(r, Box::new(c.clone()));
    c
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| unreachable!("metric {name} is well-formed: {e}"));
    register(r, Box::new(g.clone()));
    g
}

fn register(r: &Registry, c: Box<dyn prometheus::core::Collector>) {
    // Names are unique constants of this module, so registration cannot collide.
    let _ = r.register(c);
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates the metrics in a fresh registry.
    pub fn new() -> Self {
        let r = Registry::new();
        let events = counter_vec(
            &r,
            "toolcall_recovery_events_total",
            "Finalized-message events processed, by event-level outcome and the mode of \
             the pass (`observe`: the outcome recovery would have had; nothing changed).",
            &["outcome", "mode"],
        );
        let calls = counter_vec(
            &r,
            "toolcall_recovery_calls_total",
            "Leaked calls and result objects handled, by family, tool, outcome and mode \
             (`observe`: would-be outcome). Tool names not enabled for the agent are \
             reported as `other`.",
            &["family", "tool", "outcome", "mode"],
        );
        let memories = counter_vec(
            &r,
            "toolcall_recovery_memories_created_total",
            "agent_memories rows created by recovered save_memory calls, by mode \
             (`observe`: memories that would have been created).",
            &["mode"],
        );
        let published = counter_vec(
            &r,
            "toolcall_recovery_messages_published_total",
            "Messages published and confirmed by the broker, by exchange.",
            &["exchange"],
        );
        let unroutable = counter_vec(
            &r,
            "toolcall_recovery_messages_unroutable_total",
            "Confirmed publishes the broker returned because no queue was bound, by exchange.",
            &["exchange"],
        );
        let outbox_pending = IntGauge::new(
            "toolcall_recovery_outbox_pending",
            "Outbox rows (publishes owed by a committed recovery or revert) not yet confirmed \
             by the broker, as of the relay's last sweep.",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(outbox_pending.clone()));
        let outbox_relayed = counter_vec(
            &r,
            "toolcall_recovery_outbox_relayed_total",
            "Pending outbox rows the relay tried to send, by result (`sent`, `unroutable`: \
             no queue bound, kept pending; `failed`: broker error, kept pending).",
            &["result"],
        );
        let dead_lettered = counter_vec(
            &r,
            "toolcall_recovery_dead_lettered_total",
            "Deliveries dead-lettered by the worker, by reason.",
            &["reason"],
        );
        let transient_errors = counter_vec(
            &r,
            "toolcall_recovery_transient_errors_total",
            "Transient failures that were retried, by dependency (database, broker).",
            &["dependency"],
        );
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "toolcall_recovery_processing_duration_seconds",
                "Time from taking a delivery to acking it.",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(duration.clone()));
        let per_commit = Histogram::with_opts(
            HistogramOpts::new(
                "toolcall_recovery_recoveries_per_commit",
                "Leaked messages the worker recovered per database commit (more than 1 when \
                 leaks queue up for the database: group commit).",
            )
            .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(per_commit.clone()));
        let in_flight = IntGauge::new(
            "toolcall_recovery_in_flight_deliveries",
            "Deliveries taken and not yet acked.",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(in_flight.clone()));
        let recoveries = counter_vec(
            &r,
            "toolcall_recovery_connection_recoveries_total",
            "Connections re-established after a loss, by dependency.",
            &["dependency"],
        );
        let backfill_progress = IntGauge::new(
            "toolcall_recovery_backfill_progress",
            "Id of the last message the backfill examined (0 when no backfill ran).",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(backfill_progress.clone()));
        let broker_consuming = IntGauge::new(
            "toolcall_recovery_broker_consuming",
            "1 while a broker session is consuming the input queue, 0 while it is being \
             re-established (the process is up but takes no deliveries).",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(broker_consuming.clone()));
        let transcript_index_ready = IntGauge::new(
            "toolcall_recovery_transcript_index_ready",
            "1 when the transcript-repair index on the app's messages table is valid, 0 when \
             it is missing or INVALID: recovery works, but each transcript repair reads the \
             chat's tool messages (the owner of messages runs `toolcall-recovery index`). \
             Looked at on start and every 5 minutes.",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(transcript_index_ready.clone()));
        let reverts = counter_vec(
            &r,
            "toolcall_recovery_reverts_total",
            "Reverts asked through the admin API, by result (reverted, already_reverted, \
             nothing_to_revert, conflict).",
            &["result"],
        );
        let mode = gauge_vec(
            &r,
            "toolcall_recovery_mode",
            "1 for the configured recovery mode (recover or observe), 0 for the other.",
            &["mode"],
        );
        let family_mode = gauge_vec(
            &r,
            "toolcall_recovery_family_mode",
            "One series per detection family, value 1, labelled with what the policy does \
             with it: recover, observe, or disabled.",
            &["family", "mode"],
        );
        // Per model (`model` is a bounded label: the configured list + other + unknown).
        // No `mode` label: a leak is the model's whatever the worker then does with it, so
        // the rates stay comparable across a switch between observe and recover.
        let messages_seen = counter_vec(
            &r,
            "toolcall_recovery_messages_seen_total",
            "Finalized-message events the worker processed and acked (clean or not, any \
             mode), by the model that wrote them: a configured model name, `other` or \
             `unknown` (no model_id in the event). The denominator of leak rates.",
            &["model"],
        );
        let leaked_messages = counter_vec(
            &r,
            "toolcall_recovery_leaked_messages_total",
            "Finalized messages in which a recovery pass recorded a leak (in both modes), by \
             model: the numerator of leak rates. Passes that recorded nothing \
             (already_recovered, no_agent, reverted) do not count.",
            &["model"],
        );
        let leaks = counter_vec(
            &r,
            "toolcall_recovery_leaks_total",
            "Finalized messages in which a recovery pass recorded a leak, by model and leak \
             family: a message with leaks of two families counts once for each (in both \
             modes).",
            &["model", "family"],
        );
        let unrecovered = counter_vec(
            &r,
            "toolcall_recovery_unrecovered_calls_total",
            "Leaked calls and result objects recovery could not fix, by model and outcome: \
             needs_review (left in the message for a person), invalid_args, \
             tool_not_enabled (observe mode: would-be outcomes).",
            &["model", "outcome"],
        );
        for dependency in ["database", "broker"] {
            transient_errors.with_label_values(&[dependency]);
            recoveries.with_label_values(&[dependency]);
        }
        let in_flight_bytes = IntGauge::new(
            "toolcall_recovery_in_flight_bytes",
            "Bytes of event bodies taken and not yet acked, waiting for the byte budget \
             (--max-in-flight-bytes) or worked on.",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(in_flight_bytes.clone()));
        let delivery_window = IntGauge::new(
            "toolcall_recovery_delivery_window",
            "Unacked deliveries the broker may push to this worker now (the prefetch, sized \
             from the bodies seen to fit --max-in-flight-bytes, at most --prefetch).",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        register(&r, Box::new(delivery_window.clone()));
        Metrics {
            registry: r,
            events,
            calls,
            memories,
            published,
            unroutable,
            outbox_pending,
            outbox_relayed,
            dead_lettered,
            transient_errors,
            duration,
            per_commit,
            in_flight,
            recoveries,
            backfill_progress,
            broker_consuming,
            transcript_index_ready,
            reverts,
            mode,
            family_mode,
            messages_seen,
            leaked_messages,
            leaks,
            unrecovered,
            in_flight_bytes,
            delivery_window,
        }
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

    /// The outbox holds `n` rows not yet sent.
    pub fn outbox_pending(&self, n: i64) {
        self.outbox_pending.set(n);
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
