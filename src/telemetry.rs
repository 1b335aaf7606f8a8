//! The tracing subscriber: one function ([`init`]) builds it from the log format and
//! `RUST_LOG` (default `info`).
//!
//! **The levels are ours.** An ERROR line means a bug of ours, a WARN an expected fault the
//! process handles (README, docs/operations.md), so an alert on ERROR lines fires only for
//! what needs a person. The crates under us do not share that meaning: lapin logs a broker
//! closing the connection at ERROR, several lines per event and again at each retry, and
//! pinky_swear warns about a promise dropped at a clean shutdown. The worker says what
//! happened itself, once, at the level it chose. So an event at WARN or ERROR from any
//! crate but ours is shown at DEBUG ([`shown_level`]): it is filtered as a DEBUG event
//! (hidden by default, there with `RUST_LOG=lapin=debug`) and labelled DEBUG when shown.
//! Whatever `RUST_LOG` says, a third party cannot raise an expected event to ERROR. So is
//! an INFO event of the targets in [`QUIET_INFO`]: sqlx's pool says "ping on idle
//! connection returned error" at INFO for every pooled connection a database restart (or
//! a killed backend) closed, and the pool replaces them; the worker says what matters of
//! a database fault itself (its retries, at WARN).
//!
//! The format: `--log-format auto` (the default) is pretty on a terminal and JSON
//! otherwise; colour only when stderr is a terminal, never into a file or a pipe.
//!
//! Message content is only ever logged at `debug`/`trace`; lapin's returned-message log,
//! which carries the body, is off whatever `RUST_LOG` says.
//!
//! May depend on: `settings`, `tracing-subscriber`.

use crate::settings::LogFormat;
use std::fmt;
use std::io::IsTerminal;
use tracing::field::FieldSet;
use tracing::metadata::{Kind, LevelFilter};
use tracing::subscriber::Interest;
use tracing::{span, Event, Level, Metadata, Subscriber};
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// The crates whose levels are ours (an event's target starts with its crate's name).
const OURS: [&str; 2] = ["toolcall_recovery", "toolcall_detect"];

/// Third-party targets whose INFO events are expected faults handled beneath us, shown at
/// DEBUG like their WARN and ERROR (`RUST_LOG=sqlx=debug` shows them).
const QUIET_INFO: [&str; 1] = ["sqlx_core::pool"];

