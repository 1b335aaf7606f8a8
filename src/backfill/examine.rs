//! One candidate message: a detection scan with the agent's tools decides whether the
//! recovery transaction is needed at all (no database work for the many rows the SQL
//! prefilter lets through that hold no leak); then the recovery pass runs (through the group
//! committer), or, in a dry run, the same pass rolled back ([`recover::what_if`]). Nothing here decides
//! what recovery does: that is `recover`'s alone.
//!
//! Each examined message carries its model's label (`model`, from the page's model column)
//! and the leaks and unrecovered calls its pass recorded, for the summary's breakdown by
//! model: the same counts the worker's per-model metrics make.
//!
//! May depend on: `recover`, `publish`, `metrics`, `model`, `ids`, `retry`, `shutdown`,
//! `error`, the sibling modules, `outbound`, `sqlx`, `tokio`.

use super::candidates::{Candidate, ModelColumn};
use crate::error::{Error, ErrorKind, Poison};
use crate::ids::{MessageId, ModelId};
use crate::metrics::{Metrics, UNRECOVERED_OUTCOMES};
use crate::model::Models;
use crate::outbound::StandIn;
use crate::publish::{PublishedCounts, Publisher};
use crate::recover::committer::Committer;
use crate::recover::{self, CallReport, Mode, Outcome, Policy, Report, Request, Source};
use crate::retry;
use crate::shutdown::Shutdown;
use backon::Retryable;
use serde::{Serialize, Serializer};
use serde_json::Value;
use sqlx::PgPool;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::Semaphore;
use toolcall_detect::{Config, Detection, Input};

/// Longest memory preview printed, in characters.
pub const PREVIEW_CHARS: usize = 100;
/// Attempts at a transient failure before the run gives up (its checkpoint keeps what
/// was done).
const ATTEMPTS: usize = 6;

/// Outcome label of a message whose recovery failed for good (logged, counted, skipped).
pub use crate::recover::FAILED;
/// Outcome label of a message deleted between the page read and its recovery.
pub const MISSING: &str = "missing";

/// Detection with the agent's tools, when it finds a leak (only then does recovery have
/// anything to do; a clean detection makes recovery a no-op).
pub fn leaks(c: &Candidate, config: &Config) -> Option<Detection> {
    if !toolcall_detect::might_leak(&c.content) {
        return None;
    }
    let input = Input {
        content: &c.content,
        tools_used: &c.tools_used,
        enabled_tools: &c.enabled_tools,
    };
    Some(toolcall_detect::detect(&input, config)).filter(|d| !d.is_clean())
}

/// One call of an examined message, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct CallLine {
    /// The leak's family.
    pub family: &'static str,
    /// The call's name, or the known tool of a result object.
    pub tool: Option<String>,
    /// What recovery did (or would do) with it.
    pub outcome: &'static str,
    /// Why, for the error outcomes.
    pub detail: Option<String>,
}

/// What happened (or would happen) to one message.
#[derive(Debug, Clone, Serialize)]
pub struct Examined {
    /// The message.
    pub message_id: i64,
    /// Its agent.
    pub agent_id: Option<i64>,
    /// The message-level outcome label (or `failed`, `missing`).
    pub outcome: &'static str,
    /// `recover`, or `observe` when the pass only recorded what it would do.
    pub mode: &'static str,
    /// The label of the model that wrote it (`--models`; `unknown` without a model
    /// column).
    #[serde(serialize_with = "shared_str")]
    pub model: Arc<str>,
    /// What the pass recorded, for the summary by model (None: nothing, as for every
    /// clean message; boxed, so the many clean ones waiting in the walk's window stay
    /// small).
    #[serde(skip)]
    pub recorded: Option<Box<Recorded>>,
    /// Per call.
    pub calls: Vec<CallLine>,
    /// The memory a save_memory call creates, cut to [`PREVIEW_CHARS`] characters.
    pub memory_preview: Option<String>,
    /// Memories created (or that would be).
    pub memories_created: usize,
    /// Whether the content changed (or would).
    pub changed: bool,
    /// What was published for it.
    #[serde(skip)]
    pub published: PublishedCounts,
    /// The error, for `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The leaks and unrecovered calls a pass recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The family of each leak, once per family (as the worker's
    /// `toolcall_recovery_leaks_total` counts).
    pub leak_families: Vec<&'static str>,
    /// The outcome of each call the pass could not fix (`needs_review`, `invalid_args`,
    /// `tool_not_enabled`).
    pub unrecovered: Vec<&'static str>,
}

