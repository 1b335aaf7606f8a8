//! The passes of several messages in the caller's transaction, with one statement per kind
//! for all of them: the rows locked by one `SELECT … FOR UPDATE` (in id order), one
//! context read, then, after every message is decided without I/O, one statement for the
//! effects (memories, tool messages, cleaned messages, transcript repair of their chats:
//! `effects.rs`), one for the ledger (rows and items), one write of the outbox: seven round
//! trips with BEGIN and COMMIT, whatever the batch's size (one more to read the forwarded
//! calls of messages a pass recovered before). A single message is the batch of
//! one: there is no other implementation of the pass.
//!
//! A message named twice goes in a second round of statements, which sees the first (as
//! when passes run one after another).
//!
//! May depend on: the rest of `recover`, `error`, `sqlx`, `outbox`.

use super::decide::{self, Decision, Loaded};
use super::effects;
use super::load::{self, Lock, MessageRow};
use super::pass::{self, Work};
use super::{ledger, BatchError, Mode, Policy, Report, Request};
use crate::error::{Error, Poison};
use crate::outbox::{self, Owed};
use sqlx::{Connection, PgConnection};

/// The passes of `items` in the caller's transaction, their reports in the order of
/// `items`. Errors name the item when it is the item's own (its row is missing); a failed
/// statement of the batch names none (see [`BatchError`]).
pub(super) async fn run(
    conn: &mut PgConnection,
    policy: &Policy,
    items: &[Request<'_>],
    lock: Lock,
) -> Result<Vec<Report>, BatchError> {
    let mut reports: Vec<Option<Report>> = Vec::new();
    reports.resize_with(items.len(), || None);
    for round in rounds(items) {
        for (i, report) in run_round(conn, policy, items, round, lock).await? {
            reports[i] = Some(report);
        }
    }
    reports
        .into_iter()
        .map(|r| r.ok_or_else(|| whole(Error::Bug("a batch item has no report".into()))))
        .collect()
}

/// The pass of one message in the caller's transaction.
pub(super) async fn one(
    conn: &mut PgConnection,
    policy: &Policy,
    item: Request<'_>,
    lock: Lock,
) -> Result<Report, Error> {
    let mut reports = run(conn, policy, std::slice::from_ref(&item), lock)
        .await
        .map_err(|e| e.error)?;
    reports
        .pop()
        .ok_or_else(|| Error::Bug("a pass without its report".into()))
}

fn whole(error: Error) -> BatchError {
    BatchError {
        failed: None,
        error,
    }
}

impl From<Error> for BatchError {
    fn from(error: Error) -> Self {
        whole(error)
    }
}

impl From<sqlx::Error> for BatchError {
    fn from(error: sqlx::Error) -> Self {
        whole(error.into())
    }
}

/// The items in rounds, each message at most once in a round, in id order: round `r` holds
/// the `r`-th mention of each message.
fn rounds(items: &[Request<'_>]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].message_id);
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut seen = 0;
    for (k, &i) in order.iter().enumerate() {
        let again = k > 0 && items[order[k - 1]].message_id == items[i].message_id;
        seen = if again { seen + 1 } else { 0 };
        if rounds.len() <= seen {
            rounds.push(Vec::new());
        }
        rounds[seen].push(i);
    }
    rounds
}

/// A message whose row was read and that may hold a leak, before its context is known.
struct Pending {
    index: usize,
    row: MessageRow,
    report: Report,
    content: String,
    tools_used: Vec<String>,
}

/// One round: `round` names distinct messages, in id order.
async fn run_round<'a>(
    conn: &mut PgConnection,
    policy: &Policy,
    items: &'a [Request<'a>],
    round: Vec<usize>,
    lock: Lock,
) -> Result<Vec<(usize, Report)>, BatchError> {
    let ids: Vec<i64> = round.iter().map(|&i| items[i].message_id.get()).collect();
    let rows = load::rows(conn, &ids, lock).await?;
    let mut done: Vec<(usize, Report)> = Vec::with_capacity(round.len());
    let mut pending = Vec::new();
    for (index, row) in round.into_iter().zip(rows) {
        let row = row.ok_or_else(|| BatchError {
            failed: Some(index),
            error: Poison::MissingMessage(items[index].message_id).into(),
        })?;
        match decide::start(&row, policy) {
            (report, None) => done.push((index, report)),
            (report, Some((content, tools_used))) => pending.push(Pending {
                index,
                row,
                report,
                content,
                tools_used,
            }),
        }
    }
    let mut works = decide_all(conn, policy, items, pending, &mut done).await?;
    effects(conn, &mut works).await?;
    done.extend(pass::record(conn, works).await?);
    enqueue(conn, items, &mut done).await?;
    Ok(done)
}

