//! `toolcall-recovery revert`: undoes the latest recovery of one or more messages
//! ([`crate::recover::revert::revert_message`], one transaction per message) and
//! republishes each restored message for moderation. `--dry-run` shows what it would do
//! and writes nothing. For a batch, feed it ids from `toolcall-recovery ledger --json`.
//!
//! May depend on: `recover`, `publish` (the publisher), `store`, `settings`, `error`,
//! `outbound`, `metrics`, `ids`.

use crate::error::{Error, Poison};
use crate::ids::MessageId;
use crate::metrics::Metrics;
use crate::outbound::StandIn;
use crate::publish::{PublishTarget, PublishedCounts, Publisher};
use crate::recover::revert::{revert_message, RevertOutcome, RevertReport, RowFate};
use crate::recover::Source;
use crate::settings::{DatabaseSettings, PublishSettings};
use crate::store;
use serde_json::json;
use std::io::Write;

/// Flags of `toolcall-recovery revert`.
#[derive(Debug, Clone, clap::Args)]
pub struct RevertArgs {
    /// The database.
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// Where restored messages are published for moderation.
    #[command(flatten)]
    pub publish: PublishSettings,

    /// Name of the command's broker connection.
    #[arg(long, default_value = "toolcall-recovery-revert")]
    pub connection_name: String,

    /// Messages to revert (repeat the flag or separate with commas).
    #[arg(long = "message", required = true, value_delimiter = ',', value_parser = clap::value_parser!(i64).range(1..))]
    pub messages: Vec<i64>,

    /// Show what would be reverted; write nothing, publish nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Do not publish restored messages for moderation.
    #[arg(long)]
    pub no_publish: bool,

    /// One JSON object per message instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How a run of `revert` went, message by message.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RevertSummary {
    /// Reverted now (or, dry, would be).
    pub reverted: usize,
    /// Reverted before.
    pub already_reverted: usize,
    /// Refused: nothing to revert, changed since recovery, or no such message.
    pub refused: usize,
}

