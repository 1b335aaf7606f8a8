//! The `toolcall-recovery` binary: parses the command line and hands over to the library.

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use toolcall_recovery::scan;

#[derive(Parser)]
#[command(name = "toolcall-recovery", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Detection only, on files or stdin; prints one JSON detection per message. Needs no
    /// database or broker.
    Scan(scan::ScanArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Scan(args) => match scan::run(&args, &mut std::io::stdout().lock()) {
            Ok(summary) if summary.unreadable == 0 => ExitCode::SUCCESS,
            Ok(_) => ExitCode::from(2),
            Err(e) => {
                eprintln!("toolcall-recovery scan: {e}");
                ExitCode::from(2)
            }
        },
    }
}
