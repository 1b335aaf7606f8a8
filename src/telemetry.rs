//! The tracing subscriber: one function builds it from the log format. Filtering comes
//! from `RUST_LOG` (default `info`). Message content is only ever logged at `debug`/`trace`
//! (lapin's returned-message log, which carries the body, is held at `error`).
//!
//! May depend on: `settings`, `tracing-subscriber`.

use crate::settings::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Calling it twice is harmless (the second does nothing).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // lapin logs a returned (unroutable) message whole, body included, at WARN: that body
    // is message content. Forced off whatever RUST_LOG says, so no setting leaks content.
    let filter = match "lapin::returned_messages=error".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
