//! The metrics as a table: every metric's name, help text and labels (and a histogram's
//! buckets), one constant each, registered by `Metrics::new`. Dashboards and alerts use
//! these names, help texts and label sets (`ci/deploy-checks.sh` checks them): change them
//! only with those.
//!
//! May depend on: nothing.

/// A metric's definition.
pub(super) struct Def {
    pub name: &'static str,
    pub help: &'static str,
    /// Its labels (none: one series).
    pub labels: &'static [&'static str],
    /// A histogram's buckets (none for the others).
    pub buckets: &'static [f64],
}

/// `events`: counter (labelled).
pub(super) const EVENTS: Def = Def {
    name: "toolcall_recovery_events_total",
    help: "Finalized-message events processed, by event-level outcome and the mode of \
        the pass (`observe`: the outcome recovery would have had; nothing changed).",
    labels: &["outcome", "mode"],
    buckets: &[],
};

/// `calls`: counter (labelled).
pub(super) const CALLS: Def = Def {
    name: "toolcall_recovery_calls_total",
    help: "Leaked calls and result objects handled, by family, tool, outcome and mode \
        (`observe`: would-be outcome). Tool names not enabled for the agent are \
        reported as `other`.",
    labels: &["family", "tool", "outcome", "mode"],
    buckets: &[],
};

/// `memories`: counter (labelled).
pub(super) const MEMORIES: Def = Def {
    name: "toolcall_recovery_memories_created_total",
    help: "agent_memories rows created by recovered save_memory calls, by mode \
        (`observe`: memories that would have been created).",
    labels: &["mode"],
    buckets: &[],
};

/// `published`: counter (labelled).
pub(super) const PUBLISHED: Def = Def {
    name: "toolcall_recovery_messages_published_total",
    help: "Messages published and confirmed by the broker, by exchange.",
    labels: &["exchange"],
    buckets: &[],
};

/// `unroutable`: counter (labelled).
pub(super) const UNROUTABLE: Def = Def {
    name: "toolcall_recovery_messages_unroutable_total",
    help: "Confirmed publishes the broker returned because no queue was bound, by exchange.",
    labels: &["exchange"],
    buckets: &[],
};

/// `outbox_pending`: gauge.
pub(super) const OUTBOX_PENDING: Def = Def {
    name: "toolcall_recovery_outbox_pending",
    help: "Outbox rows (publishes owed by a committed recovery or revert) not yet confirmed \
        by the broker, as of the relay's last sweep; rows whose last attempt came back \
        unroutable are in toolcall_recovery_outbox_unroutable instead.",
    labels: &[],
    buckets: &[],
};

/// `outbox_unroutable`: gauge.
pub(super) const OUTBOX_UNROUTABLE: Def = Def {
    name: "toolcall_recovery_outbox_unroutable",
    help: "Outbox rows parked because their last publish came back unroutable (no queue \
        bound to the exchange), as of the relay's last sweep; sent once a queue is bound.",
    labels: &[],
    buckets: &[],
};

/// `outbox_relayed`: counter (labelled).
pub(super) const OUTBOX_RELAYED: Def = Def {
    name: "toolcall_recovery_outbox_relayed_total",
    help: "Pending outbox rows the relay tried to send, by result (`sent`, `unroutable`: \
        no queue bound, kept pending; `failed`: broker error, kept pending).",
    labels: &["result"],
    buckets: &[],
};

/// `dead_lettered`: counter (labelled).
pub(super) const DEAD_LETTERED: Def = Def {
    name: "toolcall_recovery_dead_lettered_total",
    help: "Deliveries dead-lettered by the worker, by reason.",
    labels: &["reason"],
    buckets: &[],
};

/// `transient_errors`: counter (labelled).
pub(super) const TRANSIENT_ERRORS: Def = Def {
    name: "toolcall_recovery_transient_errors_total",
    help: "Transient failures that were retried, by dependency (database, broker).",
    labels: &["dependency"],
    buckets: &[],
};

/// `duration`: histogram.
pub(super) const DURATION: Def = Def {
    name: "toolcall_recovery_processing_duration_seconds",
    help: "Time from taking a delivery to acking it.",
    labels: &[],
    buckets: &[
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ],
};

/// `per_commit`: histogram.
pub(super) const PER_COMMIT: Def = Def {
    name: "toolcall_recovery_recoveries_per_commit",
    help: "Leaked messages the worker recovered per database commit (more than 1 when \
        leaks queue up for the database: group commit).",
    labels: &[],
    buckets: &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
};

/// `in_flight`: gauge.
pub(super) const IN_FLIGHT: Def = Def {
    name: "toolcall_recovery_in_flight_deliveries",
    help: "Deliveries taken and not yet acked.",
    labels: &[],
    buckets: &[],
};

