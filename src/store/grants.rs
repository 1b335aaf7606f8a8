//! The grants the worker's role needs on the chat app's tables, checked at start: without
//! one, every leak of that kind fails with `permission denied` (SQLSTATE 42501, a bug to the
//! worker: dead-lettered as `internal_error`), which pages someone at night for what is a
//! missing line of the DBA's script. One list, [`APP_GRANTS`], for the check and the
//! message; docs/operations.md gives the DBA the same.
//!
//! May depend on: `error`, `sqlx`.

use crate::error::Error;
use sqlx::PgPool;

/// The privileges the worker needs on each app table it touches: reading the message and
/// the agent's tools; writing the cleaned message, the tool message and the memory; a revert
/// deletes what recovery created; `SELECT ... FOR UPDATE` (the message row a pass locks, the
/// memory a revert locks) needs UPDATE. The worker never touches `chats`.
pub const APP_GRANTS: &[(&str, &[&str])] = &[
    ("agents", &["SELECT"]),
    ("messages", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
    ("agent_memories", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
];

/// The `GRANT` statements the connected role still needs (empty when it has everything):
/// the privileges of [`APP_GRANTS`], and USAGE on the sequence of an `id` that is a
/// `serial` (an identity needs nothing beyond INSERT).
pub async fn missing_grants(pool: &PgPool) -> Result<Vec<String>, Error> {
    let role: String = sqlx::query_scalar("SELECT quote_ident(current_user)")
        .fetch_one(pool)
        .await?;
    let mut grants = Vec::new();
    for (table, privileges) in APP_GRANTS {
        let missing: Vec<String> = sqlx::query_scalar(
            "SELECT p FROM unnest($2::text[]) WITH ORDINALITY AS u(p, n) \
             WHERE NOT has_table_privilege(to_regclass($1), p) ORDER BY n",
        )
        .bind(table)
        .bind(privileges)
        .fetch_all(pool)
        .await?;
        if !missing.is_empty() {
            grants.push(format!(
                "GRANT {} ON {table} TO {role};",
                missing.join(", ")
            ));
        }
        let sequence: Option<String> = sqlx::query_scalar(
            "SELECT s FROM (SELECT pg_get_serial_sequence($1, 'id') AS s FROM pg_attribute \
               WHERE attrelid = to_regclass($1) AND attname = 'id' AND attidentity = '') q \
             WHERE s IS NOT NULL AND NOT has_sequence_privilege(s, 'USAGE')",
        )
        .bind(table)
        .fetch_optional(pool)
        .await?;
        if let Some(sequence) = sequence {
            grants.push(format!("GRANT USAGE ON SEQUENCE {sequence} TO {role};"));
        }
    }
    Ok(grants)
}

/// Fails, with the statements the DBA runs, when the role lacks a grant of [`APP_GRANTS`].
pub async fn require_grants(pool: &PgPool) -> Result<(), Error> {
    let missing = missing_grants(pool).await?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Startup(format!(
        "the worker's database role lacks grants on the chat app's tables; have the DBA run: \
         {} (docs/operations.md, \"The worker's role\")",
        missing.join(" ")
    )))
}
