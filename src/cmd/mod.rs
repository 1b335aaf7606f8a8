//! The one-off commands that are not a service of their own: `scan` (detection offline),
//! `ledger` (the audit ledger read back), `revert` (undo a recovery) and `index` (the
//! transcript-repair index on the app's table). The worker (`run`)
//! is `startup` + `worker`, the backfill is `backfill`; `main.rs` only parses and dispatches.
//!
//! May depend on: everything below the commands (`recover`, `ledger`, `publish`, `store`,
//! `settings`, `error`, `toolcall_detect`); never on `worker`, `admin`, `backfill` or on each
//! other.

pub mod index;
pub mod ledger;
pub mod revert;
pub mod scan;
