//! The settings, typed, read from flags and environment by clap: the groups several commands
//! share (database, broker and exchanges, recovery policy, model list, the log format), the
//! worker's ([`Settings`], for `run`) and the limits of its HTTP server. Each one-off
//! command's own flags live with the command (`backfill::BackfillArgs`,
//! `cmd::ledger::LedgerArgs`, ...), which flattens these groups: no module has to import
//! another one's settings. The log format is one flag of the binary, shared by every
//! command ([`LogSettings`]).
//!
//! Secrets are wrapped ([`SecretUrl`], [`AdminToken`], in `secret`) so that settings can be
//! logged whole.
//!
//! May depend on: `clap`, `recover` (the policy it builds), `model` (the model list it
//! reads), `toolcall_detect` (family names). No I/O.

mod secret;

pub use secret::{AdminToken, SecretUrl};

use crate::model::{self, Models};
use crate::recover::{Mode, Policy};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `pretty` when stderr is a terminal, `json` otherwise (a file, a pipe, a container's
    /// log collector).
    Auto,
    /// One JSON object per line (production).
    Json,
    /// Human-readable (development); coloured only on a terminal.
    Pretty,
}

/// How every command logs: one flag of the binary, given before or after the command.
#[derive(Debug, Clone, Copy, Args)]
pub struct LogSettings {
    /// Log format (logs go to stderr): `auto` is `pretty` on a terminal and `json`
    /// otherwise. `RUST_LOG` filters (default `info`).
    #[arg(
        long,
        env = "TCR_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Auto,
        global = true
    )]
    pub log_format: LogFormat,
}

/// The limits of the HTTP server (`http::serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once.
    pub connections: usize,
    /// Time a client has to send a request's headers, from connecting (or, on a
    /// keep-alive connection, from its first byte).
    pub header_read: Duration,
    /// Time a connection may stay with no bytes read or written before it is closed (a
    /// request being answered keeps it: it is closed after the response).
    pub idle: Duration,
}

impl Default for HttpLimits {
    /// The defaults of `run`'s settings.
    fn default() -> Self {
        HttpLimits {
            connections: 256,
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(60),
        }
    }
}

/// What detection looks for: shared by `scan`, `run` and `backfill`.
#[derive(Debug, Clone, Args)]
pub struct DetectSettings {
    /// Memory types save_memory accepts, comma-separated.
    #[arg(
        long,
        env = "TCR_MEMORY_TYPES",
        value_delimiter = ',',
        default_value = "journal,core,fact,preference,goal,relationship"
    )]
    pub memory_types: Vec<String>,

    /// Detection families switched off, comma-separated (e.g. `pythonic,llama3_json`): their
    /// leaks are not detected, and their markup is left as it is.
    #[arg(
        long,
        env = "TCR_FAMILIES_DISABLED",
        value_parser = parse_family_list,
        default_value = ""
    )]
    pub families_disabled: FamilyList,
}

impl DetectSettings {
    /// The detection config these settings describe.
    pub fn config(&self) -> toolcall_detect::Config {
        self.families_disabled.0.iter().fold(
            toolcall_detect::Config::default().with_memory_types(&self.memory_types),
            |c, f| c.disable(*f),
        )
    }
}

/// The recovery policy: detection, the mode, the families held in observe mode. Shared by
/// `run` (worker and admin API) and `backfill`.
#[derive(Debug, Clone, Args)]
pub struct PolicySettings {
    /// Detection.
    #[command(flatten)]
    pub detect: DetectSettings,

    /// `recover` changes messages; `observe` records in the ledger and the metrics what
    /// recovery would do and changes nothing else.
    #[arg(long, env = "TCR_MODE", value_enum, default_value_t = Mode::Recover)]
    pub mode: Mode,

    /// Families held in observe mode whatever `--mode` says, comma-separated (e.g.
    /// `json_fence`): a message with a leak of one of them is only observed. A family that
    /// is also disabled stays disabled.
    #[arg(
        long,
        env = "TCR_FAMILIES_OBSERVE",
        value_parser = parse_family_list,
        default_value = ""
    )]
    pub families_observe: FamilyList,
}

impl PolicySettings {
    /// The policy these settings describe.
    pub fn policy(&self) -> Policy {
        self.families_observe.0.iter().fold(
            Policy::new(self.detect.config()).with_mode(self.mode),
            |p, f| p.observe(*f),
        )
    }
}

/// A comma-separated list of family names. Empty items are skipped, so an empty or unset
/// variable (`TCR_FAMILIES_DISABLED=`) means no family, as an operator would expect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FamilyList(pub Vec<toolcall_detect::Family>);