fn shared_str<S: Serializer>(s: &Arc<str>, to: S) -> Result<S::Ok, S::Error> {
    to.serialize_str(s)
}

impl Examined {
    fn bare(c: &Candidate, outcome: &'static str, mode: Mode, model: Arc<str>) -> Self {
        Examined {
            message_id: c.id,
            agent_id: c.agent_id,
            outcome,
            mode: mode.as_str(),
            model,
            recorded: None,
            calls: Vec::new(),
            memory_preview: None,
            memories_created: 0,
            changed: false,
            published: PublishedCounts::default(),
            error: None,
        }
    }

    fn from_report(c: &Candidate, report: &Report, detection: &Detection, model: Arc<str>) -> Self {
        let mut e = Examined::bare(c, report.outcome.as_str(), report.mode, model);
        e.calls = report.calls.iter().map(call_line).collect();
        if !report.calls.is_empty() {
            let mut recorded = Recorded::default();
            for call in &report.calls {
                let family = call.family.as_str();
                if !recorded.leak_families.contains(&family) {
                    recorded.leak_families.push(family);
                }
                let outcome = call.outcome.as_str();
                if UNRECOVERED_OUTCOMES.contains(&outcome) {
                    recorded.unrecovered.push(outcome);
                }
            }
            e.recorded = Some(Box::new(recorded));
        }
        if e.calls.is_empty() {
            // `no_agent`, `already_recovered`: recovery ran no call; show what was seen.
            e.calls = detected_lines(detection, report.outcome);
        }
        e.memory_preview = report.calls.iter().find_map(memory_preview);
        e.memories_created = report.memories_created;
        e.changed = report.content_changed();
        e
    }
}

fn call_line(c: &CallReport) -> CallLine {
    CallLine {
        family: c.family.as_str(),
        tool: c.name.clone().or_else(|| {
            (c.tool_label != "none" && c.tool_label != "other").then(|| c.tool_label.clone())
        }),
        outcome: c.outcome.as_str(),
        detail: c.detail.clone(),
    }
}

fn detected_lines(d: &Detection, outcome: Outcome) -> Vec<CallLine> {
    d.leaks
        .iter()
        .map(|l| CallLine {
            family: l.family.as_str(),
            tool: l.calls.first().map(|c| c.name.clone()),
            outcome: outcome.as_str(),
            detail: None,
        })
        .collect()
}

fn memory_preview(c: &CallReport) -> Option<String> {
    if c.name.as_deref() != Some(recover::SAVE_MEMORY) {
        return None;
    }
    let content = c
        .arguments
        .as_ref()?
        .get("content")
        .and_then(Value::as_str)?;
    Some(recover::preview(content.trim(), PREVIEW_CHARS))
}

/// How the leaks' passes of a run go to the database. The window of candidates examined
/// ahead is wider than either bound, since most candidates cost a detection scan and no
/// database work.
pub enum Passes {
    /// `--dry-run`: each pass in a transaction of its own, rolled back, publishing nothing;
    /// at most `--concurrency` at once.
    DryRun(Semaphore),
    /// A real run: through the run's committer (`--concurrency` transactions at once, up to
    /// `--recoveries-per-commit` each). The publishes after them are bounded by the walk's
    /// leaks in flight and mark their rows sent through the publisher's marker, not the
    /// pool.
    Commit(Committer<StandIn>),
}

/// Everything examining a message needs.
pub struct Examiner {
    /// The backfill's own pool.
    pub pool: PgPool,
    /// The recovery policy.
    pub policy: Policy,
    /// How a leak's pass runs: rolled back, or committed.
    pub passes: Passes,
    /// Where recovered messages are published (None: `--no-publish` or dry run).
    pub publisher: Option<Arc<Publisher>>,
    /// The run's metrics.
    pub metrics: Arc<Metrics>,
    /// Cuts retry waits short on Ctrl-C.
    pub stop: Shutdown,

    /// Where the pages read the model that wrote a message.
    pub model_column: ModelColumn,
    /// The model labels (`--models`).
    pub models: Models,
}

