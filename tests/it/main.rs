//! Integration tests: one binary, real PostgreSQL and RabbitMQ. See `harness` for how each
//! test gets its own database and broker names.

mod admin;
mod backfill;
mod batched;
mod dead_letters;
mod demo;
mod faults;
mod group_commit;
mod harness;
mod http_limits;
mod hung;
mod idempotency;
mod ledger;
mod logs;
mod memory;
mod migrations;
mod models;
mod outbox;
mod poison;
mod process;
mod recovery_table;
mod reliability;
mod revert;
mod rollout;
mod startup;
mod unexamined;