/// Installs the global subscriber, writing to stderr. Calling it twice is harmless (the
/// second does nothing).
pub fn init(format: LogFormat) {
    let terminal = std::io::stderr().is_terminal();
    let layer = layer(
        resolve(format, terminal),
        terminal,
        filter(std::env::var("RUST_LOG").ok().as_deref()),
        std::io::stderr,
    );
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// `auto` is pretty on a terminal, JSON otherwise.
fn resolve(format: LogFormat, terminal: bool) -> LogFormat {
    match format {
        LogFormat::Auto if terminal => LogFormat::Pretty,
        LogFormat::Auto => LogFormat::Json,
        chosen => chosen,
    }
}

/// `directives` (`RUST_LOG`; `info` when unset or unreadable), with lapin's
/// returned-message log off: it logs a returned (unroutable) message whole, and the body
/// is message content.
fn filter(directives: Option<&str>) -> EnvFilter {
    let filter = directives
        .and_then(|d| EnvFilter::try_new(d).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    match "lapin::returned_messages=off".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// The level an event is shown at: its own for ours (and for every span), DEBUG for a
/// third party's WARN and ERROR, and for the INFO of [`QUIET_INFO`].
pub fn shown_level(meta: &Metadata<'_>) -> Level {
    let level = *meta.level();
    let target = meta.target();
    let quiet = |at: Level| {
        level <= at && !is_ours(target) && (at == Level::WARN || is_in(&QUIET_INFO, target))
    };
    if meta.is_event() && (quiet(Level::WARN) || quiet(Level::INFO)) {
        Level::DEBUG
    } else {
        level
    }
}

fn is_ours(target: &str) -> bool {
    is_in(&OURS, target)
}

/// Whether `target` is one of `names` or inside one (`name::...`).
fn is_in(names: &[&str], target: &str) -> bool {
    names.iter().any(|name| {
        target
            .strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

/// The formatting layer: `format` (resolved), colour when `ansi`, filtered by `env` at
/// the levels events are shown at, written to `writer`.
fn layer<S, W>(
    format: LogFormat,
    ansi: bool,
    env: EnvFilter,
    writer: W,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let shown = Shown(env);
    let base = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Json => base
            .json()
            .with_ansi(false)
            .event_format(Leveled {
                inner: format::format()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_level(false),
                json: true,
            })
            .with_filter(shown)
            .boxed(),
        LogFormat::Pretty | LogFormat::Auto => base
            .with_ansi(ansi)
            .event_format(Leveled {
                inner: format::format().without_time().with_level(false),
                json: false,
            })
            .with_filter(shown)
            .boxed(),
    }
}

/// `RUST_LOG`'s filter, asked about an event at the level it is shown at.
struct Shown(EnvFilter);

impl<S: Subscriber> Filter<S> for Shown {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        let level = shown_level(meta);
        if level == *meta.level() {
            return Filter::enabled(&self.0, meta, cx);
        }
        // The same event at its shown level. Its fields are left out: a directive that
        // names fields does not match a demoted event.
        let demoted = Metadata::new(
            meta.name(),
            meta.target(),
            level,
            meta.file(),
            meta.line(),
            meta.module_path(),
            FieldSet::new(&[], meta.callsite()),
            Kind::EVENT,
        );
        Filter::enabled(&self.0, &demoted, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if shown_level(meta) == *meta.level() {
            Filter::<S>::callsite_enabled(&self.0, meta)
        } else {
            // Demoted: asked per event, at its shown level (`enabled`).
            Interest::sometimes()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Filter::<S>::max_level_hint(&self.0)
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, cx: Context<'_, S>) {
        Filter::on_new_span(&self.0, attrs, id, cx);
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, cx: Context<'_, S>) {
        Filter::on_record(&self.0, id, values, cx);
    }

    fn on_enter(&self, id: &span::Id, cx: Context<'_, S>) {
        Filter::on_enter(&self.0, id, cx);
    }

    fn on_exit(&self, id: &span::Id, cx: Context<'_, S>) {
        Filter::on_exit(&self.0, id, cx);
    }

    fn on_close(&self, id: span::Id, cx: Context<'_, S>) {
        Filter::on_close(&self.0, id, cx);
    }
}

/// An event formatted by `inner` (which prints no level, and no time when text), behind the
/// time and the level it is shown at.
struct Leveled<F> {
    inner: F,
    json: bool,
}

impl<S, N, F> FormatEvent<S, N> for Leveled<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = shown_level(event.metadata());
        if self.json {
            let mut line = String::new();
            self.inner
                .format_event(ctx, Writer::new(&mut line), event)?;
            // The object `inner` wrote, with the level as its first key.
            let rest = line.strip_prefix('{').ok_or(fmt::Error)?;
            return write!(w, "{{\"level\":\"{level}\",{rest}");
        }
        let (dim, colour, reset) = if w.has_ansi_escapes() {
            ("\x1b[2m", colour(level), "\x1b[0m")
        } else {
            ("", "", "")
        };
        w.write_str(dim)?;
        if SystemTime.format_time(&mut w).is_err() {
            w.write_str("<unknown time>")?;
        }
        write!(w, "{reset} {colour}{:>5}{reset} ", level.as_str())?;
        self.inner.format_event(ctx, w, event)
    }
}

/// The colour of a level on a terminal (as tracing-subscriber's own).
fn colour(level: Level) -> &'static str {
    match level {
        Level::ERROR => "\x1b[31m",
        Level::WARN => "\x1b[33m",
        Level::INFO => "\x1b[32m",
        Level::DEBUG => "\x1b[34m",
        Level::TRACE => "\x1b[35m",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the layer wrote.
    #[derive(Clone, Default)]
    struct Written(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines `emit` logs through the layer of `format` under `directives`.
    fn logged(format: LogFormat, ansi: bool, directives: &str, emit: impl FnOnce()) -> String {
        let written = Written::default();
        let sink = written.clone();
        let subscriber = tracing_subscriber::registry().with(layer(
            format,
            ansi,
            filter(Some(directives)),
            move || sink.clone(),
        ));
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = written.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    fn faults() {
        tracing::error!(target: "lapin::io_loop", "error doing IO");
        tracing::warn!(target: "pinky_swear", "Failed resolving promise");
        tracing::info!(target: "lapin::connection", "a third party's info");
        tracing::warn!(target: "toolcall_recovery::amqp", "broker connection lost");
        tracing::error!(target: "toolcall_recovery::worker", "a bug of ours");
    }

    fn levels(json_lines: &str) -> Vec<(String, String)> {
        json_lines
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["level"].as_str().unwrap().to_string(),
                    v["target"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_third_partys_warnings_and_errors_are_debug_lines() {
        let by_default = logged(LogFormat::Json, false, "info", faults);
        let own = |level: &str, target: &str| (level.to_string(), target.to_string());
        assert_eq!(
            levels(&by_default),
            vec![
                own("INFO", "lapin::connection"),
                own("WARN", "toolcall_recovery::amqp"),
                own("ERROR", "toolcall_recovery::worker"),
            ]
        );
        let debugging = logged(LogFormat::Json, false, "info,lapin=debug", faults);
        assert_eq!(
            levels(&debugging)[0],
            own("DEBUG", "lapin::io_loop"),
            "shown when asked for, at DEBUG: {debugging}"
        );
        assert!(
            !debugging.contains("pinky_swear"),
            "only the crates asked for"
        );
        let everything = logged(LogFormat::Json, false, "trace", faults);
        assert!(
            levels(&everything)
                .iter()
                .all(|(level, target)| level != "ERROR" || target.starts_with("toolcall_")),
            "{everything}"
        );
    }

    #[test]
    fn sqlx_pings_of_closed_connections_are_debug_lines() {
        let ping = || {
            tracing::info!(target: "sqlx_core::pool::inner", error = "connection closed", "ping on idle connection returned error");
            tracing::info!(target: "sqlx_core::pool_fork", "not the pool");
        };
        let by_default = logged(LogFormat::Json, false, "info", ping);
        assert_eq!(
            levels(&by_default),
            vec![("INFO".to_string(), "sqlx_core::pool_fork".to_string())],
            "{by_default}"
        );
        let debugging = logged(LogFormat::Json, false, "info,sqlx=debug", ping);
        assert_eq!(
            levels(&debugging)[0],
            ("DEBUG".to_string(), "sqlx_core::pool::inner".to_string()),
            "{debugging}"
        );
    }

    #[test]
    fn the_returned_message_log_is_off_whatever_rust_log_says() {
        let out = logged(LogFormat::Json, false, "trace", || {
            tracing::warn!(target: "lapin::returned_messages", "Server returned us a message");
        });
        assert_eq!(out, "");
    }

    #[test]
    fn pretty_lines_carry_the_shown_level_and_colour_only_when_asked() {
        let plain = logged(LogFormat::Pretty, false, "debug", faults);
        assert!(!plain.contains('\u{1b}'), "{plain}");
        let lines: Vec<&str> = plain.lines().collect();
        assert_eq!(lines.len(), 5, "{plain}");
        assert!(
            lines[0].contains(" DEBUG lapin::io_loop: error doing IO"),
            "{plain}"
        );
        assert!(
            lines[3].contains("  WARN toolcall_recovery::amqp: broker connection lost"),
            "{plain}"
        );
        assert!(lines[4].contains(" ERROR toolcall_recovery::worker"));
        let coloured = logged(LogFormat::Pretty, true, "info", faults);
        assert!(coloured.contains("\x1b[31mERROR\x1b[0m"), "{coloured}");
    }

    #[test]
    fn auto_is_pretty_on_a_terminal_and_json_otherwise() {
        assert_eq!(resolve(LogFormat::Auto, true), LogFormat::Pretty);
        assert_eq!(resolve(LogFormat::Auto, false), LogFormat::Json);
        assert_eq!(resolve(LogFormat::Json, true), LogFormat::Json);
        assert_eq!(resolve(LogFormat::Pretty, false), LogFormat::Pretty);
    }

    #[test]
    fn our_crates_are_named_whole() {
        assert!(is_ours("toolcall_recovery"));
        assert!(is_ours("toolcall_recovery::worker::outgoing"));
        assert!(is_ours("toolcall_detect::families"));
        assert!(!is_ours("toolcall_recovery_fork"));
        assert!(!is_ours("lapin::channels"));
    }
}
