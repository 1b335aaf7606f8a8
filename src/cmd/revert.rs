//! `toolcall-recovery revert`: undoes the latest recovery of one or more messages
//! ([`crate::recover::revert::revert_message`], one transaction per message) and
//! republishes each restored message for moderation. `--dry-run` shows what it would do
//! and writes nothing.
//!
//! The messages are given by id (`--message`), or by the ledger's own filters
//! (`ledger::flags::FilterArgs`: chat, family, outcome, mode, model, since, until): then it
//! reverts every message whose latest ledger row matches, page by page (keyset pagination
//! on `recoveries.id`, newest first; rows written during the run are not in it), with a
//! progress bar on a terminal, and ends with a summary.
//!
//! May depend on: `recover`, `ledger` (the filter, its flags: one parsing for `ledger` and
//! `revert`, the pages), `publish` (the publisher), `store`, `settings`, `error`,
//! `outbound`, `metrics`, `ids`, `sqlx`, `indicatif`.

use crate::error::{Error, ErrorKind, Poison};
use crate::ids::MessageId;
use crate::ledger::flags::FilterArgs;
use crate::ledger::{self, MAX_LIMIT};
use crate::metrics::Metrics;
use crate::outbound::StandIn;
use crate::publish::{PublishTarget, PublishedCounts, Publisher};
use crate::recover::revert::{
    revert_message, RevertEnvelope, RevertOutcome, RevertReport, RowFate,
};
use crate::recover::Source;
use crate::settings::{DatabaseSettings, PublishSettings};
use crate::store;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use sqlx::PgPool;
use std::io::{IsTerminal, Write};

/// Ledger rows read per page by a revert by filters, unless `--page-size` says otherwise.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// Flags of `toolcall-recovery revert`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true)
    .args(["messages", "chat_id", "family", "outcome", "mode", "model", "since", "until"])))]
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

    /// Messages to revert (repeat the flag or separate with commas). Or, instead, the
    /// ledger's filters below: every message whose latest ledger row matches them.
    #[arg(long = "message", value_delimiter = ',',
          value_parser = clap::value_parser!(i64).range(1..),
          conflicts_with_all = ["chat_id", "family", "outcome", "mode", "model", "since", "until"])]
    pub messages: Vec<i64>,

    /// Which messages, as `ledger` filters them (without `--message`): all of them are
    /// reverted, in pages, newest first.
    #[command(flatten)]
    pub filters: FilterArgs,

    /// Ledger rows read per page when reverting by filters.
    #[arg(long, hide = true, default_value_t = DEFAULT_PAGE_SIZE,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LIMIT)))]
    pub page_size: u32,

    /// Show what would be reverted (every message, and the counts); write nothing, publish
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Do not publish restored messages for moderation.
    #[arg(long)]
    pub no_publish: bool,

    /// One JSON object per message instead of text (the summary goes to stderr).
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
    /// Failed with an error of its own (not the database's or the broker's connection,
    /// which stops the run): the others are still reverted.
    pub failed: usize,
}

/// Reverts every message given, or every one the filters match; stops at the first
/// error of the database or the broker themselves (the messages before it stay reverted,
/// each in its own committed transaction).
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
    let stand_in = StandIn::by(Source::Cli);
    let mut run = Run {
        args,
        pool: &pool,
        publisher: publisher.as_ref(),
        stand_in: &stand_in,
        owed: stand_in.revert_owed(publisher.is_some()),
        out,
        bar: ProgressBar::hidden(),
        summary: RevertSummary::default(),
    };
    let bulk = run.args.messages.is_empty();
    let result = if bulk {
        run.by_filters().await
    } else {
        run.by_ids().await
    };
    run.bar.finish_and_clear();
    let summary = run.summary;
    if let Some(p) = publisher {
        p.close().await;
    }
    pool.close().await;
    if bulk || args.messages.len() > 1 {
        let text = summary.describe(args.dry_run);
        if args.json {
            eprintln!("revert: {text}");
        } else {
            line(out, &text);
        }
    }
    result.map(|()| summary)
}

