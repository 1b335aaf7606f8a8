//! `toolcall-recovery`: finds tool calls that language models leaked into the text of
//! finalized assistant messages, runs the real recovery, and keeps an audit ledger.
//!
//! Detection is the separate, pure crate [`toolcall_detect`]; this crate holds everything
//! that touches the outside world, and the `scan` command that runs detection offline.
//!
//! The data path, one module per step:
//! [`event`] (decode a delivery into valid types) -> detection ([`detect`]) ->
//! [`recover`] (THE recovery transaction: lock, re-detect, memory, tool message, ledger,
//! transcript repair) -> [`amqp`] (publish with confirms) -> ack, driven by [`worker`].
//! Around it: [`settings`] (all configuration), [`store`] (pool, migrations),
//! [`http`] (`/metrics`, `/healthz`, `/readyz`), [`metrics`], [`telemetry`] (logs),
//! [`shutdown`] and [`retry`], [`error`] (transient / poison / bug), and [`startup`],
//! which wires them together for the binary and the integration tests. The other callers
//! of the same recovery transaction are [`backfill`] (historical messages) and [`admin`]
//! (the app's diagnosis, "fix" and revert endpoints); [`revert`] is the command that
//! undoes a recovery ([`recover::revert`]), [`audit`] reads the ledger back (the `ledger`
//! command, the admin API's ledger endpoint).

pub mod admin;
pub mod amqp;
pub mod audit;
pub mod backfill;
pub mod error;
pub mod event;
pub mod http;
pub mod metrics;
pub mod recover;
pub mod retry;
pub mod revert;
pub mod scan;
pub mod settings;
pub mod shutdown;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod worker;

pub use toolcall_detect as detect;
