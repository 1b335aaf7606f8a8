//! What a backfill shows: one line per message that is not clean (text or JSON Lines on
//! the output), a progress bar on a terminal (stderr) or a log line every few seconds
//! otherwise, and the final [`Summary`].
//!
//! May depend on: `indicatif`, `tracing`, `model` (the label names), `recover` (the mode
//! labels), the sibling modules. No database, no broker.

use super::examine::{Examined, FAILED};
use super::transcripts::Repaired;
use crate::recover::Mode;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often progress is logged when there is no terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Failed message ids kept in the summary.
const FAILED_IDS_KEPT: usize = 100;

/// What a run did (or, dry, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Nothing was written.
    pub dry_run: bool,
    /// Candidate messages examined.
    pub examined: u64,
    /// Messages by outcome label (`clean`, `recovered`, ..., `failed`, `missing`).
    pub by_outcome: BTreeMap<String, u64>,
    /// Messages whose content changed (or would).
    pub changed: u64,
    /// Memories created (dry run: that would be) by passes in recover mode.
    pub memories_created: u64,
    /// Memories passes in observe mode would have created: recorded in the ledger, none
    /// created.
    pub memories_observed: u64,
    /// Moderation messages published and confirmed.
    pub moderation_published: u64,
    /// Forwarded calls published and confirmed.
    pub tool_calls_published: u64,
    /// Publishes left pending in the outbox (unroutable: no queue bound); a worker's relay
    /// sends them.
    pub publishes_pending: u64,
    /// The first and last message examined.
    pub first_id: Option<i64>,
    /// The last message examined; the checkpoint (real runs).
    pub last_id: Option<i64>,
    /// Ids of messages that failed (the first 100).
    pub failed_ids: Vec<i64>,
    /// Transcript repair (`--repair-transcripts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcripts: Option<Repaired>,
    /// Reached the end of its range.
    pub finished: bool,
    /// Stopped by Ctrl-C / SIGTERM.
    pub interrupted: bool,
    /// Stopped by `--limit`.
    pub limit_reached: bool,
    /// Wall time, seconds.
    pub elapsed_secs: f64,
    /// Messages below the starting point revisited because an observe-mode pass recorded
    /// them (counted in `by_outcome`, not in `examined`).
    pub revisited: u64,
    /// The examined messages by the label of the model that wrote them (`--models`;
    /// `unknown` for all of them when `messages` has no model column). Revisited messages
    /// are not in it.
    pub by_model: BTreeMap<String, ModelSummary>,
}

/// The examined messages of one model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModelSummary {
    /// Candidate messages examined (those the SQL prefilter lets through, clean or not).
    pub examined: u64,
    /// Messages in which the pass recorded a leak (or, dry, would).
    pub leaked: u64,
    /// The same by leak family: a message with leaks of two families counts once for each.
    pub leaks: BTreeMap<&'static str, u64>,
    /// Calls the pass could not fix, by outcome (`needs_review`, `invalid_args`,
    /// `tool_not_enabled`).
    pub unrecovered: BTreeMap<&'static str, u64>,
}

impl ModelSummary {
    /// Unrecovered calls over every outcome.
    pub fn unrecovered_count(&self) -> u64 {
        self.unrecovered.values().sum()
    }
}

impl Summary {
    /// Counts one examined message.
    pub fn add(&mut self, e: &Examined) {
        self.examined += 1;
        self.first_id.get_or_insert(e.message_id);
        self.last_id = Some(e.message_id);
        self.count_effects(e);
        self.count_model(e);
    }

    /// The breakdown by model. The key is allocated once per label, not per message.
    fn count_model(&mut self, e: &Examined) {
        if !self.by_model.contains_key(&*e.model) {
            self.by_model
                .insert(e.model.to_string(), ModelSummary::default());
        }
        let Some(m) = self.by_model.get_mut(&*e.model) else {
            return;
        };
        m.examined += 1;
        if let Some(r) = &e.recorded {
            m.leaked += 1;
            for family in &r.leak_families {
                *m.leaks.entry(family).or_default() += 1;
            }
            for outcome in &r.unrecovered {
                *m.unrecovered.entry(outcome).or_default() += 1;
            }
        }
    }

