//! What a backfill shows: one line per message that is not clean (text or JSON Lines on
//! the output), a progress bar on a terminal (stderr) or a log line every few seconds
//! otherwise, and the final [`Summary`].
//!
//! May depend on: `indicatif`, `tracing`, `model` (the label names), the sibling modules.
//! No database, no broker.

use super::examine::{Examined, FAILED};
use super::summary::{ModelSummary, Summary};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often progress is logged when there is no terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);
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
    use crate::recover::Mode;
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
