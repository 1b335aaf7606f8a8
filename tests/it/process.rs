//! The real binary: SIGTERM drains in-flight work and exits 0; SIGKILL mid-stream and a
//! restart lose nothing and duplicate nothing.

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
    signal(&child, "-TERM");
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
    let text = log.lines().join("\n");
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