    /// Counts one revisited observed message (not part of the walk: ids and the
    /// checkpoint are untouched).
    pub fn add_revisited(&mut self, e: &Examined) {
        self.revisited += 1;
        self.count_effects(e);
    }

    fn count_effects(&mut self, e: &Examined) {
        *self.by_outcome.entry(e.outcome.to_string()).or_default() += 1;
        self.changed += u64::from(e.changed);
        if e.mode == Mode::Observe.as_str() {
            self.memories_observed += e.memories_created as u64;
        } else {
            self.memories_created += e.memories_created as u64;
        }
        self.moderation_published += e.published.moderation;
        self.tool_calls_published += e.published.tool_calls;
        self.publishes_pending += (e.published.unroutable + e.published.pending) as u64;
        if e.outcome == FAILED && self.failed_ids.len() < FAILED_IDS_KEPT {
            self.failed_ids.push(e.message_id);
        }
    }

    /// Messages with this outcome label.
    pub fn count(&self, outcome: &str) -> u64 {
        self.by_outcome.get(outcome).copied().unwrap_or(0)
    }
}

/// Writes the per-message lines and the summary, and shows progress.
pub struct Reporter<'a> {
    out: &'a mut (dyn Write + Send),
    json: bool,
    bar: Option<ProgressBar>,
    from_id: i64,
    last_log: Instant,
}

impl<'a> Reporter<'a> {
    /// A reporter writing to `out`; a progress bar over ids `from_id..=to_id` when stderr is
    /// a terminal.
    pub fn new(out: &'a mut (dyn Write + Send), json: bool, from_id: i64, to_id: i64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let len = u64::try_from(to_id.saturating_sub(from_id)).unwrap_or(0);
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent}% of ids, eta {eta}  {msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Reporter {
            out,
            json,
            bar,
            from_id,
            last_log: Instant::now(),
        }
    }

    /// Prints a message that is not clean.
    pub fn message(&mut self, e: &Examined) {
        if e.outcome == "clean" {
            return;
        }
        let line = if self.json {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            text_line(e)
        };
        self.write(&line);
    }

    /// Progress up to message `last_id`.
    pub fn progress(&mut self, last_id: i64, s: &Summary) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(u64::try_from(last_id.saturating_sub(self.from_id)).unwrap_or(0));
                bar.set_message(format!(
                    "examined {}  changed {}  failed {}",
                    s.examined,
                    s.changed,
                    s.count(FAILED)
                ));
            }
            None if self.last_log.elapsed() >= LOG_EVERY => {
                self.last_log = Instant::now();
                tracing::info!(
                    last_id,
                    examined = s.examined,
                    changed = s.changed,
                    failed = s.count(FAILED),
                    dry_run = s.dry_run,
                    "backfill progress"
                );
            }
            None => {}
        }
    }

    /// Prints the summary and removes the bar.
    pub fn finish(&mut self, s: &Summary) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        tracing::info!(
            examined = s.examined,
            changed = s.changed,
            last_id = s.last_id,
            finished = s.finished,
            interrupted = s.interrupted,
            dry_run = s.dry_run,
            "backfill done"
        );
        let text = if self.json {
            serde_json::json!({ "summary": s }).to_string()
        } else {
            summary_text(s)
        };
        self.write(&text);
        let _ = self.out.flush();
    }

    fn write(&mut self, line: &str) {
        let out = &mut *self.out;
        let mut print = || {
            let _ = writeln!(out, "{line}");
        };
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }
}

