//! What the real binary logs. An ERROR line means a bug (README, docs/operations.md), so a
//! broker connection forced closed under the worker and a clean SIGTERM log none, whatever
//! the broker client says about them; and a start says nothing it says at every start.

use crate::faults::{close_worker_connections, terminate_worker_backends};
use crate::harness::*;
use crate::process::signal;
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

/// The lines of `log` at `level` (the binary logs JSON: its stderr is a pipe).
fn at_level(lines: &[String], level: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|l| {
            serde_json::from_str::<Value>(l)
                .map(|v| v["level"] == level)
                .unwrap_or(false)
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_broker_close_and_a_clean_sigterm_log_no_error() {
    let app = TestApp::prepare().await;
    let (events, memories) = app.mixed_events(120).await;
    let (mut child, addr, log) = app.spawn_binary().await;
    let mut sink = app.consumer(&app.moderation_queue).await;
    let mut seen = HashSet::new();
    let (first, second) = events.split_at(60);
    for e in first {
        app.publish_event(e).await;
    }
    app.wait_moderation_ids(&mut sink, &mut seen, first.len(), Duration::from_secs(30))
        .await;

    // The broker closes the worker's connection, as `rabbitmqctl close_connection` or a
    // broker shutting down (CONNECTION_FORCED) does.
    assert!(
        close_worker_connections(&app).await >= 1,
        "found and closed"
    );
    wait_for("the worker reconnects", Duration::from_secs(60), || async {
        let Some((_, text)) = http_get(addr, "/metrics").await else {
            return false;
        };
        metric_value(
            &text,
            "toolcall_recovery_connection_recoveries_total{dependency=\"broker\"}",
        ) >= 1.0
            && metric_value(&text, "toolcall_recovery_broker_consuming") == 1.0
    })
    .await;
    for e in second {
        app.publish_event(e).await;
    }
    app.wait_moderation_ids(&mut sink, &mut seen, events.len(), Duration::from_secs(60))
        .await;

    // A clean stop.
    signal(&child, "-TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits within the drain timeout")
        .expect("wait");
    assert!(status.success(), "exit status {status:?}");
    wait_for("the log's last line", Duration::from_secs(5), || {
        std::future::ready(log.lines().iter().any(|l| l.contains("\"stopped\"")))
    })
    .await;

    let lines = log.lines();
    let errors = at_level(&lines, "ERROR");
    assert!(errors.is_empty(), "no ERROR line: {errors:#?}");
    let warnings = at_level(&lines, "WARN");
    assert!(
        !warnings.is_empty(),
        "the lost connection is said, at WARN: {lines:#?}"
    );
    assert!(
        warnings
            .iter()
            .all(|l| l.contains("\"target\":\"toolcall_recovery")),
        "said by the worker, not by lapin or pinky_swear: {warnings:#?}"
    );
    assert!(
        lines.iter().all(|l| !l.contains("\u{1b}[")),
        "no colour into a pipe"
    );
    app.assert_exactly_once(memories).await;
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_an_up_to_date_database_says_only_that_it_is_without_colour() {
    let app = TestApp::prepare().await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(["migrate", &format!("--database-url={}", app.db_url)])
        .env("RUST_LOG", "info")
        .output()
        .await
        .expect("migrate runs");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines: stderr is not a terminal"))
        .collect();
    assert!(
        lines.iter().all(|l| l["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("toolcall_recovery"))),
        "no notice of the server's (\"_sqlx_migrations already exists\"): {stderr}"
    );
    assert!(stderr.contains("migrations up to date"), "{stderr}");

    // Asked for pretty lines into a pipe: no colour codes.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "migrate",
            "--log-format=pretty",
            &format!("--database-url={}", app.db_url),
        ])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .output()
        .await
        .expect("migrate runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains(" INFO "), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    app.cleanup().await;
}

/// An event waiting for its message row is retried many times; the log says so once, at
/// WARN, and the metric counts every retry (docs/operations.md: one line per event, not one
/// per retry, so a log alert does not fire on every backoff step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_a_missing_row_warns_once_however_many_retries() {
    let app = TestApp::prepare().await;
    let pending = app.pending_leak().await;
    let mut args = app.binary_args();
    args.push("--missing-message-retry-secs=4".into());
    let (mut child, addr, log) = app.spawn_binary_with(args).await;
    app.publish_event(&pending.event).await;
    let dead = app.settings.names.dead_letter_queue.clone();
    wait_for(
        "dead-lettered once the wait is over",
        Duration::from_secs(30),
        || async { app.queue_len(&dead).await == 1 },
    )
    .await;
    let (_, metrics) = http_get(addr, "/metrics").await.expect("metrics");
    let retries = metric_value(
        &metrics,
        "toolcall_recovery_transient_errors_total{dependency=\"missing_message\"}",
    );
    assert!(retries >= 2.0, "several retries: {retries}");
    let warned: Vec<String> = at_level(&log.lines(), "WARN")
        .into_iter()
        .filter(|l| l.contains("retrying"))
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "one WARN for {retries} retries: {warned:#?}"
    );
    signal(&child, "-TERM");
    assert!(child.wait().await.expect("wait").success());
    app.cleanup().await;
}

/// The lines of `lines` that are JSON objects.
fn json_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// A worker in observe mode says what would have happened, with the mode, on every event
/// line; the pool's pings of connections killed under it are no INFO lines; and a broker
/// connection closed under it is one WARN (docs/operations.md, "Logs").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_mode_reads_as_such_and_a_dependency_lost_is_said_once() {
    let app = TestApp::prepare().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let chat = app.create_chat().await;
    let mut leaks = Vec::new();
    for n in 0..2 {
        let content = result_prefix_leak(&format!("Observed memory {n}"), "fact", "Reply.");
        leaks.push(
            app.create_message(chat, Some(agent), "assistant", Some(&content), &[])
                .await,
        );
    }
    let mut args = app.binary_args();
    args.push("--mode=observe".into());
    let (mut child, addr, log) = app.spawn_binary_with(args).await;
    let processed = |n: f64| async move {
        let Some((_, text)) = http_get(addr, "/metrics").await else {
            return false;
        };
        total(&text, "toolcall_recovery_events_total") >= n
    };
    app.publish_event(&app.event_for(leaks[0]).await).await;
    wait_for("the first event", Duration::from_secs(30), || {
        processed(1.0)
    })
    .await;

    // The database kills the worker's connections; the next event's pass gets new ones.
    assert!(terminate_worker_backends(&app).await >= 1);
    app.publish_event(&app.event_for(leaks[1]).await).await;
    wait_for("the second event", Duration::from_secs(30), || {
        processed(2.0)
    })
    .await;
    let lines = json_lines(&log.lines());
    let events: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "event processed")
        .collect();
    assert_eq!(events.len(), 2, "{lines:#?}");
    for line in &events {
        assert_eq!(line["mode"], "observe", "{line}");
        assert_eq!(
            line["outcome"], "would_recover",
            "nothing was recovered: {line}"
        );
    }
    let sqlx_info: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"].as_str().is_some_and(|t| t.starts_with("sqlx")))
        .collect();
    assert!(sqlx_info.is_empty(), "at most DEBUG: {sqlx_info:#?}");

    // The broker closes the worker's connection with nothing in flight: one fault, one WARN.
    let warned_before = at_level(&log.lines(), "WARN").len();
    assert!(close_worker_connections(&app).await >= 1);
    wait_for("the worker reconnects", Duration::from_secs(60), || async {
        let Some((_, text)) = http_get(addr, "/metrics").await else {
            return false;
        };
        metric_value(
            &text,
            "toolcall_recovery_connection_recoveries_total{dependency=\"broker\"}",
        ) >= 1.0
            && metric_value(&text, "toolcall_recovery_broker_consuming") == 1.0
    })
    .await;
    signal(&child, "-TERM");
    assert!(child.wait().await.expect("wait").success());
    wait_for("the log's last line", Duration::from_secs(5), || {
        std::future::ready(log.lines().iter().any(|l| l.contains("\"stopped\"")))
    })
    .await;
    let warned = at_level(&log.lines(), "WARN");
    assert_eq!(
        warned.len() - warned_before,
        1,
        "one WARN for the lost connection: {warned:#?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        0,
        "observed only"
    );
    app.cleanup().await;
}

