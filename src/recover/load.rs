//! What a pass reads before it decides, for every message of a batch at once: the message
//! rows (locked, in id order, by one statement), then, by one more statement, each
//! message's context: the agent's enabled tools, its latest ledger row, and whether its
//! content is one an applied pass started from.
//!
//! May depend on: the parent `recover` (ledger rows), `error`, `sqlx`.

use super::ledger::{self, PrevRecovery};
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};

/// How the message rows are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lock {
    /// `FOR UPDATE`: wait for a transaction that holds a row (a pass of its own).
    Wait,
    /// `FOR UPDATE NOWAIT`: a row another transaction holds (the app writing the message,
    /// a redelivery's pass) fails the statement at once (SQLSTATE 55P03) instead of
    /// holding every message of the batch behind it.
    NoWait,
    /// Read, lock nothing (the diagnosis changes nothing).
    Read,
}

/// The rows alone. The agent's tools and the latest ledger row are read by a statement of
/// their own after it ([`CONTEXT`]): folded into this one (a LATERAL join), a pass that
/// waited for a lock would see the ledger as it was before the other pass committed (READ
/// COMMITTED re-reads only the locked rows) and do the work twice. The idempotency and
/// racing-revert tests catch exactly that. `ORDER BY id` comes before the locking clause,
/// so rows are locked in id order.
macro_rules! rows {
    ($lock:literal) => {
        concat!(
            "SELECT id, chat_id, agent_id, role, content, tools_used, created_at ",
            "FROM messages WHERE id = ANY($1) ORDER BY id",
            $lock
        )
    };
}

/// After the rows, for each message in one round trip: the agent's enabled tools, the
/// message's latest ledger row (`prev_*`, all NULL without one), and the latest applied
/// pass whose `content_before` is the content as it is now (`replayed_id`: the app wrote
/// the pre-cleaning text back, so that pass's calls ran already). A statement of its own,
/// so it sees what a pass that held a lock before committed.
const CONTEXT: &str = "SELECT \
       coalesce(a.enabled_tools, '{}') AS enabled_tools, \
       (SELECT id FROM recoveries WHERE message_id = u.id AND mode = 'recover' \
          AND reverted_at IS NULL AND content_before = u.content ORDER BY id DESC LIMIT 1) \
         AS replayed_id, \
       r.id AS prev_id, r.event_id AS prev_event_id, r.summary AS prev_summary, \
       r.content_before AS prev_content_before, r.content_after AS prev_content_after, \
       r.mode AS prev_mode, r.reverted_at IS NOT NULL AS prev_reverted \
     FROM unnest($1::bigint[], $2::bigint[], $3::text[]) \
       WITH ORDINALITY AS u(id, agent, content, n) \
     LEFT JOIN agents a ON a.id = u.agent \
     LEFT JOIN LATERAL ( \
       SELECT id, event_id, summary, content_before, content_after, mode, reverted_at \
       FROM recoveries WHERE message_id = u.id ORDER BY id DESC LIMIT 1) r ON true \
     ORDER BY u.n";

/// A message row, as the recovery reads it.
pub(super) struct MessageRow {
    pub(super) id: i64,
    pub(super) chat_id: i64,
    pub(super) agent_id: Option<i64>,
    pub(super) role: String,
    pub(super) content: Option<String>,
    pub(super) tools_used: Value,
    pub(super) created_at: DateTime<Utc>,
}

/// The rows of `ids` (ascending, distinct), taken as `lock` says; `None` where a message
/// does not exist. One statement.
pub(super) async fn rows(
    conn: &mut PgConnection,
    ids: &[i64],
    lock: Lock,
) -> Result<Vec<Option<MessageRow>>, Error> {
    let sql = match lock {
        Lock::Wait => rows!(" FOR UPDATE"),
        Lock::NoWait => rows!(" FOR UPDATE NOWAIT"),
        Lock::Read => rows!(""),
    };
    let found = sqlx::query(sql).bind(ids).fetch_all(&mut *conn).await?;
    let mut out: Vec<Option<MessageRow>> = Vec::with_capacity(ids.len());
    let mut found = found.into_iter().peekable();
    for &id in ids {
        let row = match found.peek() {
            Some(r) if r.try_get::<i64, _>("id")? == id => found.next(),
            _ => None,
        };
        out.push(row.map(|r| message_row(&r)).transpose()?);
    }
    Ok(out)
}

fn message_row(row: &sqlx::postgres::PgRow) -> Result<MessageRow, Error> {
    Ok(MessageRow {
        id: row.try_get("id")?,
        chat_id: row.try_get("chat_id")?,
        agent_id: row.try_get("agent_id")?,
        role: row.try_get("role")?,
        content: row.try_get("content")?,
        tools_used: row.try_get::<Json<Value>, _>("tools_used")?.0,
        created_at: row.try_get("created_at")?,
    })
}

/// What a message's pass needs to know besides its row.
pub(super) struct Context {
    pub(super) enabled_tools: Vec<String>,
    pub(super) prev: Option<PrevRecovery>,
    pub(super) replayed: Option<i64>,
}

/// The context of each `(message id, agent id, content as read)`, in that order. One
/// statement; none for no message.
pub(super) async fn contexts(
    conn: &mut PgConnection,
    of: &[(i64, Option<i64>, &str)],
) -> Result<Vec<Context>, Error> {
    if of.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = of.iter().map(|m| m.0).collect();
    let agents: Vec<Option<i64>> = of.iter().map(|m| m.1).collect();
    let contents: Vec<&str> = of.iter().map(|m| m.2).collect();
    let rows = sqlx::query(CONTEXT)
        .bind(&ids)
        .bind(&agents)
        .bind(&contents)
        .fetch_all(&mut *conn)
        .await?;
    if rows.len() != of.len() {
        return Err(Error::Bug(format!(
            "{} contexts for {} messages",
            rows.len(),
            of.len()
        )));
    }
    rows.iter()
        .map(|row| {
            Ok(Context {
                enabled_tools: row.try_get("enabled_tools")?,
                prev: ledger::prev_recovery(row)?,
                replayed: row.try_get("replayed_id")?,
            })
        })
        .collect()
}
