//! `toolcall-recovery revert`: undoes the latest recovery of one or more messages
//! ([`crate::recover::revert::revert_message`], one transaction per message) and
//! republishes each restored message for moderation. `--dry-run` shows what it would do
//! and writes nothing. For a batch, feed it ids from `toolcall-recovery ledger --json`.
//!
//! May depend on: `recover`, `publish` (the publisher), `store`, `settings`,
//! `error`.

use crate::error::{Error, Poison};
use crate::ids::MessageId;
use crate::metrics::Metrics;
use crate::outbound::StandIn;
use crate::publish::{PublishTarget, Publisher};
use crate::recover::outbox::Envelope;
use crate::recover::revert::{revert_with_outbox, RevertOutcome, RevertReport, RevertedBy};
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
    let result = async {
        for &id in &args.messages {
            let id = MessageId::new(id);
            let envelope = StandIn { origin: "cli" };
            let owed = publisher.as_ref().map(|_| &envelope as &dyn Envelope);
            let report =
                match revert_with_outbox(&pool, id, RevertedBy::Cli, args.dry_run, owed).await {
                    Ok(r) => r,
                    Err(Error::Poison(Poison::MissingMessage(_))) => {
                        summary.refused += 1;
                        line(out, &missing(id));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
            let mut published = 0;
            if let Some(p) = &publisher {
                published = p.deliver(&pool, &report.outbox).await?.moderation;
            }
            match report.outcome {
                RevertOutcome::Reverted => summary.reverted += 1,
                RevertOutcome::AlreadyReverted => summary.already_reverted += 1,
                RevertOutcome::NothingToRevert | RevertOutcome::Conflict => summary.refused += 1,
            }
            let shown = if args.json {
                let mut v = serde_json::to_value(&report).map_err(|e| Error::Bug(e.to_string()))?;
                v["published"] = json!(published);
                v.to_string()
            } else {
                describe(&report, published)
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
    result.map(|()| summary)
}

fn missing(id: MessageId) -> String {
    json!({"message_id": id.get(), "outcome": "not_found",
           "reason": format!("message {id} not found")})
    .to_string()
}

/// The report goes to stdout; like the backfill's, a closed stdout does not stop the run
/// (every revert is in the ledger).
fn line(out: &mut (dyn Write + Send), s: &str) {
    let _ = writeln!(out, "{s}");
}

/// One line of text about a revert.
fn describe(r: &RevertReport, published: u64) -> String {
    let ids = |fates: &[crate::recover::revert::RowFate], fate: &str| -> String {
        let ids: Vec<String> = fates
            .iter()
            .filter(|f| f.fate == fate)
            .map(|f| f.id.to_string())
            .collect();
        ids.join(",")
    };
    let row = r.recovery_id.map_or("-".to_string(), |i| i.to_string());
    match r.outcome {
        RevertOutcome::Reverted => {
            let verb = if r.dry_run {
                "would revert"
            } else {
                "reverted"
            };
            let mut s = format!("message {}: {verb} ledger row {row}", r.message_id);
            for (what, fates, fate) in [
                ("memories deleted", &r.memories, "deleted"),
                ("memories kept (edited since)", &r.memories, "kept_edited"),
                ("memories already gone", &r.memories, "gone"),
                ("tool messages deleted", &r.tool_messages, "deleted"),
                ("tool messages already gone", &r.tool_messages, "gone"),
            ] {
                let listed = ids(fates, fate);
                if !listed.is_empty() {
                    s.push_str(&format!("; {what}: {listed}"));
                }
            }
            if published > 0 {
                s.push_str("; published for moderation");
            }
            s
        }
        _ => {
            let mut s = format!(
                "message {}: {}: {}",
                r.message_id,
                r.outcome.as_str(),
                r.reason.as_deref().unwrap_or("")
            );
            if published > 0 {
                s.push_str("; the restored message was published for moderation again");
            }
            s
        }
    }
}
