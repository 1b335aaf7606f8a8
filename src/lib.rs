//! `toolcall-recovery`: finds tool calls that language models leaked into the text of
//! finalized assistant messages, runs the real recovery, and keeps an audit ledger.
//!
//! Detection is the separate, pure crate [`toolcall_detect`]; this crate holds everything
//! that touches the outside world, and the `scan` command that runs detection offline.
//!
//! The data path, one module per step:
//! [`event`] (decode a delivery into valid types) -> detection ([`detect`]) ->
//! [`recover`] (the recovery pass, one transaction: lock, re-detect, memory, tool message,
//! ledger, transcript repair, and what it owes the broker written to the [`outbox`]) ->
//! [`publish`] (send with confirms the bodies [`outbound`] builds) -> ack, driven by
//! [`worker`] over the broker session of [`amqp`].
//!
//! Three more ways into recover and publish: [`backfill`] (historical messages), [`admin`]
//! (the app's diagnosis, "fix" and revert endpoints) and the `revert` command ([`cmd`]);
//! they import nothing from each other. [`ledger`] reads the audit ledger back (the `ledger`
//! command, the admin API's ledger endpoint); [`cmd`] holds the small commands (`scan`,
//! `ledger`, `revert`).
//!
//! Around it: [`ids`] (the id types every module may name), [`settings`] (the setting
//! groups the commands share and the worker's settings; a one-off command's own flags live
//! with the command), [`store`] (pool, migrations), [`http`] (`/metrics`, `/healthz`,
//! `/readyz`), [`metrics`], [`model`] (the bounded `model` label of a model id),
//! [`telemetry`] (logs), [`shutdown`] and [`retry`], [`budget`] (the bytes of bodies worked
//! on at once), [`error`]
//! (transient / poison / bug), and [`startup`], which wires the worker together for the
//! binary and the integration tests.

pub mod admin;
pub mod amqp;
pub mod backfill;
pub mod budget;
pub mod cmd;
pub mod error;
pub mod event;
pub mod http;
pub mod ids;
pub mod ledger;
pub mod metrics;
pub mod model;
pub mod outbound;
pub mod outbox;
pub mod publish;
pub mod recover;
pub mod retry;
pub mod settings;
pub mod shutdown;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod worker;

pub use toolcall_detect as detect;