/// A command that fails says so once: one ERROR line in the log, no second plain line;
/// and, when `RUST_LOG` hides ERROR lines, one plain line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_command_says_so_once() {
    let commands = [
        (
            "migrate",
            vec![
                "migrate",
                "--database-url=postgres://postgres@127.0.0.1:1/nowhere",
            ],
        ),
        (
            "dead-letters",
            vec![
                "dead-letters",
                "list",
                "--amqp-url=amqp://guest:guest@127.0.0.1:1/%2f",
            ],
        ),
    ];
    for (what, args) in commands {
        let out = run_binary(&args, "info").await;
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(&format!("toolcall-recovery {what}: ")))
            .collect();
        assert_eq!(said.len(), 1, "{what}: once: {stderr}");
        assert!(
            serde_json::from_str::<Value>(said[0]).is_ok_and(|v| v["level"] == "ERROR"),
            "{what}: {stderr}"
        );
        let quiet = run_binary(&args, "off").await;
        assert_eq!(quiet.status.code(), Some(1), "{what}: {quiet:?}");
        let stderr = String::from_utf8_lossy(&quiet.stderr).into_owned();
        let plain = format!("toolcall-recovery {what}: ");
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with(&plain)).count(),
            1,
            "{what}: {stderr}"
        );
    }
}

/// The binary run with `args`, JSON logs filtered by `filter`, to its end.
async fn run_binary(args: &[&str], filter: &str) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(args)
        .arg("--log-format=json")
        .env("RUST_LOG", filter)
        .output()
        .await
        .expect("runs")
}