fn parse_family_list(s: &str) -> Result<FamilyList, String> {
    s.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(parse_family)
        .collect::<Result<Vec<_>, _>>()
        .map(FamilyList)
}

/// A family name, or an error listing the valid ones.
pub fn parse_family(s: &str) -> Result<toolcall_detect::Family, String> {
    toolcall_detect::Family::from_name(s.trim()).ok_or_else(|| {
        let names: Vec<&str> = toolcall_detect::Family::ALL
            .iter()
            .map(|f| f.as_str())
            .collect();
        format!("unknown family {s:?}; families are: {}", names.join(", "))
    })
}

/// Which model names the per-model metrics, the backfill's breakdown by model and `ledger
/// --model` keep as labels. Shared by `run`, `backfill` and `ledger`.
#[derive(Debug, Clone, Args)]
pub struct ModelSettings {
    /// Model names kept as the `model` label of the per-model metrics (leak rates by
    /// model), comma-separated; a trailing `*` makes a prefix (`gemini-2.5*`), the longest
    /// matching prefix wins. Any other model counts as `other`, an event without one as
    /// `unknown`: the label has these values and no others, whatever the events carry.
    /// Ids are normalised first (case, provider paths such as `models/` or
    /// `openrouter/anthropic/`, `:tag`, `@version`, Bedrock's `us.anthropic.`, snapshot
    /// suffixes such as `-2024-08-06`, `-20241022`, `-0613`, `-latest`, `-preview-05-20`),
    /// so one model is one series. Replaces the default list, the widely deployed model
    /// lines; empty: every model is `other`.
    #[arg(
        long = "models",
        env = "TCR_MODELS",
        value_name = "NAME[*],...",
        value_parser = parse_models,
        default_value = model::DEFAULT_LIST
    )]
    pub models: Models,
}

fn parse_models(s: &str) -> Result<Models, String> {
    Models::parse(s)
}

/// The AMQP heartbeat asked for when `AMQP_URL` names none (`--amqp-heartbeat-secs`): a
/// frozen node is noticed within two of them.
pub const DEFAULT_HEARTBEAT_SECS: u16 = 5;

/// How long one step of opening a broker connection may take by default
/// (`--broker-step-timeout-secs`).
pub const DEFAULT_STEP_TIMEOUT_SECS: u64 = 5;

/// Where the worker and the one-off commands (backfill, revert) publish: the broker and the
/// two output exchanges.
#[derive(Debug, Clone, Args)]
pub struct PublishSettings {
    /// RabbitMQ URL (`amqps://` for TLS).
    #[arg(
        long,
        env = "AMQP_URL",
        hide_env_values = true,
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    pub amqp_url: SecretUrl,

    /// AMQP heartbeat in seconds asked of the broker (the lower of the two applies): a
    /// broker node that stops answering (frozen, a half-open connection) is given up after
    /// two heartbeats without a frame from it, and the worker reconnects. RabbitMQ advises
    /// 5-20 s; its own default, 60 s, takes two minutes to notice. A `heartbeat=` in
    /// `AMQP_URL` wins; 0 takes the broker's value.
    #[arg(long, env = "TCR_AMQP_HEARTBEAT_SECS", default_value_t = DEFAULT_HEARTBEAT_SECS)]
    pub amqp_heartbeat_secs: u16,

    /// Seconds each step of opening a broker connection may take: TCP, TLS and the AMQP
    /// handshake; a channel; the declarations; qos; consume. A step that takes longer gives
    /// the connection up and the next attempt (with backoff) starts over, so a node that
    /// does not answer holds no step longer than this.
    #[arg(
        long,
        env = "TCR_BROKER_STEP_TIMEOUT_SECS",
        default_value_t = DEFAULT_STEP_TIMEOUT_SECS
    )]
    pub broker_step_timeout_secs: u64,

    /// Topic exchange messages are published to for moderation (routing key
    /// `message.ready`).
    #[arg(
        long,
        env = "TCR_MODERATION_EXCHANGE",
        default_value = "chat.moderation"
    )]
    pub moderation_exchange: String,

    /// Topic exchange unrunnable calls are published to (routing key
    /// `tool_call.recovered`).
    #[arg(
        long,
        env = "TCR_TOOL_CALLS_EXCHANGE",
        default_value = "chat.tool_calls"
    )]
    pub tool_calls_exchange: String,
}