fn text_line(e: &Examined) -> String {
    let mut families: Vec<&str> = e.calls.iter().map(|c| c.family).collect();
    families.dedup();
    let mut tools: Vec<&str> = e.calls.iter().filter_map(|c| c.tool.as_deref()).collect();
    tools.dedup();
    let mut line = format!(
        "message {:>10}  agent {:>6}  {:<17} family={} tool={}",
        e.message_id,
        e.agent_id
            .map_or_else(|| "-".to_string(), |a| a.to_string()),
        e.outcome,
        dash_if_empty(&families.join(",")),
        dash_if_empty(&tools.join(",")),
    );
    if e.mode != "recover" {
        line.push_str(&format!(" mode={}", e.mode));
    }
    if &*e.model != crate::model::UNKNOWN {
        line.push_str(&format!(" model={}", e.model));
    }
    if let Some(detail) = e.calls.iter().find_map(|c| c.detail.as_deref()) {
        line.push_str(&format!(" detail={detail:?}"));
    }
    if let Some(p) = &e.memory_preview {
        line.push_str(&format!(" memory={p:?}"));
    }
    if let Some(err) = &e.error {
        line.push_str(&format!(" error={err:?}"));
    }
    line
}

/// One line per model, the leakiest first: examined, leaked messages (by family),
/// unrecovered calls (by outcome).
fn by_model_text(s: &Summary) -> String {
    if s.by_model.is_empty() {
        return String::new();
    }
    let would = if s.dry_run { " (would be)" } else { "" };
    let mut models: Vec<(&String, &ModelSummary)> = s.by_model.iter().collect();
    models.sort_by(|a, b| {
        (b.1.leaked, b.1.examined)
            .cmp(&(a.1.leaked, a.1.examined))
            .then_with(|| a.0.cmp(b.0))
    });
    let width = models.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut t =
        format!("  by model (examined, leaked{would} by family, unrecovered calls by outcome):\n");
    for (name, m) in models {
        t.push_str(&format!(
            "    {name:<width$}  examined {}  leaked {}{}  unrecovered {}{}\n",
            m.examined,
            m.leaked,
            breakdown(&m.leaks),
            m.unrecovered_count(),
            breakdown(&m.unrecovered),
        ));
    }
    t
}

/// ` (a 2, b 1)`, the largest first; nothing for an empty map.
fn breakdown(counts: &BTreeMap<&'static str, u64>) -> String {
    if counts.is_empty() {
        return String::new();
    }
    let mut parts: Vec<(&&str, &u64)> = counts.iter().collect();
    parts.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let parts: Vec<String> = parts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!(" ({})", parts.join(", "))
}

