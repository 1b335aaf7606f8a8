//! The effects of a batch's passes in ONE statement: the memories of its save_memory calls,
//! the `role='tool'` messages of their results and errors, the cleaned messages, and the
//! transcript repair of their chats. Each part is a data-modifying `WITH` of its own, on
//! rows no other part touches (the tool messages are new, the cleaned ones assistants', the
//! repaired ones unnamed tool messages), so they do together what they did one after
//! another.
//!
//! A saved memory's tool message records the memory's id, which the same statement draws:
//! the memories are inserted in the order given, so their ids, ascending, are in that
//! order (the column's default draws them as the rows are inserted), and the tool message
//! joins its memory by that place.
//!
//! May depend on: the parent `recover` (pass, save_memory), `error`, `sqlx`.

use super::pass::Work;
use super::save_memory::Writes;
use super::SAVE_MEMORY;
use crate::error::Error;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use std::collections::HashMap;

/// Returns `(kind, id, key, call_id)`: a memory (`key`: its place), a tool message
/// (`call_id`), a repaired tool message (`key`: its chat).
const EFFECTS: &str = concat!(
    "WITH mem AS ( ",
    "INSERT INTO agent_memories (agent_id, content, memory_type, expires_at) ",
    "SELECT a, c, t, e FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) ",
    "WITH ORDINALITY AS u(a, c, t, e, n) ORDER BY n RETURNING id), ",
    "placed AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM mem), ",
    "tool AS ( ",
    "INSERT INTO messages (chat_id, agent_id, role, content, tool_call_id, tool_name, ",
    "created_at, updated_at) ",
    "SELECT v.c, v.a, 'tool', CASE WHEN v.m IS NULL THEN v.b ELSE v.b || p.id || v.b2 END, ",
    "v.k, $12, v.t, now() ",
    "FROM unnest($5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::bigint[], ",
    "$10::text[], $11::timestamptz[]) WITH ORDINALITY AS v(c, a, b, b2, m, k, t, n) ",
    "LEFT JOIN placed p ON p.n = v.m ORDER BY v.n RETURNING id, tool_call_id), ",
    "cleaned AS ( ",
    "UPDATE messages msg SET content = u.content, tools_used = u.tools_used, ",
    "updated_at = now() ",
    "FROM unnest($13::bigint[], $14::text[], $15::jsonb[]) AS u(id, content, tools_used) ",
    "WHERE msg.id = u.id RETURNING msg.id), ",
    "repaired AS (",
    repair_transcripts!("$16"),
    ") ",
    "SELECT 1 AS kind, id, n AS key, NULL::text AS call_id FROM placed ",
    "UNION ALL SELECT 2, id, NULL, tool_call_id FROM tool ",
    "UNION ALL SELECT 3, id, chat_id, NULL FROM repaired"
);

/// Writes the effects of `works` (one statement) and puts the ids drawn in their items and
/// what transcript repair named in their passes: each chat's repair goes to the first of
/// its messages (in id order), as when the passes ran one after another and the later
/// ones found it done.
pub(super) async fn apply(
    conn: &mut PgConnection,
    works: &mut [&mut Work<'_>],
) -> Result<(), Error> {
    if works.is_empty() {
        return Ok(());
    }
    let writes = Writes::of(works)?;
    let changed: Vec<&Work> = works
        .iter()
        .map(|w| &**w)
        .filter(|w| {
            w.pass.content_after != w.content || w.pass.tools_used_after != w.row.tools_used
        })
        .collect();
    let ids: Vec<i64> = changed.iter().map(|w| w.row.id).collect();
    let contents: Vec<&str> = changed
        .iter()
        .map(|w| w.pass.content_after.as_str())
        .collect();
    let tools: Vec<Json<&Value>> = changed
        .iter()
        .map(|w| Json(&w.pass.tools_used_after))
        .collect();
    let mut chats: Vec<i64> = works.iter().map(|w| w.row.chat_id).collect();
    chats.sort_unstable();
    chats.dedup();
    let rows = sqlx::query(EFFECTS)
        .bind(&writes.memory_agents)
        .bind(&writes.memory_contents)
        .bind(&writes.memory_types)
        .bind(&writes.memory_expiries)
        .bind(&writes.chats)
        .bind(&writes.agents)
        .bind(&writes.bodies)
        .bind(&writes.bodies_after)
        .bind(&writes.memories)
        .bind(&writes.call_ids)
        .bind(&writes.created)
        .bind(SAVE_MEMORY)
        .bind(&ids)
        .bind(&contents)
        .bind(&tools)
        .bind(&chats)
        .fetch_all(&mut *conn)
        .await?;
    drop((changed, contents, tools));
    let mut memories = HashMap::new();
    let mut tool_messages = HashMap::new();
    let mut repaired: HashMap<i64, Vec<i64>> = HashMap::new();
    for row in rows {
        let (kind, id): (i32, i64) = (row.try_get(0)?, row.try_get(1)?);
        match kind {
            1 => {
                memories.insert(row.try_get::<i64, _>(2)?, id);
            }
            2 => {
                tool_messages.insert(row.try_get::<String, _>(3)?, id);
            }
            _ => repaired
                .entry(row.try_get::<i64, _>(2)?)
                .or_default()
                .push(id),
        }
    }
    writes.assign(works, &memories, &tool_messages)?;
    for work in works.iter_mut() {
        if let Some(mut named) = repaired.remove(&work.row.chat_id) {
            named.sort_unstable();
            work.pass.repaired = named;
        }
    }
    Ok(())
}
