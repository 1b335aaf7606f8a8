//! Dry runs: what recovery would do to a message now, without committing anything.
//!
//! - [`what_if`]: the pass itself in a transaction that is rolled back (the backfill's
//!   `--dry-run`): exactly what a real run would do, at the cost of the real run's row
//!   locks and writes, undone.
//! - [`diagnose`]: the admin API's `GET .../diagnosis`: the same steps of the pass after
//!   its reads (`decide::step`, written once for both: detection, decision, plan) on the
//!   message as read, in a READ ONLY transaction. It locks nothing beyond what a read takes and writes nothing, so no trigger of the app fires.
//!   Only what the database alone decides is missing: ids it would draw, and an insert it
//!   would refuse.
//!
//! May depend on: the rest of `recover`, `ids`, `error`, `toolcall_detect`, `sqlx`.

use super::decide::{self, Decision, Loaded};
use super::load::{self, Lock};
use super::{ledger, pass, recover_in, Mode, Policy, Report, Request, Source};
use crate::error::Error;
use crate::ids::MessageId;
use sqlx::{PgConnection, PgPool};
use toolcall_detect::Detection;

/// What recovery does to a message without committing: the pass of [`super::recover`] in
/// a transaction that is rolled back (what the request owes is written and rolled back
/// too). Row locks are held only for its length; identity values it drew are not given
/// back (gaps in ids).
pub async fn what_if(
    pool: &PgPool,
    policy: &Policy,
    request: Request<'_>,
) -> Result<Report, Error> {
    let mut tx = pool.begin().await?;
    let report = recover_in(&mut tx, policy, request).await;
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

/// What the pass `request` asks for would do to the message now, read-only (nothing is
/// owed: nothing is written); `None` for an unknown message.
pub async fn diagnose(
    pool: &PgPool,
    policy: &Policy,
    request: Request<'_>,
) -> Result<Option<Diagnosis>, Error> {
    let Request {
        message_id: id,
        source,
        ..
    } = request;
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION READ ONLY")
        .execute(&mut *tx)
        .await?;
    let diagnosis = diagnose_in(&mut tx, id, policy, &source).await;
    tx.rollback().await?;
    diagnosis
}

/// [`diagnose`] in the caller's read-only transaction: the batch's reads and decision for
/// one message, then the pass described.
async fn diagnose_in(
    conn: &mut PgConnection,
    id: MessageId,
    policy: &Policy,
    source: &Source,
) -> Result<Option<Diagnosis>, Error> {
    let Some(Some(row)) = load::rows(conn, &[id.get()], Lock::Read).await?.pop() else {
        return Ok(None);
    };
    let (mut report, loaded) = decide::start(&row, policy);
    let Some((content, tools_used)) = loaded else {
        return Ok(Some(Diagnosis {
            detection: Detection::default(),
            report,
        }));
    };
    let context = load::contexts(conn, &[(row.id, row.agent_id, content.as_str())])
        .await?
        .pop()
        .ok_or_else(|| Error::Bug("a message without its context".into()))?;
    let loaded = Loaded::new(content, tools_used, context);
    let mut detection = Detection::default();
    match decide::step(&mut report, &loaded, policy, source, |seen| {
        detection = seen.clone()
    }) {
        Decision::Done => {}
        Decision::AlreadyRecovered(prev) => {
            let applied: Vec<i64> = (prev.mode == Mode::Recover)
                .then_some(prev.id)
                .into_iter()
                .collect();
            let forward = ledger::forwarded_calls(conn, &applied)
                .await?
                .remove(&prev.id)
                .unwrap_or_default();
            decide::already_recovered(&mut report, prev, source, forward);
        }
        Decision::Pass {
            detection: planned_on,
            planned,
            ..
        } => {
            // The diagnosis describes the calls themselves, not that a replayed pass would
            // leave them unrun (`replayed` left out, as it always was).
            let mut described = pass::prepare(&row, &loaded.content, &planned_on, planned, None);
            described.repaired = pass::would_repair(conn, row.chat_id).await?;
            pass::describe(&mut report, &loaded.content, &planned_on, described);
        }
    }
    Ok(Some(Diagnosis { detection, report }))
}
