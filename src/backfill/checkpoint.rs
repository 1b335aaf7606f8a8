//! The backfill's checkpoint: per named backfill, the id up to which every candidate has
//! been examined, in the worker's own table `backfill_checkpoints`. A run starts after it
//! and moves it forward after each page; it never moves back (two runs of the same name
//! cannot undo each other's progress), except when an operator asks for a restart.
//!
//! May depend on: `error`, `sqlx`.

use crate::error::Error;
use sqlx::PgPool;

const LOAD: &str = "SELECT last_message_id FROM backfill_checkpoints WHERE name = $1";

const SAVE: &str = "INSERT INTO backfill_checkpoints \
       (name, last_message_id, since_id, until_id, examined, changed) \
     VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (name) DO UPDATE SET \
       last_message_id = GREATEST(backfill_checkpoints.last_message_id, EXCLUDED.last_message_id), \
       since_id = EXCLUDED.since_id, until_id = EXCLUDED.until_id, \
       examined = backfill_checkpoints.examined + EXCLUDED.examined, \
       changed = backfill_checkpoints.changed + EXCLUDED.changed, \
       updated_at = now(), finished_at = NULL";

const FINISH: &str = "UPDATE backfill_checkpoints SET finished_at = now(), updated_at = now() \
     WHERE name = $1";

const RESET: &str = "DELETE FROM backfill_checkpoints WHERE name = $1";

/// Progress made since the last save.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Every candidate up to this id has been examined.
    pub last_message_id: i64,
    /// Candidates examined in the step.
    pub examined: i64,
    /// Messages changed in the step.
    pub changed: i64,
}

/// The checkpoint of `name`, if any.
pub async fn load(pool: &PgPool, name: &str) -> Result<Option<i64>, Error> {
    Ok(sqlx::query_scalar(LOAD)
        .bind(name)
        .fetch_optional(pool)
        .await?)
}

/// Records a step (the bounds of the run are kept for the operator's information).
pub async fn save(
    pool: &PgPool,
    name: &str,
    step: Step,
    since_id: Option<i64>,
    until_id: Option<i64>,
) -> Result<(), Error> {
    sqlx::query(SAVE)
        .bind(name)
        .bind(step.last_message_id)
        .bind(since_id)
        .bind(until_id)
        .bind(step.examined)
        .bind(step.changed)
        .execute(pool)
        .await?;
    Ok(())
}

/// Marks the backfill finished (it reached the end of its range).
pub async fn finish(pool: &PgPool, name: &str) -> Result<(), Error> {
    sqlx::query(FINISH).bind(name).execute(pool).await?;
    Ok(())
}

/// Forgets the checkpoint (`--restart`).
pub async fn reset(pool: &PgPool, name: &str) -> Result<(), Error> {
    sqlx::query(RESET).bind(name).execute(pool).await?;
    Ok(())
}
