//! The flags of `dead-letters` and its actions, and which dead letters a replay or a purge
//! selects.
//!
//! May depend on: `settings`, `error` (the worker's reasons).

use super::DeadLetter;
use crate::settings::{Names, PublishSettings};

/// The broker and the names of the worker's queues, as for `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct Broker {
    /// The broker (its URL; the exchanges are not used here).
    #[command(flatten)]
    pub publish: PublishSettings,

    /// The input exchange replays go to, and the dead-letter queue.
    #[command(flatten)]
    pub names: Names,

    /// Name of the command's broker connection.
    #[arg(long, default_value = "toolcall-recovery-dead-letters")]
    pub connection_name: String,
}

/// Flags of `toolcall-recovery dead-letters`.
#[derive(Debug, Clone, clap::Args)]
pub struct DeadLettersArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The actions of `dead-letters`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// Lists the dead letters, oldest first: id, age, reason (`x-tcr-reason`), message id,
    /// replays, event id. Nothing leaves the queue: each is taken and given back.
    List(ListArgs),
    /// Prints one dead letter: what it says, every header, and the body. Exit 3 when there
    /// is none with that id.
    Show(ShowArgs),
    /// Publishes dead letters back to the input exchange under their original routing key,
    /// each confirmed by the broker before it leaves the dead-letter queue, and counted in
    /// its `x-tcr-replays` header. Safe: the worker is idempotent, and an interrupted replay
    /// loses nothing (at worst an event is replayed and still dead). Exit 3 when an id given
    /// was not found.
    Replay(ReplayArgs),
    /// Deletes dead letters for good, after asking (`--yes` in scripts); only those counted
    /// when it asked. Exit 3 when not confirmed.
    Purge(PurgeArgs),
}

/// Flags of `dead-letters list`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// The broker and the names.
    #[command(flatten)]
    pub broker: Broker,

    /// Only dead letters with this reason (`missing_message`, `malformed_json`, ...; an
    /// unknown one is refused with the list).
    #[arg(long, value_parser = parse_reason)]
    pub reason: Option<String>,

    /// Dead letters looked at, at most (from the head of the queue).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,

    /// One JSON object per dead letter (JSON Lines), without the summary line.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `dead-letters show`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// The broker and the names.
    #[command(flatten)]
    pub broker: Broker,

    /// The dead letter: the ID `list` shows, or its event id.
    pub id: String,

    /// One JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Which dead letters a replay or a purge takes: one of the three.
#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Selection {
    /// Every dead letter in the queue.
    #[arg(long)]
    pub all: bool,

    /// Those with this reason (`missing_message`, ...; `delivery_limit` for those the broker
    /// dead-lettered; an unknown one is refused with the list).
    #[arg(long, value_parser = parse_reason)]
    pub reason: Option<String>,

    /// These: the IDs `list` shows, or event ids.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
}

/// `--reason`: a reason a dead letter can carry ([`super::reasons`]), or an error
/// listing them (a typo must not select nothing and exit 0).
pub fn parse_reason(s: &str) -> Result<String, String> {
    let s = s.trim();
    if super::reasons().any(|r| r == s) {
        return Ok(s.to_string());
    }
    let valid: Vec<&str> = super::reasons().collect();
    Err(format!("unknown reason {s:?}; valid: {}", valid.join(", ")))
}

impl Selection {
    pub(super) fn takes(&self, letter: &DeadLetter) -> bool {
        if self.all {
            return true;
        }
        if let Some(reason) = &self.reason {
            return letter.reason == *reason;
        }
        self.ids.iter().any(|id| letter.is(id))
    }

    pub(super) fn describe(&self) -> String {
        match (&self.reason, self.all) {
            (_, true) => "all".to_string(),
            (Some(r), _) => format!("reason {r}"),
            (None, false) => format!("id {}", self.ids.join(", ")),
        }
    }

    /// The ids given that no dead letter in `seen` answers to.
    pub(super) fn missing(&self, seen: &[String]) -> Vec<String> {
        self.ids
            .iter()
            .filter(|id| !seen.iter().any(|s| s.eq_ignore_ascii_case(id.trim())))
            .cloned()
            .collect()
    }
}

/// Flags of `dead-letters replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The broker and the names.
    #[command(flatten)]
    pub broker: Broker,

    /// Which dead letters.
    #[command(flatten)]
    pub selection: Selection,
}

/// Flags of `dead-letters purge`.
#[derive(Debug, Clone, clap::Args)]
pub struct PurgeArgs {
    /// The broker and the names.
    #[command(flatten)]
    pub broker: Broker,

    /// Which dead letters.
    #[command(flatten)]
    pub selection: Selection,

    /// Do not ask: delete them (for scripts).
    #[arg(long)]
    pub yes: bool,
}

impl DeadLettersArgs {
    pub(super) fn broker(&self) -> &Broker {
        match &self.action {
            Action::List(a) => &a.broker,
            Action::Show(a) => &a.broker,
            Action::Replay(a) => &a.broker,
            Action::Purge(a) => &a.broker,
        }
    }
}
