//! The decision of a pass from what it read, before any effect: the report of a pass that
//! does nothing yet, re-detection on the content as stored with the agent's real tools,
//! and whether the message is clean, reverted, done before, or to pass through the
//! recovery table (`plan.rs`), all in [`step`], the one list of those steps for the pass
//! carried out and the pass described. Pure: a batch decides every message first, then
//! carries the decisions out together.
//!
//! May depend on: the parent `recover` (ledger rows, report types, policy), `ids`,
//! `toolcall_detect`. No I/O.

use super::ledger::{self, PrevRecovery};
use super::load::{Context, MessageRow};
use super::plan::{self, Planned};
use super::{string_entries, ForwardedCall, Mode, Outcome, Policy, Report, Source};
use crate::ids::{AgentId, ChatId, MessageId};
use serde_json::Value;
use toolcall_detect::{Config, Detection, Input};

/// What a pass reads after the message row: the content it works on, the agent's tools,
/// the latest ledger row, and whether the content is one an applied pass started from.
pub(super) struct Loaded {
    pub(super) content: String,
    pub(super) tools_used: Vec<String>,
    pub(super) enabled_tools: Vec<String>,
    pub(super) prev: Option<PrevRecovery>,
    pub(super) replayed: Option<i64>,
}

impl Loaded {
    pub(super) fn new(content: String, tools_used: Vec<String>, context: Context) -> Loaded {
        Loaded {
            content,
            tools_used,
            enabled_tools: context.enabled_tools,
            prev: context.prev,
            replayed: context.replayed,
        }
    }
}

/// The report of a pass that does nothing yet, and, for a message that can hold a leak (an
/// assistant's, with content), that content and its `tools_used` for the pass to go on
/// with. The report's summary is written when the pass knows its outcome.
pub(super) fn start(row: &MessageRow, policy: &Policy) -> (Report, Option<(String, Vec<String>)>) {
    let tools_used = string_entries(&row.tools_used);
    let mut report = Report {
        message_id: MessageId::new(row.id),
        chat_id: ChatId::new(row.chat_id),
        agent_id: row.agent_id.map(AgentId::new),
        outcome: Outcome::Clean,
        mode: policy.mode,
        calls: Vec::new(),
        content: row.content.clone(),
        tools_used: tools_used.clone(),
        recovery_id: None,
        summary: Value::Null,
        forward: Vec::new(),
        repaired_tool_messages: Vec::new(),
        memories_created: 0,
        outbox: Vec::new(),
    };
    match (&row.role[..], &row.content) {
        ("assistant", Some(c)) => (report, Some((c.clone(), tools_used))),
        _ => {
            done(&mut report);
            (report, None)
        }
    }
}

/// A pass that ends with `report` as it is: its summary.
fn done(report: &mut Report) -> Verdict {
    report.summary = ledger::summary_of(report.outcome, report.mode, &[], 0);
    Verdict::Done
}

/// What a pass will do, decided from what it read; `report` is completed for the cases
/// that end here (`Done`).
pub(super) enum Decision {
    /// Nothing to do (clean, reverted, no agent): `report` says which.
    Done,
    /// A pass did the work before.
    AlreadyRecovered(PrevRecovery),
    /// Run the recovery table on this detection as `planned`; `replayed`: the ledger row
    /// whose calls already ran on this very content (then the detection is strip-only).
    Pass {
        detection: Detection,
        replayed: Option<i64>,
        planned: Vec<Planned>,
    },
}

/// The steps of every pass after its reads, written once for the pass carried out
/// (`batch.rs`) and the pass described (the diagnosis, `dry_run.rs`): re-detection on the
/// content as stored with the agent's real tools (shown to `seen`, for the diagnosis),
/// the decision, and for a pass through the recovery table its plan (`plan.rs`).
pub(super) fn step(
    report: &mut Report,
    loaded: &Loaded,
    policy: &Policy,
    source: &Source,
    seen: impl FnOnce(&Detection),
) -> Decision {
    let detection = detect_with(loaded, &policy.detect);
    seen(&detection);
    match decide(report, loaded, detection, policy, source) {
        Verdict::Done => Decision::Done,
        Verdict::AlreadyRecovered(prev) => Decision::AlreadyRecovered(prev),
        Verdict::Pass {
            detection,
            replayed,
        } => {
            let planned = plan::plan(&detection, &loaded.enabled_tools, &policy.detect);
            Decision::Pass {
                detection,
                replayed,
                planned,
            }
        }
    }
}

/// The decision before its plan.
enum Verdict {
    Done,
    AlreadyRecovered(PrevRecovery),
    Pass {
        detection: Detection,
        replayed: Option<i64>,
    },
}

fn decide(
    report: &mut Report,
    loaded: &Loaded,
    mut detection: Detection,
    policy: &Policy,
    source: &Source,
) -> Verdict {
    let prev = loaded.prev.clone();
    if detection.is_clean() {
        return match prev.filter(|p| p.applied()) {
            Some(prev) => Verdict::AlreadyRecovered(prev),
            None => done(report),
        };
    }
    if let Some(prev) = &prev {
        if prev.reverted && !matches!(source, Source::Admin) {
            report.outcome = Outcome::Reverted;
            return done(report);
        }
    }
    let mode = policy.pass_mode(&detection);
    report.mode = mode;
    // The content is exactly what a pass left (cleaned text, a message kept for review),
    // or what an observe-mode pass already recorded: nothing new to do or to record.
    if let Some(prev) = prev {
        let content = Some(loaded.content.as_str());
        let left_by_applied = prev.applied() && prev.content_after.as_deref() == content;
        let seen_by_observer = mode == Mode::Observe
            && prev.mode == Mode::Observe
            && !prev.reverted
            && prev.content_before.as_deref() == content;
        if left_by_applied || seen_by_observer {
            return Verdict::AlreadyRecovered(prev);
        }
    }
    // The content is what an applied pass found before it cleaned it: the app wrote the old
    // text back (a full-row save of a stale copy). That pass's calls ran; running them again
    // would save every memory twice. The markup is stripped (and recorded) only.
    if loaded.replayed.is_some() {
        detection.strip_only = true;
    }
    if !detection.strip_only && report.agent_id.is_none() {
        report.outcome = Outcome::NoAgent;
        return done(report);
    }
    Verdict::Pass {
        detection,
        replayed: loaded.replayed,
    }
}

fn detect_with(loaded: &Loaded, config: &Config) -> Detection {
    toolcall_detect::detect(
        &Input {
            content: &loaded.content,
            tools_used: &loaded.tools_used,
            enabled_tools: &loaded.enabled_tools,
        },
        config,
    )
}

/// A pass already did the work: report it, republishing the same summary for the same
/// source event and the same forwarded calls (`forward`, read from that pass's ledger
/// items; their ids are stable, consumers dedupe).
pub(super) fn already_recovered(
    report: &mut Report,
    prev: PrevRecovery,
    source: &Source,
    forward: Vec<ForwardedCall>,
) {
    report.outcome = Outcome::AlreadyRecovered;
    report.mode = prev.mode;
    report.recovery_id = Some(prev.id);
    report.summary = match (prev.event_id, source.event_id()) {
        (Some(a), Some(b)) if a == b => prev.summary,
        _ => ledger::summary_of(Outcome::AlreadyRecovered, prev.mode, &[], 0),
    };
    if prev.mode == Mode::Recover {
        report.forward = forward;
    }
}