impl Examiner {
    /// Examines one candidate. An error is fatal for the run (a dependency stayed down
    /// through the retries); a message that can never be recovered comes back as `failed`.
    pub async fn examine(&self, c: Candidate) -> Result<Examined, Error> {
        let detection = leaks(&c, &self.policy.detect);
        self.examine_detected(c, detection).await
    }

    /// [`Self::examine`] for a caller that already ran [`leaks`] on the candidate (the walk
    /// does, to choose where the examination runs): detection is not run twice.
    pub async fn examine_detected(
        &self,
        c: Candidate,
        detection: Option<Detection>,
    ) -> Result<Examined, Error> {
        let model = self
            .models
            .shared_name(self.models.label(c.model.as_deref()));
        let Some(detection) = detection else {
            return Ok(Examined::bare(
                &c,
                Outcome::Clean.as_str(),
                self.policy.mode,
                model,
            ));
        };
        let id = MessageId::new(c.id);
        let model_id = c.model.as_deref().and_then(ModelId::parse);
        let report = match self.retrying(|| self.recover(id, &model_id)).await {
            Ok(r) => r,
            Err(Error::Poison(Poison::MissingMessage(_))) => {
                return Ok(Examined::bare(&c, MISSING, self.policy.mode, model));
            }
            Err(e) if e.is_transient() => return Err(e),
            Err(e) => {
                // A bug of ours is an ERROR; the message's own fault (data the database
                // refuses, say) is the message's, as a dead-letter is for the worker.
                if e.kind() == ErrorKind::Bug {
                    tracing::error!(message_id = c.id, error = %e, "recovery failed; message skipped");
                } else {
                    tracing::warn!(message_id = c.id, error = %e, "recovery failed; message skipped");
                }
                let mut failed = Examined::bare(&c, FAILED, self.policy.mode, model);
                failed.error = Some(e.to_string());
                return Ok(failed);
            }
        };
        let mut examined = Examined::from_report(&c, &report, &detection, model);
        if matches!(self.passes, Passes::Commit(_)) {
            self.metrics.recovery_pass(
                report.mode.as_str(),
                report.call_labels(),
                report.memories_created,
            );
            if let Some(publisher) = &self.publisher {
                examined.published = self
                    .retrying(|| publisher.deliver(&self.pool, &report.outbox))
                    .await
                    .inspect_err(|e| {
                        // The run ends on it, and says so at ERROR: this is the cause.
                        tracing::warn!(message_id = c.id, recovery_id = report.recovery_id, error = %e,
                            "recovered; its publishes stay pending in the outbox (a worker's relay sends them)");
                    })?;
            }
        }
        Ok(examined)
    }

    async fn recover(&self, id: MessageId, model: &Option<ModelId>) -> Result<Report, Error> {
        let source = Source::Backfill {
            model: model.clone(),
        };
        match &self.passes {
            Passes::DryRun(at_once) => {
                // A closed semaphore cannot happen (it is never closed), and would only
                // mean running without the bound.
                let _permit = at_once.acquire().await.ok();
                recover::what_if(&self.pool, &self.policy, Request::new(id, source)).await
            }
            Passes::Commit(committer) => {
                let owed = self.publisher.as_ref().map(|_| StandIn::by(source.clone()));
                committer.recover(id, source, owed).await
            }
        }
    }

    /// `f` with retries of transient failures, a few times, shortened by Ctrl-C.
    pub async fn retrying<T, F, Fut>(&self, f: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let stop = self.stop.clone();
        let mut retries = 0u32;
        f.retry(retry::policy().with_max_times(ATTEMPTS))
            .sleep(retry::sleeper(self.stop.clone()))
            .when(move |e: &Error| e.is_transient() && !stop.is_shutdown())
            .notify(|e: &Error, after| {
                self.metrics.transient_error(dependency(e));
                // One WARN per fault, not one per retry: the retries after the first are
                // counted in the metric, and a fault that outlasts them ends the run.
                retries += 1;
                if retries == 1 {
                    tracing::warn!(error = %e, retry_in = ?after, "transient failure; retrying");
                } else {
                    tracing::debug!(error = %e, retry_in = ?after, retries, "still failing; retrying");
                }
            })
            .await
    }
}

fn dependency(e: &Error) -> &'static str {
    match e {
        Error::Database(_) => "database",
        _ => "broker",
    }
}