/// The database URL when none is given: the local development database.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/toolcall_recovery";

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DatabaseSettings {
    /// PostgreSQL URL (`sslmode=require` for TLS). The worker never creates a database or the
    /// chat app's tables, but for development (see --create-app-tables).
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = DEFAULT_DATABASE_URL
    )]
    pub database_url: SecretUrl,

    /// Maximum connections in the database pool.
    #[arg(long, env = "TCR_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,
}

impl DatabaseSettings {
    /// Whether this is the built-in local development URL (no `DATABASE_URL` given).
    pub fn is_builtin_default(&self) -> bool {
        self.database_url.expose() == DEFAULT_DATABASE_URL
    }
}

/// What `run --migrate` and `migrate` may create besides the worker's own tables.
#[derive(Debug, Clone, Copy, Args)]
pub struct SchemaSettings {
    /// Development only: create the database when it is missing, and the chat app's tables
    /// (contract §4) when none of them exists. Implied by `run --migrate` with the built-in
    /// local DATABASE_URL, so the README's run command works on a fresh machine. Never use
    /// it in production: there the app owns its database, and a mistyped URL must stop the
    /// start instead of creating an empty one.
    #[arg(long, env = "TCR_CREATE_APP_TABLES")]
    pub create_app_tables: bool,
}

/// The broker's names the worker consumes from: the input exchange and queue and the
/// dead-lettering (the exchanges it publishes to are [`PublishSettings`]).
#[derive(Debug, Clone, Args)]
pub struct Names {
    /// Topic exchange the chat app publishes events to.
    #[arg(long, env = "TCR_INPUT_EXCHANGE", default_value = "chat.events")]
    pub input_exchange: String,
    /// Routing key of finalized messages.
    #[arg(
        long,
        env = "TCR_INPUT_ROUTING_KEY",
        default_value = "message.finalized"
    )]
    pub input_routing_key: String,
    /// Durable quorum queue the worker consumes.
    #[arg(long, env = "TCR_QUEUE", default_value = "toolcall-recovery.finalized")]
    pub queue: String,
    /// Exchange poison deliveries are dead-lettered to.
    #[arg(
        long,
        env = "TCR_DEAD_LETTER_EXCHANGE",
        default_value = "toolcall-recovery.dlx"
    )]
    pub dead_letter_exchange: String,
    /// Queue that keeps dead-lettered deliveries.
    #[arg(
        long,
        env = "TCR_DEAD_LETTER_QUEUE",
        default_value = "toolcall-recovery.dead"
    )]
    pub dead_letter_queue: String,
}

/// Settings of the admin API, to flatten into the worker's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct AdminSettings {
    /// Bearer token of the admin API (prefer the environment); without one the API
    /// answers 404.
    #[arg(long, env = "TCR_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<AdminToken>,

    /// Seconds an admin request may take before it is answered 503 `timeout`.
    #[arg(long, env = "TCR_ADMIN_TIMEOUT_SECS", default_value_t = 10)]
    pub admin_timeout_secs: u64,
}

