//! What the real binary logs. An ERROR line means a bug (README, docs/operations.md), so a
//! broker connection forced closed under the worker and a clean SIGTERM log none, whatever
//! the broker client says about them; and a start says nothing it says at every start.

use crate::faults::close_worker_connections;
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
