//! Dry runs: what recovery would do to a message now, without committing anything.
//!
//! - [`what_if`]: the pass itself in a transaction that is rolled back (the backfill's
//!   `--dry-run`): exactly what a real run would do, at the cost of the real run's row
//!   locks and writes, undone.
//! - [`diagnose`]: the admin API's `GET .../diagnosis`: the same decision and plan
//!   (`decide`, `plan.rs`) on the message as read, in a READ ONLY transaction. It locks
//!   nothing beyond what a read takes and writes nothing, so no trigger of the app fires.
//!   Only what the database alone decides is missing: ids it would draw, and an insert it
//!   would refuse.
//!
//! May depend on: the rest of `recover`, `ids`, `error`, `toolcall_detect`, `sqlx`.

use super::pass::{self, Effects};
use super::{
    already_recovered, decide, detect_with, load_message, plan, recover_in, save_memory, start,
    Decision, Policy, Report, Source, READ_MESSAGE,
};
use crate::error::{Error, Poison};
use crate::ids::MessageId;
use sqlx::PgPool;
use toolcall_detect::Detection;

/// What recovery does to a message without committing: the transaction body of
/// [`super::recover_message`] in a transaction that is rolled back. Row locks are held
/// only for its length; identity values it drew are not given back (gaps in ids).
pub async fn what_if(
    pool: &PgPool,
    id: MessageId,
    policy: &Policy,
    source: Source,
) -> Result<Report, Error> {
    let mut tx = pool.begin().await?;
    let report = recover_in(&mut tx, id, policy, source).await;
    tx.rollback().await?;
    report
}

/// A diagnosis: what detection sees in the message as stored, and what a pass from
/// `source` would do to it now.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// Detection with the agent's real tools (default for a message that cannot leak).
    pub detection: Detection,
    /// What a pass would do (no ledger row, no memory or tool-message ids).
    pub report: Report,
}

/// What a pass from `source` would do to the message now, read-only; `None` for an
/// unknown message.
pub async fn diagnose(
    pool: &PgPool,
    id: MessageId,
    policy: &Policy,
    source: Source,
) -> Result<Option<Diagnosis>, Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION READ ONLY")
        .execute(&mut *tx)
        .await?;
    let row = match load_message(&mut tx, id, READ_MESSAGE).await {
        Ok(row) => row,
        Err(Error::Poison(Poison::MissingMessage(_))) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (mut report, loaded) = start(&mut tx, id, &row, policy).await?;
    let Some(loaded) = loaded else {
        tx.rollback().await?;
        return Ok(Some(Diagnosis {
            detection: Detection::default(),
            report,
        }));
    };
    let detection = detect_with(&loaded, &policy.detect);
    let decision = decide(&mut report, &loaded, detection.clone(), policy, &source);
    let report = match decision {
        Decision::Done => report,
        Decision::AlreadyRecovered(prev) => {
            already_recovered(&mut tx, report, prev, source).await?
        }
        Decision::Pass {
            detection: planned_on,
            ..
        } => {
            let planned = plan::plan(&planned_on, &loaded.enabled_tools, &policy.detect);
            let ctx = save_memory::CallCtx {
                row: &row,
                message_id: id,
            };
            let described = pass::run_pass(
                &mut tx,
                &ctx,
                &loaded.content,
                &planned_on,
                planned,
                Effects::Describe,
            )
            .await?;
            pass::describe(&mut report, &loaded.content, &planned_on, described);
            report
        }
    };
    tx.rollback().await?;
    Ok(Some(Diagnosis { detection, report }))
}
