//! The `toolcall-recovery` binary: parses the command line and hands over to the library.

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;
use toolcall_recovery::cmd::{dead_letters, demo, index, ledger, revert, scan};
use toolcall_recovery::settings::{DatabaseSettings, LogSettings, SchemaSettings, Settings};
use toolcall_recovery::{backfill, shutdown, startup, telemetry};

#[derive(Parser)]
// clap's own `help` subcommand refuses `help --help`; ours (`Command::Help`) takes it.
#[command(
    name = "toolcall-recovery",
    version,
    about,
    disable_help_subcommand = true
)]
struct Cli {
    /// How every command logs (`--log-format`, before or after the command).
    #[command(flatten)]
    log: LogSettings,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Detection only, on files or stdin; prints one JSON detection per message. Needs no
    /// database or broker.
    Scan(scan::ScanArgs),
    /// The worker: consumes finalized-message events, recovers leaked tool calls,
    /// republishes every message for moderation.
    Run(Box<Settings>),
    /// Recovery for historical messages: walks the messages table, runs the recovery of
    /// each leak, republishes what changed; `--dry-run` only reports. Resumable.
    Backfill(Box<backfill::BackfillArgs>),
    /// Puts messages back as they were before their latest recovery (from the ledger),
    /// deletes what that recovery created, republishes them for moderation. The messages
    /// by id (`--message`), or every message whose latest ledger row matches the ledger's
    /// filters (`--family`, `--mode`, `--since`, ...), in pages. Exit 0 when every message
    /// is reverted (now or before), 3 when any was refused (changed since recovery, nothing
    /// to revert, not found), 1 on error or when any failed.
    Revert(Box<revert::RevertArgs>),
    /// Builds (or rebuilds, when invalid) the index transcript repair uses on the app's
    /// `messages` table, concurrently, so the app's writes go on. Run it as the owner of
    /// `messages`; the worker works without it, more slowly, and says so at start.
    /// `--check`: its state, exit 3 unless ready; `--sql`: the SQL for a DBA.
    Index(Box<index::IndexArgs>),
    /// Lists the audit ledger: what recovery removed or recorded, newest first, filtered;
    /// `--json` for JSON Lines.
    ///
    /// One line per recovery pass: when, which message and chat, outcome, families, the
    /// calls, bytes removed, observed or reverted. Message content only with
    /// `--show-text`. Reads only; never creates the database.
    Ledger(Box<ledger::LedgerArgs>),
    /// The dead-letter queue: `list` (nothing leaves the queue), `show ID` (headers and
    /// body), `replay` (back to the input exchange, confirmed, counted), `purge` (after a
    /// confirmation).
    DeadLetters(dead_letters::DeadLettersArgs),
    /// See it work: seeds a message with a leaked save_memory call on a development
    /// database, publishes its event, and shows what the running worker made of it (the
    /// cleaned message, the memory, the ledger row, the moderation message, the metrics).
    Demo(Box<demo::DemoArgs>),
    /// Prints this message or the help of the given subcommand(s).
    Help {
        /// The subcommand(s), e.g. `dead-letters replay`.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Applies pending migrations of the worker's own tables (ledger, outbox, checkpoints).
    /// Creates nothing of the chat app's, but for development with --create-app-tables.
    Migrate {
        /// The database.
        #[command(flatten)]
        database: DatabaseSettings,
        /// Development provisioning.
        #[command(flatten)]
        schema: SchemaSettings,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log.log_format);
    match cli.command {
        Command::Scan(args) => match scan::run(&args, &mut std::io::stdout().lock()) {
            Ok(summary) if summary.unreadable == 0 => ExitCode::SUCCESS,
            Ok(_) => ExitCode::from(2),
            Err(e) => {
                eprintln!("toolcall-recovery scan: {e}");
                ExitCode::from(2)
            }
        },
        Command::Run(settings) => block_on("run", async move {
            let running = startup::start(*settings).await?;
            tokio::spawn(shutdown::on_signals(running.trigger()));
            running.wait().await
        }),
        Command::Backfill(args) => {
            block_on(
                "backfill",
                async move { backfill::run(*args).await.map(|_| ()) },
            )
        }
        Command::Revert(args) => {
            let mut summary = revert::RevertSummary::default();
            let code = block_on("revert", async {
                summary = revert::run(&args, &mut std::io::stdout()).await?;
                Ok(())
            });
            if code != ExitCode::SUCCESS {
                code
            } else if summary.failed > 0 {
                ExitCode::from(1)
            } else if summary.refused > 0 {
                ExitCode::from(3)
            } else {
                code
            }
        }
        Command::Ledger(args) => block_on("ledger", async move {
            let mut out = std::io::BufWriter::new(std::io::stdout());
            ledger::run(*args, &mut out).await.map(|_| ())
        }),
        Command::Migrate { database, schema } => block_on("migrate", async move {
            startup::migrate(&database, schema).await
        }),
        Command::DeadLetters(args) => dead_letters(&args),
        Command::Demo(args) => block_on("demo", async move {
            demo::run(&args, &mut std::io::stdout()).await
        }),
        Command::Help { command } => help(&command, &mut std::io::stdout()),
        Command::Index(args) => {
            let mut usable = true;
            let code = block_on("index", async {
                usable = index::run(&args, &mut std::io::stdout()).await?;
                Ok(())
            });
            if code == ExitCode::SUCCESS && !usable {
                ExitCode::from(3)
            } else {
                code
            }
        }
    }
}

/// `dead-letters`: exit 3 when something asked for was not there or a purge not confirmed.
fn dead_letters(args: &dead_letters::DeadLettersArgs) -> ExitCode {
    let mut refused = false;
    let code = block_on("dead-letters", async {
        let ended = dead_letters::run(args, &mut std::io::stdout()).await?;
        refused = ended == dead_letters::Ended::Refused;
        Ok(())
    });
    if code == ExitCode::SUCCESS && refused {
        ExitCode::from(3)
    } else {
        code
    }
}

/// `help [COMMAND]...`: the long help of the command named, as `COMMAND --help` prints it.
fn help(path: &[String], out: &mut dyn Write) -> ExitCode {
    let mut cli = Cli::command();
    cli.build();
    let mut command = &mut cli;
    for name in path {
        match command.find_subcommand_mut(name) {
            Some(sub) => command = sub,
            None => {
                eprintln!("toolcall-recovery help: no command {name:?}; `toolcall-recovery help` lists them");
                return ExitCode::from(2);
            }
        }
    }
    // As `--help` prints it: with a newline at the end, and quietly into a closed pipe.
    let text = command.render_long_help();
    let _ = writeln!(out, "{text}");
    ExitCode::SUCCESS
}

fn block_on(
    what: &str,
    f: impl std::future::Future<Output = Result<(), toolcall_recovery::error::Error>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolcall-recovery {what}: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(f) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            failed(what, &e);
            ExitCode::from(1)
        }
    }
}