/// Settings of `run`.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// The database.
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// The broker and the exchanges the worker publishes to.
    #[command(flatten)]
    pub publish: PublishSettings,

    /// Name the worker's broker connections carry (`connection_name` in `rabbitmqctl
    /// list_connections client_properties`).
    #[arg(long, env = "TCR_CONNECTION_NAME", default_value = "toolcall-recovery")]
    pub connection_name: String,

    /// Exchange and queue names.
    #[command(flatten)]
    pub names: Names,

    /// Unacked deliveries the broker may hand this worker at once. Every clean message waits
    /// one publisher-confirm round trip, so this window, not the CPU, bounds the clean
    /// path: 32 reached 55% of the bare broker's best, 256 reaches 80-94% (BENCHMARKS.md
    /// §2). Memory: up to this many event bodies (`--max-body-bytes` each) at once.
    #[arg(long, env = "TCR_PREFETCH", default_value_t = 256)]
    pub prefetch: u16,

    /// Recovery transactions at once (leaks; clean messages take none). With 100% leaks,
    /// 2-4 with 64 per commit beat 8 with 16 by a third (fuller batches: BENCHMARKS.md §2);
    /// 4 leaves room for a row the app holds, which a recovery waits for.
    #[arg(long, env = "TCR_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,

    /// Most leaked messages recovered in one transaction when leaks queue up (group commit;
    /// a lone leak is never held back to fill a batch). 1 commits every recovery alone.
    /// At the defaults `--concurrency` × this is `--prefetch`: a full window of leaks fits
    /// the committers.
    #[arg(long, env = "TCR_RECOVERIES_PER_COMMIT", default_value_t = 64)]
    pub recoveries_per_commit: usize,

    /// `x-delivery-limit` of the queue: deliveries after which the broker dead-letters a
    /// message by itself (the backstop for messages that crash the worker).
    #[arg(long, env = "TCR_DELIVERY_LIMIT", default_value_t = 20)]
    pub delivery_limit: u32,

    /// Largest event body accepted, in bytes; larger ones are dead-lettered.
    #[arg(long, env = "TCR_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Bytes of event bodies worked on at once (the byte budget). The prefetch counts
    /// deliveries only, so the worker sizes its window from the bodies it sees (starting
    /// at this budget / --max-body-bytes, lowered at once when large bodies arrive, grown
    /// back while they are small, up to --prefetch), and processes at most this many bytes
    /// at once (a larger body alone). Memory follows it: BENCHMARKS.md §6.
    #[arg(long, env = "TCR_MAX_IN_FLIGHT_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_in_flight_bytes: usize,

    /// The recovery policy (memory types, mode, family switches).
    #[command(flatten)]
    pub policy: PolicySettings,

    /// The models the per-model metrics keep apart.
    #[command(flatten)]
    pub models: ModelSettings,

    /// Address of the HTTP server (/metrics, /healthz, /readyz); port 0 picks one.
    #[arg(long, env = "TCR_HTTP_ADDR", default_value = "0.0.0.0:9090")]
    pub http_addr: SocketAddr,

    /// HTTP connections open at once; more wait in the listen backlog until one closes.
    #[arg(long, env = "TCR_HTTP_MAX_CONNECTIONS", default_value_t = 256)]
    pub http_max_connections: usize,

    /// Seconds a client has to send its request headers (a slow client cannot hold a
    /// connection by trickling them).
    #[arg(long, env = "TCR_HTTP_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub http_header_timeout_secs: u64,

    /// Seconds an HTTP connection may stay idle (no bytes either way) before it is closed.
    #[arg(long, env = "TCR_HTTP_IDLE_TIMEOUT_SECS", default_value_t = 60)]
    pub http_idle_timeout_secs: u64,

    /// Seconds to wait for in-flight deliveries on shutdown before closing anyway.
    #[arg(long, env = "TCR_DRAIN_TIMEOUT_SECS", default_value_t = 30)]
    pub drain_timeout_secs: u64,

    /// Seconds an event whose message is not in the database (yet) is retried before it is
    /// dead-lettered as `missing_message`: the app may publish before its commit is
    /// visible, or the database may be a lagging replica.
    #[arg(long, env = "TCR_MISSING_MESSAGE_RETRY_SECS", default_value_t = 30)]
    pub missing_message_retry_secs: u64,

    /// Seconds between two sweeps of the outbox relay, which sends publishes that stayed
    /// pending (broker outage, unroutable, a crash between commit and confirm).
    #[arg(long, env = "TCR_OUTBOX_RELAY_SECS", default_value_t = 5)]
    pub outbox_relay_secs: u64,

    /// Seconds a pending outbox row is left to the process that wrote it before the relay
    /// sends it (the writer normally sends it within milliseconds).
    #[arg(long, env = "TCR_OUTBOX_GRACE_SECS", default_value_t = 30)]
    pub outbox_grace_secs: u64,

    /// Apply pending migrations on start instead of refusing to start.
    #[arg(long, env = "TCR_MIGRATE")]
    pub migrate: bool,

    /// Development provisioning (with --migrate).
    #[command(flatten)]
    pub schema: SchemaSettings,

    /// The admin API on the same port (off without a token).
    #[command(flatten)]
    pub admin: AdminSettings,
}

impl Settings {
    /// The drain timeout.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs(self.drain_timeout_secs)
    }

    /// The recovery policy these settings describe.
    pub fn policy(&self) -> Policy {
        self.policy.policy()
    }

    /// The HTTP server's limits.
    pub fn http_limits(&self) -> HttpLimits {
        HttpLimits {
            connections: self.http_max_connections.max(1),
            header_read: Duration::from_secs(self.http_header_timeout_secs.max(1)),
            idle: Duration::from_secs(self.http_idle_timeout_secs.max(1)),
        }
    }

    /// Whether `run` may create a development database and the app's tables: with
    /// `--migrate`, and `--create-app-tables` or the built-in local URL.
    pub fn provisions_development(&self) -> bool {
        self.migrate && (self.schema.create_app_tables || self.database.is_builtin_default())
    }

    /// How long a missing message is waited for.
    pub fn missing_message_window(&self) -> Duration {
        Duration::from_secs(self.missing_message_retry_secs)
    }
}

#[cfg(test)]
mod tests;
