//! Transcript repair across the whole history (`--repair-transcripts`): every chat with a
//! `role='tool'` message whose `tool_name` is empty or NULL gets the same repair the
//! recovery transaction makes for the chat of a recovered message (contract §3: the name of
//! the assistant call with the same `tool_call_id`, `unknown` for an orphan). One short
//! transaction per chat, chats walked by keyset on `chat_id`.
//!
//! The per-chat repair is `recover::repair_transcript`, the one the recovery pass runs.
//!
//! May depend on: `recover`, `error`, `sqlx`.

use crate::error::Error;
use crate::recover;
use sqlx::PgPool;

const CHATS_TO_REPAIR: &str = "SELECT DISTINCT chat_id FROM messages \
     WHERE role = 'tool' AND coalesce(tool_name, '') = '' AND chat_id > $1 \
     ORDER BY chat_id LIMIT $2";

/// What the repair did (or, in a dry run, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repaired {
    /// Chats touched.
    pub chats: u64,
    /// `role='tool'` messages named.
    pub tool_messages: u64,
}

/// Repairs every chat; in a dry run each chat's transaction is rolled back.
pub async fn repair_all(pool: &PgPool, batch: i64, dry_run: bool) -> Result<Repaired, Error> {
    let mut done = Repaired::default();
    let mut after = i64::MIN;
    loop {
        let chats: Vec<i64> = sqlx::query_scalar(CHATS_TO_REPAIR)
            .bind(after)
            .bind(batch.max(1))
            .fetch_all(pool)
            .await?;
        let Some(&last) = chats.last() else {
            return Ok(done);
        };
        for chat in chats {
            let mut tx = pool.begin().await?;
            let ids = recover::repair_transcript(&mut tx, chat).await?;
            if dry_run {
                tx.rollback().await?;
            } else {
                tx.commit().await?;
            }
            if !ids.is_empty() {
                done.chats += 1;
                done.tool_messages += ids.len() as u64;
                tracing::debug!(chat_id = chat, repaired = ?ids, dry_run, "transcript repaired");
            }
        }
        after = last;
    }
}