/// Says once that a command failed, `toolcall-recovery COMMAND: ERROR`: as an ERROR line of
/// the log (JSON where the log is), or, when `RUST_LOG` hides ERROR lines, as a plain line,
/// so it is never silent.
fn failed(what: &str, error: &dyn std::fmt::Display) {
    if tracing::enabled!(tracing::Level::ERROR) {
        tracing::error!("toolcall-recovery {what}: {error}");
    } else {
        eprintln!("toolcall-recovery {what}: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_takes_help_and_names_subcommands() {
        let err = Cli::try_parse_from(["toolcall-recovery", "help", "--help"])
            .err()
            .map(|e| e.kind());
        assert_eq!(err, Some(clap::error::ErrorKind::DisplayHelp));
        let mut out = Vec::new();
        let replay = ["dead-letters".to_string(), "replay".to_string()];
        assert_eq!(help(&replay, &mut out), ExitCode::SUCCESS);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("Usage: toolcall-recovery dead-letters replay"),
            "{text}"
        );
        let unknown = ["no-such-command".to_string()];
        assert_eq!(help(&unknown, &mut Vec::new()), ExitCode::from(2));
    }

    /// Every enumerated flag refuses a value it does not know, naming the valid ones (a typo
    /// must not select nothing and exit 0), and takes a valid one.
    #[test]
    fn every_enumerated_flag_refuses_unknown_values_with_the_list() {
        // (the command line before the flag, the flag, a typo, a value the list names, a
        // valid value)
        let cases: &[(&[&str], &str, &str, &str, &str)] = &[
            (
                &["dead-letters", "list"],
                "--reason",
                "missing-message",
                "missing_message",
                "delivery_limit",
            ),
            (
                &["dead-letters", "replay"],
                "--reason",
                "missing-message",
                "malformed_json",
                "missing_message",
            ),
            (
                &["dead-letters", "purge", "--yes"],
                "--reason",
                "nosuchreason",
                "internal_error",
                "unknown",
            ),
            (
                &["ledger"],
                "--outcome",
                "recoverd",
                "needs_review",
                "recovered",
            ),
            (&["ledger"], "--family", "hermez", "result_prefix", "hermes"),
            (&["ledger"], "--mode", "recovr", "observe", "recover"),
            (
                &["revert"],
                "--outcome",
                "recoverd",
                "needs_review",
                "recovered",
            ),
            (&["revert"], "--family", "hermez", "result_prefix", "hermes"),
            (&["revert"], "--mode", "obsrve", "observe", "observe"),
            (&["run"], "--mode", "obsrve", "recover", "observe"),
            (
                &["run"],
                "--families-disabled",
                "pythonic,hermez",
                "json_fence",
                "pythonic",
            ),
            (
                &["run"],
                "--families-observe",
                "jsonfence",
                "json_fence",
                "json_fence",
            ),
            (&["backfill"], "--mode", "obsrve", "recover", "observe"),
            (
                &["scan"],
                "--families-disabled",
                "hermez",
                "hermes",
                "hermes",
            ),
            (&["scan"], "--log-format", "jsn", "pretty", "json"),
        ];
        for (before, flag, typo, named, valid) in cases {
            let line = |value: &str| {
                let mut v = vec!["toolcall-recovery"];
                v.extend_from_slice(before);
                v.push(flag);
                v.push(value);
                v.into_iter().map(str::to_string).collect::<Vec<_>>()
            };
            let err = match Cli::try_parse_from(line(typo)) {
                Ok(_) => panic!("{before:?} {flag} {typo} was taken"),
                Err(e) => e,
            };
            assert!(
                matches!(
                    err.kind(),
                    clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
                ),
                "{before:?} {flag}: {err}"
            );
            let text = err.to_string();
            assert!(
                text.contains(typo) && text.contains(named),
                "{before:?} {flag} {typo}: the error names the valid values: {text}"
            );
            if let Err(e) = Cli::try_parse_from(line(valid)) {
                panic!("{before:?} {flag} {valid} is valid: {e}");
            }
        }
    }
}
