//! The real binary: SIGTERM drains in-flight work and exits 0; SIGKILL mid-stream and a
//! restart lose nothing and duplicate nothing; a SIGTERM during the wait for a missing row
//! hands the event to the next worker.

use crate::harness::*;
use std::collections::HashSet;
use std::time::Duration;

pub fn signal(child: &tokio::process::Child, sig: &str) {
    let pid = child.id().expect("running");
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Sends SIGTERM, waits for exit 0 within the drain timeout and for the last log line;
/// returns the log.
async fn terminate(child: &mut tokio::process::Child, log: &BinaryLog) -> String {
    signal(child, "-TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits within the drain timeout")
        .expect("wait");
    assert!(status.success(), "exit status {status:?}");
    // The reader may still be draining the pipe after exit.
    wait_for("the log's last line", Duration::from_secs(5), || {
        std::future::ready(log.lines().iter().any(|l| l.contains("\"stopped\"")))
    })
    .await;
    log.lines().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_work_and_exits_zero() {
    let mut app = TestApp::prepare().await;
    let (events, memories) = app.mixed_events(400).await;
    let (mut child, _addr, log) = app.spawn_binary().await;
    let mut sink = app.consumer(&app.moderation_queue).await;
    for e in &events {
        app.publish_event(e).await;
    }
    // Processing is under way: some moderation messages arrived.
    let mut seen = HashSet::new();
    app.wait_moderation_ids(&mut sink, &mut seen, 20, Duration::from_secs(30))
        .await;
    let text = terminate(&mut child, &log).await;
    assert!(text.contains("SIGTERM received"), "logs: {text}");
    assert!(
        text.contains("draining in-flight deliveries"),
        "logs: {text}"
    );
    assert!(
        !text.contains("guest:guest"),
        "no password in the logs: {text}"
    );
    assert!(
        text.contains("guest:***@"),
        "URLs are logged masked: {text}"
    );
    assert!(
        !text.contains("Clean answer") && !text.contains("memory 3"),
        "no message content at info: {text}"
    );
    assert!(
        !text.contains("did not finish in time"),
        "nothing abandoned: {text}"
    );
    // Whatever was not done is still in the queue: a new worker finishes it, exactly once.
    app.start().await;
    app.wait_moderation_ids(&mut sink, &mut seen, events.len(), Duration::from_secs(60))
        .await;
    app.assert_exactly_once(memories).await;
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_and_restart_loses_and_duplicates_nothing() {
    let app = TestApp::prepare().await;
    let (events, memories) = app.mixed_events(2000).await;
    let (mut child, _addr, _log) = app.spawn_binary().await;
    let mut sink = app.consumer(&app.moderation_queue).await;
    let publisher = {
        let events = events.clone();
        let app_channel = app.channel.clone();
        let names = app.settings.names.clone();
        tokio::spawn(async move {
            for e in &events {
                app_channel
                    .basic_publish(
                        &names.input_exchange,
                        &names.input_routing_key,
                        lapin::options::BasicPublishOptions::default(),
                        &serde_json::to_vec(e).unwrap(),
                        lapin::BasicProperties::default().with_delivery_mode(2),
                    )
                    .await
                    .expect("publish")
                    .await
                    .expect("confirm");
            }
        })
    };
    let mut seen = HashSet::new();
    app.wait_moderation_ids(&mut sink, &mut seen, 300, Duration::from_secs(60))
        .await;
    signal(&child, "-KILL");
    let _ = child.wait().await;
    publisher.await.expect("all published");
    // Restart the real binary and let it finish.
    let (mut child, _addr, _log) = app.spawn_binary().await;
    app.wait_moderation_ids(&mut sink, &mut seen, events.len(), Duration::from_secs(120))
        .await;
    app.assert_exactly_once(memories).await;
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries").await,
        memories + extra_forwarded(events.len())
    );
    signal(&child, "-TERM");
    let status = child.wait().await.expect("wait");
    assert!(status.success());
    app.cleanup().await;
}

/// Messages of [`TestApp::mixed_events`] that carry a forwarded call.
fn extra_forwarded(n: usize) -> i64 {
    (0..n).filter(|i| i % 3 != 0 && i % 5 == 0).count() as i64
}

/// A rolling restart while an event waits for its message row (the app published before
/// its commit was visible): the wait is not over, so the event is neither dead-lettered nor
/// moderated as `failed`; it goes back to the queue, and the next worker recovers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_the_wait_for_a_missing_row_leaves_the_event_to_the_next_worker() {
    use serde_json::json;
    let app = TestApp::prepare().await;
    let pending = app.pending_leak().await;
    // The binary waits for a missing row for the default 30 s.
    let (mut child, addr, log) = app.spawn_binary().await;
    app.publish_event(&pending.event).await;
    wait_for(
        "the worker waits for the row",
        Duration::from_secs(20),
        || async {
            let metrics = http_get(addr, "/metrics").await.map(|(_, b)| b);
            metrics.is_some_and(|m| {
                metric_value(
                    &m,
                    "toolcall_recovery_transient_errors_total{dependency=\"missing_message\"}",
                ) >= 1.0
            })
        },
    )
    .await;
    let text = terminate(&mut child, &log).await;
    assert!(
        text.contains("stopped waiting for the message row"),
        "logs: {text}"
    );
    let dead = &app.settings.names.dead_letter_queue;
    assert_eq!(app.queue_len(dead).await, 0, "not dead-lettered");
    assert_eq!(
        app.queue_len(&app.moderation_queue).await,
        0,
        "no `failed` moderation"
    );
    // The broker returns the delivery once it has seen the connection close.
    wait_for(
        "the event back in the queue",
        Duration::from_secs(10),
        || async { app.queue_len(&app.settings.names.queue).await == 1 },
    )
    .await;

    // The row is committed; the next worker takes the event up and recovers it.
    pending.commit(&app).await;
    let (mut child, _addr, _log) = app.spawn_binary().await;
    let (m, _) = app
        .get_one(&app.moderation_queue, Duration::from_secs(30))
        .await
        .expect("moderated after the restart");
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));
    assert_eq!(app.message(pending.id).await.0.as_deref(), Some("Noted."));
    assert!(
        app.get_one(&app.moderation_queue, Duration::from_secs(1))
            .await
            .is_none(),
        "moderated once"
    );
    assert_eq!(app.queue_len(dead).await, 0);
    signal(&child, "-TERM");
    assert!(child.wait().await.expect("wait").success());
    app.cleanup().await;
}
