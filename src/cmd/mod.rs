//! The one-off commands that are not a service of their own: `scan` (detection offline),
//! `ledger` (the audit ledger read back), `revert` (undo a recovery), `index` (the
//! transcript-repair index on the app's table), `dead-letters` (the dead-letter queue:
//! list, show, replay, purge) and `demo` (one leak recovered end to end, on a development
//! database). The worker (`run`) is `startup` + `worker`, the backfill is `backfill`;
//! `main.rs` only parses and dispatches. The two commands that talk to the broker on their
//! own open their connection here ([`confirm_channel`]).
//!
//! May depend on: everything below the commands (`recover`, `ledger`, `publish`, `amqp`
//! (the broker URL), `store`, `settings`, `error`, `toolcall_detect`, `lapin`); never on
//! `worker`, `admin`, `backfill` or on each other.

pub mod dead_letters;
pub mod demo;
pub mod index;
pub mod ledger;
pub mod revert;
pub mod scan;

use crate::error::Error;
use crate::settings::SecretUrl;
use lapin::options::ConfirmSelectOptions;
use lapin::types::LongString;
use lapin::{Channel, Connection, ConnectionProperties};

/// A broker connection named `name` (as `rabbitmqctl list_connections` shows it) with one
/// channel in confirm mode: how `dead-letters` and `demo` reach the broker, publishing with
/// [`crate::publish::publish_confirmed`].
async fn confirm_channel(url: &SecretUrl, name: &str) -> Result<(Connection, Channel), Error> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio)
        .with_connection_name(LongString::from(name.to_string()));
    let connection = Connection::connect_uri(crate::amqp::uri(url)?, props).await?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok((connection, channel))
}