fn dash_if_empty(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

fn summary_text(s: &Summary) -> String {
    let mut t = format!(
        "backfill{}: examined {} message(s){} in {:.1}s{}\n",
        if s.dry_run {
            " (dry run, nothing written)"
        } else {
            ""
        },
        s.examined,
        match (s.first_id, s.last_id) {
            (Some(a), Some(b)) => format!(" (ids {a}..={b})"),
            _ => String::new(),
        },
        s.elapsed_secs,
        if s.interrupted {
            ", interrupted: run again to resume"
        } else if s.limit_reached {
            ", stopped at --limit: run again to resume"
        } else {
            ""
        },
    );
    if s.revisited > 0 {
        t.push_str(&format!(
            "  and revisited {} message(s) an observe-mode pass had recorded\n",
            s.revisited
        ));
    }
    for (outcome, n) in &s.by_outcome {
        t.push_str(&format!("  {outcome:<18} {n}\n"));
    }
    let would = if s.dry_run { " (would be)" } else { "" };
    t.push_str(&format!("  messages changed{would}: {}\n", s.changed));
    t.push_str(&format!(
        "  memories created{would}: {}\n",
        s.memories_created
    ));
    if s.memories_observed > 0 {
        t.push_str(&format!(
            "  memories observe mode would have created (none was): {}\n",
            s.memories_observed
        ));
    }
    if !s.dry_run {
        t.push_str(&format!(
            "  published: {} moderation message(s), {} tool call(s)\n",
            s.moderation_published, s.tool_calls_published
        ));
        if s.publishes_pending > 0 {
            t.push_str(&format!(
                "  pending in the outbox (unroutable; a running worker relays them): {}\n",
                s.publishes_pending
            ));
        }
    }
    t.push_str(&by_model_text(s));
    if let Some(r) = s.transcripts {
        t.push_str(&format!(
            "  transcripts repaired{would}: {} tool message(s) in {} chat(s)\n",
            r.tool_messages, r.chats
        ));
    }
    if !s.failed_ids.is_empty() {
        t.push_str(&format!("  failed message ids: {:?}\n", s.failed_ids));
    }
    t.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn examined(
        id: i64,
        model: &str,
        families: &[&'static str],
        unrecovered: &[&'static str],
    ) -> Examined {
        Examined {
            message_id: id,
            agent_id: None,
            outcome: if families.is_empty() {
                "clean"
            } else {
                "recovered"
            },
            mode: "recover",
            model: Arc::from(model),
            recorded: (!families.is_empty()).then(|| {
                Box::new(super::super::examine::Recorded {
                    leak_families: families.to_vec(),
                    unrecovered: unrecovered.to_vec(),
                })
            }),
            calls: Vec::new(),
            memory_preview: None,
            memories_created: 0,
            changed: false,
            published: crate::publish::PublishedCounts::default(),
            error: None,
        }
    }

    #[test]
    fn memories_an_observe_pass_would_create_are_not_counted_as_created() {
        let mut s = Summary::default();
        let mut observed = examined(1, "gpt-4o", &["result_prefix"], &[]);
        observed.mode = Mode::Observe.as_str();
        observed.memories_created = 3;
        s.add(&observed);
        let mut recovered = examined(2, "gpt-4o", &["result_prefix"], &[]);
        recovered.memories_created = 1;
        s.add(&recovered);
        assert_eq!((s.memories_created, s.memories_observed), (1, 3));
        let text = summary_text(&s);
        assert!(text.contains("  memories created: 1\n"), "{text}");
        assert!(
            text.contains("  memories observe mode would have created (none was): 3"),
            "{text}"
        );
    }

    #[test]
    fn the_summary_breaks_down_by_model() {
        let mut s = Summary {
            dry_run: true,
            ..Summary::default()
        };
        s.add(&examined(1, "gpt-4o", &[], &[]));
        s.add(&examined(
            2,
            "gpt-4o",
            &["hermes", "result_prefix"],
            &["invalid_args"],
        ));
        s.add(&examined(3, "gemini-2.5-flash", &["hermes"], &[]));
        s.add(&examined(
            4,
            "gemini-2.5-flash",
            &["hermes"],
            &["needs_review", "needs_review"],
        ));
        s.add(&examined(5, "unknown", &[], &[]));
        s.add_revisited(&examined(6, "gpt-4o", &["hermes"], &[]));
        let gemini = &s.by_model["gemini-2.5-flash"];
        assert_eq!(gemini.examined, 2);
        assert_eq!(gemini.leaks.get("hermes"), Some(&2));
        assert_eq!(gemini.unrecovered.get("needs_review"), Some(&2));
        assert_eq!(s.by_model["gpt-4o"].examined, 2, "revisits are not in it");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["by_model"]["gpt-4o"],
            serde_json::json!({"examined": 2, "leaked": 1, "leaks": {"hermes": 1, "result_prefix": 1}, "unrecovered": {"invalid_args": 1}})
        );
        let text = summary_text(&s);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("    ")).collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            text.contains(
                "by model (examined, leaked (would be) by family, unrecovered calls by outcome):"
            ),
            "{text}"
        );
        assert!(
            lines[0].contains("gemini-2.5-flash")
                && lines[0]
                    .contains("examined 2  leaked 2 (hermes 2)  unrecovered 2 (needs_review 2)"),
            "{text}"
        );
        assert!(
            lines[1].contains("gpt-4o")
                && lines[1].contains(
                    "leaked 1 (hermes 1, result_prefix 1)  unrecovered 1 (invalid_args 1)"
                ),
            "{text}"
        );
        assert!(
            lines[2].contains("unknown")
                && lines[2].contains("examined 1  leaked 0  unrecovered 0"),
            "{text}"
        );
    }
}
