//! Dependencies failing under the worker: its database connections terminated and its
//! broker connections closed mid-stream. It recovers by itself; nothing is lost or
//! duplicated.

use crate::harness::*;
use std::collections::HashSet;
use std::time::Duration;

/// Terminates the worker's database connections (not the harness's).
pub async fn terminate_worker_backends(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND application_name = 'toolcall-recovery') t",
    )
    .bind(&app.db_name)
    .fetch_one(&app.pool)
    .await
    .expect("terminate")
}

/// Closes this test's worker connections on the broker (found by connection name).
pub async fn close_worker_connections(app: &TestApp) -> usize {
    let name = app.settings.connection_name.clone();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new("rabbitmqctl")
            .args([
                "list_connections",
                "pid",
                "client_properties",
                "--no-table-headers",
                "-q",
            ])
            .output()
            .expect("rabbitmqctl runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let needle = format!("{{\"connection_name\",\"{name}\"}}");
        let mut closed = 0;
        for line in text.lines().filter(|l| l.contains(&needle)) {
            let Some(pid) = line.split_whitespace().next() else {
                continue;
            };
            let ok = std::process::Command::new("rabbitmqctl")
                .args(["close_connection", pid, "fault injection by test", "-q"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                closed += 1;
            }
        }
        closed
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_and_broker_connections_killed_mid_stream_lose_nothing() {
    let app = TestApp::spawn().await;
    let (events, memories) = app.mixed_events(600).await;
    let mut sink = app.consumer(&app.moderation_queue).await;
    let mut seen = HashSet::new();
    let batches: Vec<&[serde_json::Value]> = events.chunks(150).collect();

    for (i, batch) in batches.iter().enumerate() {
        for e in batch.iter() {
            app.publish_event(e).await;
        }
        let target = seen.len() + 20;
        app.wait_moderation_ids(&mut sink, &mut seen, target, Duration::from_secs(30))
            .await;
        match i % 2 {
            0 => {
                terminate_worker_backends(&app).await;
            }
            _ => {
                let closed = close_worker_connections(&app).await;
                assert!(
                    closed >= 1,
                    "the worker's broker connection was found and closed"
                );
            }
        }
    }
    app.wait_moderation_ids(&mut sink, &mut seen, events.len(), Duration::from_secs(120))
        .await;
    app.assert_exactly_once(memories).await;
    // It noticed, and came back.
    app.wait_ready().await;
    let m = app.metrics().await;
    assert!(
        metric_value(
            &m,
            "toolcall_recovery_connection_recoveries_total{dependency=\"broker\"}"
        ) >= 2.0,
        "{m}"
    );
    assert_eq!(app.queue_len(&app.settings.names.queue).await, 0);
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_outage_is_waited_out_without_acking_or_dead_lettering() {
    let app = TestApp::spawn().await;
    let (events, memories) = app.mixed_events(60).await;
    let mut sink = app.consumer(&app.moderation_queue).await;
    let mut seen = HashSet::new();
    app.database_down().await;
    for e in &events {
        app.publish_event(e).await;
    }
    // The worker says it is not ready and keeps retrying.
    let addr = app.http_addr.unwrap();
    wait_for("readyz 503", Duration::from_secs(20), || async {
        http_get(addr, "/readyz")
            .await
            .map(|(s, _)| s == 503)
            .unwrap_or(false)
    })
    .await;
    wait_for("retries", Duration::from_secs(20), || async {
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_transient_errors_total{dependency=\"database\"}",
        ) >= 1.0
    })
    .await;
    app.database_up().await;
    app.wait_moderation_ids(&mut sink, &mut seen, events.len(), Duration::from_secs(60))
        .await;
    app.assert_exactly_once(memories).await;
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    let m = app.metrics().await;
    assert!(
        metric_value(
            &m,
            "toolcall_recovery_connection_recoveries_total{dependency=\"database\"}"
        ) >= 1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_transaction_killed_mid_flight_is_retried_with_one_effect() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("killed mid-flight", "fact", "Reply.");
    let id = app
        .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
        .await;
    // Hold the row so the worker's transaction is in flight, waiting on the lock.
    let holder = app.lock_row(id).await;
    let event = app.event_for(id).await;
    app.publish_event(&event).await;
    wait_for(
        "the worker waits on the row lock",
        Duration::from_secs(20),
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
             AND application_name = 'toolcall-recovery' AND wait_event_type = 'Lock'",
            )
            .bind(&app.db_name)
            .fetch_one(&app.pool)
            .await
            .unwrap()
                == 1
        },
    )
    .await;
    assert!(terminate_worker_backends(&app).await >= 1);
    wait_for(
        "a retried database error",
        Duration::from_secs(20),
        || async {
            metric_value(
                &app.metrics().await,
                "toolcall_recovery_transient_errors_total{dependency=\"database\"}",
            ) >= 1.0
        },
    )
    .await;
    holder.commit().await.unwrap();
    let (body, _) = app
        .get_one(&app.moderation_queue, Duration::from_secs(20))
        .await
        .expect("moderation message");
    assert_eq!(body["recovery"]["outcome"], serde_json::json!("recovered"));
    assert_eq!(body["message"]["content"], serde_json::json!("Reply."));
    app.assert_exactly_once(1).await;
    app.wait_events(1.0, Duration::from_secs(10)).await;
    assert_eq!(
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}"
        ),
        1.0
    );
    app.cleanup().await;
}

/// A committer keeps its connection for a moment after a recovery, so that the next one
/// needs no checkout. A connection the database dropped meanwhile costs the next leak a
/// retry on a fresh one, not the leak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_between_two_leaks_costs_a_retry_not_the_leak() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let mut ids = Vec::new();
    for n in 0..2 {
        let leak = result_prefix_leak(&format!("between leaks {n}"), "fact", "Reply.");
        ids.push(
            app.create_message(chat, Some(agent), "assistant", Some(&leak), &[])
                .await,
        );
    }
    let first = app.event_for(ids[0]).await;
    app.publish_event(&first).await;
    let (body, _) = app
        .get_one(&app.moderation_queue, Duration::from_secs(20))
        .await
        .expect("the first moderation message");
    assert_eq!(body["recovery"]["outcome"], serde_json::json!("recovered"));
    assert!(terminate_worker_backends(&app).await >= 1);
    let second = app.event_for(ids[1]).await;
    app.publish_event(&second).await;
    let (body, _) = app
        .get_one(&app.moderation_queue, Duration::from_secs(20))
        .await
        .expect("the second moderation message");
    assert_eq!(body["message"]["id"], serde_json::json!(ids[1]));
    assert_eq!(body["recovery"]["outcome"], serde_json::json!("recovered"));
    // The kept connection was the dead one: the second leak met it, and was retried.
    assert_eq!(
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_transient_errors_total{dependency=\"database\"}"
        ),
        1.0
    );
    app.assert_exactly_once(2).await;
    app.wait_events(2.0, Duration::from_secs(10)).await;
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    app.cleanup().await;
}