/// Reads the context of every pending message (one statement), detects and decides: the
/// passes that end here go to `done` (those done before with their forwarded calls, one
/// statement), the others come back planned.
async fn decide_all<'a>(
    conn: &mut PgConnection,
    policy: &Policy,
    items: &'a [Request<'a>],
    pending: Vec<Pending>,
    done: &mut Vec<(usize, Report)>,
) -> Result<Vec<Work<'a>>, Error> {
    let of: Vec<(i64, Option<i64>, &str)> = pending
        .iter()
        .map(|p| (p.row.id, p.row.agent_id, p.content.as_str()))
        .collect();
    let contexts = load::contexts(conn, &of).await?;
    drop(of);
    let mut works = Vec::new();
    let mut already = Vec::new();
    for (p, context) in pending.into_iter().zip(contexts) {
        let Pending {
            index,
            row,
            mut report,
            content,
            tools_used,
        } = p;
        let loaded = Loaded::new(content, tools_used, context);
        let source = &items[index].source;
        match decide::step(&mut report, &loaded, policy, source, |_| {}) {
            Decision::Done => done.push((index, report)),
            Decision::AlreadyRecovered(prev) => already.push((index, report, prev)),
            Decision::Pass {
                detection,
                replayed,
                planned,
            } => {
                let pass = pass::prepare(&row, &loaded.content, &detection, planned, replayed);
                works.push(Work {
                    index,
                    row,
                    content: loaded.content,
                    detection,
                    pass,
                    report,
                    source,
                });
            }
        }
    }
    let applied: Vec<i64> = already
        .iter()
        .filter(|(_, _, prev)| prev.mode == Mode::Recover)
        .map(|(_, _, prev)| prev.id)
        .collect();
    let mut forwarded = ledger::forwarded_calls(conn, &applied).await?;
    for (index, mut report, prev) in already {
        let forward = forwarded.remove(&prev.id).unwrap_or_default();
        decide::already_recovered(&mut report, prev, &items[index].source, forward);
        done.push((index, report));
    }
    Ok(works)
}

/// The effects of the passes: applied ones written, observed ones written inside a
/// savepoint that is rolled back (the would-be outcome is the real decision, not a second
/// implementation of it).
async fn effects(conn: &mut PgConnection, works: &mut [Work<'_>]) -> Result<(), Error> {
    let (mut observed, mut applied): (Vec<&mut Work>, Vec<&mut Work>) = works
        .iter_mut()
        .partition(|w| w.report.mode == Mode::Observe);
    effects::apply(conn, &mut applied).await?;
    if observed.is_empty() {
        return Ok(());
    }
    let mut savepoint = conn.begin().await?;
    let result = effects::apply(&mut savepoint, &mut observed).await;
    savepoint.rollback().await?;
    result?;
    for work in observed {
        work.pass.forget_effects();
    }
    Ok(())
}

/// Writes what the recorded passes owe the broker (one statement), into their reports.
async fn enqueue(
    conn: &mut PgConnection,
    items: &[Request<'_>],
    done: &mut [(usize, Report)],
) -> Result<(), BatchError> {
    let mut owed = Vec::new();
    let mut owners = Vec::new();
    for (at, (index, report)) in done.iter().enumerate() {
        let (Some(envelope), true) = (items[*index].envelope, report.recorded()) else {
            continue;
        };
        let rows = envelope.outgoing(report).map_err(|error| BatchError {
            failed: Some(*index),
            error,
        })?;
        owed.push(Owed {
            recovery_id: report.recovery_id,
            message_id: report.message_id,
            rows,
        });
        owners.push(at);
    }
    let queued = outbox::enqueue_all(conn, &owed).await?;
    for (at, rows) in owners.into_iter().zip(queued) {
        done[at].1.outbox = rows;
    }
    Ok(())
}
