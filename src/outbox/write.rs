//! The write side of the outbox: the rows one pass or several owe, written in the caller's
//! transaction, each key once.
//!
//! May depend on: the parent `outbox` (the row types), `ids`, `error`, `sqlx`.

use super::{Outgoing, Queued};
use crate::error::Error;
use crate::ids::MessageId;
use sqlx::{PgConnection, Row};

/// Writes the rows of several passes (each with its message and the ledger row of the pass
/// that owes it); returns the rows still to send. A row owed before (same target and key: a
/// repeated ask, a redelivery) is not written twice: it comes back if it was never sent,
/// and not at all once it was. A statement cannot meet the same key twice (ON CONFLICT DO
/// UPDATE refuses to touch a row twice), so a key owed twice in one batch waits for a
/// statement of its own. The body comes back only when the stored one differs from the one
/// given (a row owed before): the caller has it otherwise.
const ENQUEUE: &str = "WITH u AS ( \
       SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[]) \
         WITH ORDINALITY AS u(r, m, t, k, b, n)), \
     written AS ( \
       INSERT INTO outbox (recovery_id, message_id, target, message_key, body) \
       SELECT r, m, t, k, b FROM u ORDER BY n \
       ON CONFLICT (target, message_key) DO UPDATE SET attempts = outbox.attempts \
       RETURNING id, target, message_key, body, sent_at IS NOT NULL AS sent) \
     SELECT w.id, w.target, w.message_key, w.sent, \
       CASE WHEN w.body = u.b THEN NULL ELSE w.body END AS body \
     FROM written w JOIN u ON u.t = w.target AND u.k = w.message_key";

/// What one pass owes the broker.
pub(crate) struct Owed {
    /// The ledger row of the pass that owes them.
    pub(crate) recovery_id: Option<i64>,
    /// The message.
    pub(crate) message_id: MessageId,
    /// The messages owed, in the order they must be sent.
    pub(crate) rows: Vec<Outgoing>,
}

/// Writes `rows` in the caller's transaction; returns the rows still to send, in order.
pub(crate) async fn enqueue(
    conn: &mut PgConnection,
    recovery_id: Option<i64>,
    message_id: MessageId,
    rows: Vec<Outgoing>,
) -> Result<Vec<Queued>, Error> {
    let owed = [Owed {
        recovery_id,
        message_id,
        rows,
    }];
    Ok(enqueue_all(conn, &owed).await?.pop().unwrap_or_default())
}

/// Writes what several passes owe in the caller's transaction, one statement for all of
/// them (unless a key is owed twice); returns for each, in the order of `owed`, its rows
/// still to send, in order.
pub(crate) async fn enqueue_all(
    conn: &mut PgConnection,
    owed: &[Owed],
) -> Result<Vec<Vec<Queued>>, Error> {
    let mut unsent: Vec<Vec<Queued>> = owed.iter().map(|_| Vec::new()).collect();
    // Statements, each with every key once: (who owes each row, the row).
    let mut statements: Vec<Vec<(usize, &Outgoing)>> = Vec::new();
    for (i, o) in owed.iter().enumerate() {
        for row in &o.rows {
            let free = statements.iter().position(|s| {
                !s.iter()
                    .any(|(_, r)| r.target == row.target && r.key == row.key)
            });
            match free {
                Some(s) => statements[s].push((i, row)),
                None => statements.push(vec![(i, row)]),
            }
        }
    }
    for statement in statements {
        let recovery_ids: Vec<Option<i64>> = statement
            .iter()
            .map(|(i, _)| owed[*i].recovery_id)
            .collect();
        let message_ids: Vec<i64> = statement
            .iter()
            .map(|(i, _)| owed[*i].message_id.get())
            .collect();
        let targets: Vec<&str> = statement.iter().map(|(_, r)| r.target.as_str()).collect();
        let keys: Vec<&str> = statement.iter().map(|(_, r)| r.key.as_str()).collect();
        let bodies: Vec<&str> = statement.iter().map(|(_, r)| r.body.as_str()).collect();
        let written = sqlx::query(ENQUEUE)
            .bind(&recovery_ids)
            .bind(&message_ids)
            .bind(&targets)
            .bind(&keys)
            .bind(&bodies)
            .fetch_all(&mut *conn)
            .await?;
        for row in written {
            if row.try_get::<bool, _>("sent")? {
                continue;
            }
            let (id, key): (i64, String) = (row.try_get("id")?, row.try_get("message_key")?);
            let label: String = row.try_get("target")?;
            let (owner, given) = statement
                .iter()
                .find(|(_, r)| r.target.as_str() == label && r.key == key)
                .ok_or_else(|| Error::Bug(format!("outbox row {id} owed by no pass")))?;
            let body = match row.try_get::<Option<String>, _>("body")? {
                Some(stored) => stored,
                None => given.body.clone(),
            };
            unsent[*owner].push(Queued {
                id,
                outgoing: Outgoing {
                    target: given.target,
                    key,
                    body,
                },
            });
        }
    }
    for rows in &mut unsent {
        rows.sort_by_key(|q| q.id);
    }
    Ok(unsent)
}
