//! Revisiting observed messages. An observe-mode pass (the live worker, an observe-mode
//! backfill, a family held in observe mode) records a message and changes nothing; the
//! walk's checkpoint may already be past it. Switching to recover must need no
//! reprocessing flag, so a recover-mode backfill first examines again every message at or
//! below its starting point whose latest ledger row is observed, then walks on. Those
//! whose families are still observed are recognised as already recorded and stay as they
//! are; the others are recovered. The checkpoint is not involved.
//!
//! May depend on: the sibling modules (`candidates`, `examine`, `output`, `pace`), `error`,
//! `sqlx`.

use super::candidates::{Candidate, ModelColumn, PageRow};
use super::examine::Examiner;
use super::output::Reporter;
use super::pace::Pacer;
use super::summary::Summary;
use crate::error::Error;
use futures_util::{stream, StreamExt};
use sqlx::PgPool;

/// Messages read per page of the revisit.
const PAGE: i64 = 500;

/// `{model}`: the model column's expression (`candidates::ModelColumn`), the sixth column
/// as in the walk's page.
const OBSERVED: &str = "SELECT m.id, m.chat_id, m.agent_id, m.content, m.tools_used, {model}, \
       coalesce(a.enabled_tools, '{}') AS enabled_tools \
     FROM recoveries r JOIN messages m ON m.id = r.message_id \
       LEFT JOIN agents a ON a.id = m.agent_id \
     WHERE r.mode = 'observe' AND r.message_id > $1 AND r.message_id <= $2 \
       AND r.id = (SELECT max(x.id) FROM recoveries x WHERE x.message_id = r.message_id) \
       AND m.role = 'assistant' AND m.content IS NOT NULL \
     ORDER BY r.message_id LIMIT $3";

async fn observed_page(
    pool: &PgPool,
    model: &ModelColumn,
    after: i64,
    up_to: i64,
    limit: i64,
) -> Result<Vec<Candidate>, Error> {
    let sql = OBSERVED.replace("{model}", &model.select("m"));
    let rows: Vec<ObservedRow> = sqlx::query_as(&sql)
        .bind(after)
        .bind(up_to)
        .bind(limit)
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| Candidate {
            enabled_tools: row.enabled_tools,
            ..row.page.into()
        })
        .collect())
}

/// A row of [`OBSERVED`]: the page's columns, and the agent's tools.
#[derive(sqlx::FromRow)]
struct ObservedRow {
    #[sqlx(flatten)]
    page: PageRow,
    enabled_tools: Vec<String>,
}

/// Examines every observed message with `after < id <= up_to`, `concurrency` at a time,
/// at the run's `--rate` (`pacer`). Stops taking messages on Ctrl-C.
pub async fn observed(
    examiner: &Examiner,
    (mut after, up_to): (i64, i64),
    concurrency: usize,
    pacer: Option<&Pacer>,
    summary: &mut Summary,
    reporter: &mut Reporter<'_>,
) -> Result<(), Error> {
    let pool = &examiner.pool;
    while !examiner.stop.is_shutdown() {
        let page = examiner
            .retrying(|| observed_page(pool, &examiner.model_column, after, up_to, PAGE))
            .await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.id;
        let mut stopped = examiner.stop.clone();
        let mut results = stream::iter(page)
            .take_until(Box::pin(async move { stopped.wait().await }))
            .map(|c| async move {
                if let Some(p) = pacer {
                    p.tick().await;
                }
                examiner.examine(c).await
            })
            .buffered(concurrency.max(1));
        while let Some(r) = results.next().await {
            let e = r?;
            summary.add_revisited(&e);
            reporter.message(&e);
        }
    }
    Ok(())
}