/// Reverts every message given, in order; stops at the first database or broker error
/// (the messages before it stay reverted, each in its own committed transaction).
pub async fn run(args: &RevertArgs, out: &mut (dyn Write + Send)) -> Result<RevertSummary, Error> {
    let pool = store::connect_command(&args.database, "toolcall-recovery-revert", 1).await?;
    store::ensure_migrated(&pool, false).await?;
    // Connected before any change, so an unreachable broker stops the run first.
    let publisher = if args.dry_run || args.no_publish {
        None
    } else {
        // A one-off command serves no /metrics: what it publishes is counted nowhere.
        let p = Publisher::new(
            PublishTarget::from_settings(&args.publish, &args.connection_name),
            std::sync::Arc::new(Metrics::new()),
        );
        p.connect().await?;
        Some(p)
    };
    let mut summary = RevertSummary::default();
    let stand_in = StandIn::by(Source::Cli);
    let owed = stand_in.revert_owed(publisher.is_some());
    let result = async {
        for &id in &args.messages {
            let id = MessageId::new(id);
            let report = match revert_message(&pool, id, stand_in.asker(), args.dry_run, owed).await
            {
                Ok(r) => r,
                Err(Error::Poison(Poison::MissingMessage(_))) => {
                    summary.refused += 1;
                    line(out, &missing(id, args.json));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let moderation = match &publisher {
                Some(p) => Moderation::of(p.deliver(&pool, &report.outbox).await?),
                None if args.no_publish && !args.dry_run => Moderation::Skipped,
                None => Moderation::NotAsked,
            };
            match report.outcome {
                RevertOutcome::Reverted => summary.reverted += 1,
                RevertOutcome::AlreadyReverted => summary.already_reverted += 1,
                RevertOutcome::NothingToRevert | RevertOutcome::Conflict => summary.refused += 1,
            }
            let shown = if args.json {
                let mut v = serde_json::to_value(&report).map_err(|e| Error::Bug(e.to_string()))?;
                v["published"] = json!(moderation.published());
                v.to_string()
            } else {
                describe(&report, moderation)
            };
            line(out, &shown);
        }
        Ok(())
    }
    .await;
    if let Some(p) = publisher {
        p.close().await;
    }
    pool.close().await;
    if !args.json && args.messages.len() > 1 {
        line(out, &summary.describe(args.dry_run));
    }
    result.map(|()| summary)
}

impl RevertSummary {
    /// The last line of a text run over several messages: how many came to what.
    fn describe(&self, dry_run: bool) -> String {
        let reverted = if dry_run {
            "would be reverted"
        } else {
            "reverted"
        };
        format!(
            "{} message(s): {} {reverted}, {} already reverted before, {} refused",
            self.reverted + self.already_reverted + self.refused,
            self.reverted,
            self.already_reverted,
            self.refused
        )
    }
}

/// What became of the restored message's moderation publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moderation {
    /// Confirmed by the broker.
    Published,
    /// Written to the outbox but not confirmed (no queue bound, or the broker failed): the
    /// worker's relay sends it.
    Pending,
    /// Confirmed by the broker and returned: no queue is bound to the moderation exchange.
    /// Parked in the outbox; the worker's relay sends it once a queue is bound.
    Unroutable,
    /// Nothing was owed (a refused revert, or one already published before).
    NothingOwed,
    /// `--no-publish`.
    Skipped,
    /// A dry run publishes nothing.
    NotAsked,
}

impl Moderation {
    fn of(counts: PublishedCounts) -> Self {
        if counts.moderation > 0 {
            Moderation::Published
        } else if counts.pending == 0 && counts.unroutable > 0 {
            Moderation::Unroutable
        } else if counts.unroutable + counts.pending > 0 {
            Moderation::Pending
        } else {
            Moderation::NothingOwed
        }
    }

    /// The `published` field of `--json`: moderation messages confirmed (0 or 1).
    fn published(self) -> u64 {
        u64::from(self == Moderation::Published)
    }
}

fn missing(id: MessageId, as_json: bool) -> String {
    if as_json {
        json!({"message_id": id.get(), "outcome": "not_found",
               "reason": format!("message {id} not found")})
        .to_string()
    } else {
        format!("message {id}: not_found: no such message, nothing reverted")
    }
}

/// The report goes to stdout; like the backfill's, a closed stdout does not stop the run
/// (every revert is in the ledger).
fn line(out: &mut (dyn Write + Send), s: &str) {
    let _ = writeln!(out, "{s}");
}

/// One line of text about a revert: what was restored, what was deleted or kept (counted,
/// with the ids in parentheses, so an id never reads as a count), what moderation got.
fn describe(r: &RevertReport, moderation: Moderation) -> String {
    let row = r.recovery_id.map_or("-".to_string(), |i| i.to_string());
    let mut s = match r.outcome {
        RevertOutcome::Reverted if r.dry_run => format!(
            "message {}: would revert ledger row {row}: would restore its content and \
             tools_used{}; nothing written (dry run)",
            r.message_id,
            fates(r, true)
        ),
        RevertOutcome::Reverted => format!(
            "message {}: reverted ledger row {row}: restored its content and tools_used{}",
            r.message_id,
            fates(r, false)
        ),
        outcome => format!(
            "message {}: {}: {}",
            r.message_id,
            outcome.as_str(),
            r.reason.as_deref().unwrap_or("nothing changed")
        ),
    };
    s.push_str(match (moderation, r.outcome) {
        (Moderation::Published, RevertOutcome::Reverted) => "; published for moderation",
        (Moderation::Published, _) => "; the restored message was published for moderation again",
        (Moderation::Pending, _) => {
            "; its moderation publish is pending in the outbox (not confirmed now; the \
             worker's relay sends it)"
        }
        (Moderation::Unroutable, _) => {
            "; its moderation publish came back unroutable: no queue is bound to the \
             moderation exchange; it waits in the outbox, and the worker's relay sends it \
             once one is"
        }
        (Moderation::Skipped, RevertOutcome::Reverted) => "; not published (--no-publish)",
        _ => "",
    });
    s
}

/// `; deleted 1 memory (id 31) and 1 tool message (id 32); kept 1 memory the app edited
/// since (id 33)`: what the revert did, or would do, to the rows the recovery created.
fn fates(r: &RevertReport, dry: bool) -> String {
    let verb = |now: &'static str, would: &'static str| if dry { would } else { now };
    let mut parts = Vec::new();
    let deleted = [
        counted(&r.memories, "deleted", "memory", "memories"),
        counted(&r.tool_messages, "deleted", "tool message", "tool messages"),
    ];
    let deleted: Vec<String> = deleted.into_iter().flatten().collect();
    if deleted.is_empty() {
        parts.push(format!(
            "{} no memory or tool message",
            verb("deleted", "would delete")
        ));
    } else {
        parts.push(format!(
            "{} {}",
            verb("deleted", "would delete"),
            deleted.join(" and ")
        ));
    }
    if let Some(kept) = counted(&r.memories, "kept_edited", "memory", "memories") {
        parts.push(format!(
            "{} {kept} the app edited since",
            verb("kept", "would keep")
        ));
    }
    let gone = [
        counted(&r.memories, "gone", "memory", "memories"),
        counted(&r.tool_messages, "gone", "tool message", "tool messages"),
    ];
    let gone: Vec<String> = gone.into_iter().flatten().collect();
    if !gone.is_empty() {
        parts.push(format!("{} already gone", gone.join(" and ")));
    }
    parts.iter().map(|p| format!("; {p}")).collect()
}

/// `2 memories (ids 31, 35)`, or `None` when no row met `fate`.
fn counted(rows: &[RowFate], fate: &str, one: &str, many: &str) -> Option<String> {
    let ids: Vec<String> = rows
        .iter()
        .filter(|f| f.fate == fate)
        .map(|f| f.id.to_string())
        .collect();
    match ids.len() {
        0 => None,
        1 => Some(format!("1 {one} (id {})", ids[0])),
        n => Some(format!("{n} {many} (ids {})", ids.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ChatId;

    fn report(
        outcome: RevertOutcome,
        dry_run: bool,
        memories: &[(i64, &'static str)],
    ) -> RevertReport {
        RevertReport {
            message_id: MessageId::new(4567),
            chat_id: ChatId::new(89),
            agent_id: None,
            outcome,
            reason: None,
            recovery_id: Some(12),
            memories: memories
                .iter()
                .map(|&(id, fate)| RowFate { id, fate })
                .collect(),
            tool_messages: vec![RowFate {
                id: 32,
                fate: "deleted",
            }],
            dry_run,
            restored: true,
            content: None,
            tools_used: Vec::new(),
            outbox: Vec::new(),
        }
    }

    #[test]
    fn a_revert_line_counts_rows_and_names_their_ids_as_ids() {
        let r = report(
            RevertOutcome::Reverted,
            false,
            &[(3, "deleted"), (4, "deleted"), (9, "kept_edited")],
        );
        assert_eq!(
            describe(&r, Moderation::Published),
            "message 4567: reverted ledger row 12: restored its content and tools_used; \
             deleted 2 memories (ids 3, 4) and 1 tool message (id 32); kept 1 memory (id 9) \
             the app edited since; published for moderation"
        );
    }

    #[test]
    fn a_dry_run_says_would_and_that_nothing_was_written() {
        let r = report(RevertOutcome::Reverted, true, &[(3, "gone")]);
        assert_eq!(
            describe(&r, Moderation::NotAsked),
            "message 4567: would revert ledger row 12: would restore its content and \
             tools_used; would delete 1 tool message (id 32); 1 memory (id 3) already gone; \
             nothing written (dry run)"
        );
    }

    #[test]
    fn a_publish_left_in_the_outbox_or_skipped_is_said() {
        let r = report(RevertOutcome::Reverted, false, &[]);
        assert!(describe(&r, Moderation::Pending).ends_with(
            "its moderation publish is pending in the outbox (not confirmed now; the worker's \
             relay sends it)"
        ));
        assert!(describe(&r, Moderation::Unroutable).ends_with(
            "came back unroutable: no queue is bound to the moderation exchange; it waits in \
             the outbox, and the worker's relay sends it once one is"
        ));
        assert!(describe(&r, Moderation::Skipped).ends_with("; not published (--no-publish)"));
        let mut refused = report(RevertOutcome::Conflict, false, &[]);
        refused.reason = Some("the message changed since recovery".into());
        assert_eq!(
            describe(&refused, Moderation::NothingOwed),
            "message 4567: conflict: the message changed since recovery"
        );
    }

    #[test]
    fn several_messages_end_with_what_each_came_to() {
        let s = RevertSummary {
            reverted: 2,
            already_reverted: 1,
            refused: 1,
        };
        assert_eq!(
            s.describe(false),
            "4 message(s): 2 reverted, 1 already reverted before, 1 refused"
        );
        assert!(s.describe(true).contains("2 would be reverted"));
        assert_eq!(
            missing(MessageId::new(7), false),
            "message 7: not_found: no such message, nothing reverted"
        );
    }
}
