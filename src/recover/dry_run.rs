//! Dry runs: what recovery would do to a message now, without committing anything. The
//! backfill's `--dry-run` and the admin API's diagnosis use them; a dry run is the pass
//! itself rolled back, never a second implementation of its decisions.
//!
//! May depend on: the rest of `recover`, `ids`, `error`, `toolcall_detect`, `sqlx`.

use super::{recover_in, Policy, Report, Source};
use crate::error::Error;
use crate::ids::MessageId;
use serde_json::Value;
use sqlx::PgPool;
use toolcall_detect::{Config, Detection, Input};

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

const CURRENT: &str = "SELECT m.role, m.content, m.tools_used, \
       coalesce(a.enabled_tools, '{}') AS enabled_tools \
     FROM messages m LEFT JOIN agents a ON a.id = m.agent_id WHERE m.id = $1";

/// role, content, tools_used, the agent's enabled tools.
type CurrentRow = (
    String,
    Option<String>,
    sqlx::types::Json<Value>,
    Vec<String>,
);

/// Detection on the message as stored, with its agent's tools (for a diagnosis); `None`
/// when there is no such message.
pub async fn detect_stored(
    pool: &PgPool,
    id: MessageId,
    config: &Config,
) -> Result<Option<Detection>, Error> {
    let row: Option<CurrentRow> = sqlx::query_as(CURRENT)
        .bind(id.get())
        .fetch_optional(pool)
        .await?;
    let Some((role, content, tools_used, enabled_tools)) = row else {
        return Ok(None);
    };
    let (Some(content), "assistant") = (content, role.as_str()) else {
        return Ok(Some(Detection::default()));
    };
    let tools_used: Vec<String> = tools_used
        .0
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let input = Input {
        content: &content,
        tools_used: &tools_used,
        enabled_tools: &enabled_tools,
    };
    Ok(Some(toolcall_detect::detect(&input, config)))
}