/// One run of the command: what it writes with, and what it came to so far.
struct Run<'a, 'o> {
    args: &'a RevertArgs,
    pool: &'a PgPool,
    publisher: Option<&'a Publisher>,
    stand_in: &'a StandIn,
    owed: Option<&'a dyn RevertEnvelope>,
    out: &'o mut (dyn Write + Send),
    bar: ProgressBar,
    summary: RevertSummary,
}

impl Run<'_, '_> {
    /// `--message`: those, in order.
    async fn by_ids(&mut self) -> Result<(), Error> {
        for &id in &self.args.messages {
            self.one(MessageId::new(id)).await?;
        }
        Ok(())
    }

    /// The filters: counts the matches (for the bar), then reverts page by page, newest
    /// first, each page found from the last row of the one before.
    async fn by_filters(&mut self) -> Result<(), Error> {
        let mut filter = self.args.filters.filter(None, self.args.page_size);
        // A revert undoes a message's latest pass: a row with a newer one above it is not
        // what it would undo.
        filter.latest_only = true;
        let total = ledger::count(self.pool, &filter).await?;
        self.bar = progress_bar(u64::try_from(total).unwrap_or(0), self.args.json);
        loop {
            let page = ledger::matching(self.pool, &filter).await?;
            let Some(last) = page.last() else {
                return Ok(());
            };
            filter.before_id = Some(last.recovery_id);
            for row in &page {
                self.one(MessageId::new(row.message_id)).await?;
                self.bar.inc(1);
            }
            if page.len() < self.args.page_size as usize {
                return Ok(());
            }
        }
    }

    /// Reverts one message, says what came of it and counts it.
    async fn one(&mut self, id: MessageId) -> Result<(), Error> {
        let dry_run = self.args.dry_run;
        let by = self.stand_in.asker();
        let report = match revert_message(self.pool, id, by, dry_run, self.owed).await {
            Ok(r) => r,
            Err(Error::Poison(Poison::MissingMessage(_))) => {
                self.summary.refused += 1;
                let shown = missing(id, self.args.json);
                self.say(&shown);
                return Ok(());
            }
            Err(e) if e.kind() != ErrorKind::Transient => {
                // This message's own fault: said, counted, and the run goes on.
                self.summary.failed += 1;
                let shown = failed(id, &e, self.args.json);
                self.say(&shown);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let moderation = match self.publisher {
            Some(p) => Moderation::of(p.deliver(self.pool, &report.outbox).await?),
            None if self.args.no_publish && !dry_run => Moderation::Skipped,
            None => Moderation::NotAsked,
        };
        match report.outcome {
            RevertOutcome::Reverted => self.summary.reverted += 1,
            RevertOutcome::AlreadyReverted => self.summary.already_reverted += 1,
            RevertOutcome::NothingToRevert | RevertOutcome::Conflict => self.summary.refused += 1,
        }
        let shown = if self.args.json {
            let mut v = serde_json::to_value(&report).map_err(|e| Error::Bug(e.to_string()))?;
            v["published"] = json!(moderation.published());
            v.to_string()
        } else {
            describe(&report, moderation)
        };
        self.say(&shown);
        Ok(())
    }

    /// A line of the report, under the progress bar.
    fn say(&mut self, s: &str) {
        let out = &mut *self.out;
        self.bar.suspend(|| line(out, s));
    }
}

/// The bar of a revert by filters: on stderr when it is a terminal and the output is not
/// JSON; hidden otherwise.
fn progress_bar(len: u64, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} messages, eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
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
            "{} message(s): {} {reverted}, {} already reverted before, {} refused, {} failed",
            self.reverted + self.already_reverted + self.refused + self.failed,
            self.reverted,
            self.already_reverted,
            self.refused,
            self.failed
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

fn failed(id: MessageId, e: &Error, as_json: bool) -> String {
    if as_json {
        json!({"message_id": id.get(), "outcome": "failed", "reason": e.to_string()}).to_string()
    } else {
        format!("message {id}: failed: {e}; nothing reverted")
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
            failed: 1,
        };
        assert_eq!(
            s.describe(false),
            "5 message(s): 2 reverted, 1 already reverted before, 1 refused, 1 failed"
        );
        assert!(s.describe(true).contains("2 would be reverted"));
        assert_eq!(
            missing(MessageId::new(7), false),
            "message 7: not_found: no such message, nothing reverted"
        );
    }
}