/// `recoveries`: counter (labelled).
pub(super) const RECOVERIES: Def = Def {
    name: "toolcall_recovery_connection_recoveries_total",
    help: "Connections re-established after a loss, by dependency.",
    labels: &["dependency"],
    buckets: &[],
};

/// `backfill_progress`: gauge.
pub(super) const BACKFILL_PROGRESS: Def = Def {
    name: "toolcall_recovery_backfill_progress",
    help: "Id of the last message the backfill examined (0 when no backfill ran).",
    labels: &[],
    buckets: &[],
};

/// `broker_consuming`: gauge.
pub(super) const BROKER_CONSUMING: Def = Def {
    name: "toolcall_recovery_broker_consuming",
    help: "1 while a broker session is consuming the input queue, 0 while it is being \
        re-established (the process is up but takes no deliveries).",
    labels: &[],
    buckets: &[],
};

/// `transcript_index_ready`: gauge.
pub(super) const TRANSCRIPT_INDEX_READY: Def = Def {
    name: "toolcall_recovery_transcript_index_ready",
    help: "1 when the transcript-repair index on the app's messages table is valid, 0 when \
        it is missing or INVALID: recovery works, but each transcript repair reads the \
        chat's tool messages (the owner of messages runs `toolcall-recovery index`). \
        Looked at on start and every 5 minutes.",
    labels: &[],
    buckets: &[],
};

/// `reverts`: counter (labelled).
pub(super) const REVERTS: Def = Def {
    name: "toolcall_recovery_reverts_total",
    help: "Reverts asked through the admin API, by result (reverted, already_reverted, \
        nothing_to_revert, conflict).",
    labels: &["result"],
    buckets: &[],
};

/// `mode`: gauge (labelled).
pub(super) const MODE: Def = Def {
    name: "toolcall_recovery_mode",
    help: "1 for the configured recovery mode (recover or observe), 0 for the other.",
    labels: &["mode"],
    buckets: &[],
};

/// `family_mode`: gauge (labelled).
pub(super) const FAMILY_MODE: Def = Def {
    name: "toolcall_recovery_family_mode",
    help: "One series per detection family, value 1, labelled with what the policy does \
        with it: recover, observe, or disabled.",
    labels: &["family", "mode"],
    buckets: &[],
};

// Per model (`model` is a bounded label: the configured list + other + unknown). No
// `mode` label: a leak is the model's whatever the worker then does with it, so the rates
// stay comparable across a switch between observe and recover.

/// `messages_seen`: counter (labelled).
pub(super) const MESSAGES_SEEN: Def = Def {
    name: "toolcall_recovery_messages_seen_total",
    help: "Finalized-message events the worker processed and acked (clean or not, any \
        mode), by the model that wrote them: a configured model name, `other` or \
        `unknown` (no model_id in the event). The denominator of leak rates.",
    labels: &["model"],
    buckets: &[],
};

/// `leaked_messages`: counter (labelled).
pub(super) const LEAKED_MESSAGES: Def = Def {
    name: "toolcall_recovery_leaked_messages_total",
    help: "Finalized messages in which a recovery pass recorded a leak (in both modes), by \
        model: the numerator of leak rates. Passes that recorded nothing \
        (already_recovered, no_agent, reverted) do not count.",
    labels: &["model"],
    buckets: &[],
};

/// `leaks`: counter (labelled).
pub(super) const LEAKS: Def = Def {
    name: "toolcall_recovery_leaks_total",
    help: "Finalized messages in which a recovery pass recorded a leak, by model and leak \
        family: a message with leaks of two families counts once for each (in both \
        modes).",
    labels: &["model", "family"],
    buckets: &[],
};

/// `unrecovered`: counter (labelled).
pub(super) const UNRECOVERED: Def = Def {
    name: "toolcall_recovery_unrecovered_calls_total",
    help: "Leaked calls and result objects recovery could not fix, by model and outcome: \
        needs_review (left in the message for a person), invalid_args, \
        tool_not_enabled (observe mode: would-be outcomes).",
    labels: &["model", "outcome"],
    buckets: &[],
};

/// `in_flight_bytes`: gauge.
pub(super) const IN_FLIGHT_BYTES: Def = Def {
    name: "toolcall_recovery_in_flight_bytes",
    help: "Bytes of event bodies taken and not yet acked, waiting for the byte budget \
        (--max-in-flight-bytes) or worked on.",
    labels: &[],
    buckets: &[],
};

/// `delivery_window`: gauge.
pub(super) const DELIVERY_WINDOW: Def = Def {
    name: "toolcall_recovery_delivery_window",
    help: "Unacked deliveries the broker may push to this worker now (the prefetch, sized \
        from the bodies seen to fit --max-in-flight-bytes, at most --prefetch; 0 while it \
        pauses for room).",
    labels: &[],
    buckets: &[],
};
