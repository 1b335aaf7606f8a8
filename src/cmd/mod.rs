//! The one-off commands that are not a service of their own: `scan` (detection offline),
//! `ledger` (the audit ledger read back), `revert` (undo a recovery), `index` (the
//! transcript-repair index on the app's table), `dead-letters` (the dead-letter queue:
//! list, show, replay, purge) and `demo` (one leak recovered end to end, on a development
//! database). The worker (`run`) is `startup` + `worker`, the backfill is `backfill`;
//! `main.rs` only parses and dispatches. The two commands that talk to the broker on their
//! own open their connection with `publish::confirm_channel`.
//!
//! May depend on: everything below the commands (`recover`, `ledger`, `publish`, `store`,
//! `settings`, `outbound`, `event`, `metrics`, `ids`, `error`, `toolcall_detect`, `lapin`, `sqlx`,
//! `tokio`); never on `worker`, `admin`, `backfill` or on each other.

pub mod dead_letters;
pub mod demo;
pub mod index;
pub mod ledger;
pub mod revert;
pub mod scan;
