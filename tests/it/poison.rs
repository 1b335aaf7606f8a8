//! Poison events of each kind end in the dead-letter queue with the reason in a header;
//! the worker keeps going. (What moderation gets of them: `unexamined.rs`.)

use crate::harness::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_is_dead_lettered_with_a_reason_and_good_events_still_flow() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let good_id = app
        .create_message(chat, Some(agent), "assistant", Some("fine"), &[])
        .await;
    let good = app.event_for(good_id).await;

    let mut wrong_type = good.clone();
    wrong_type["message"]["id"] = json!("not a number");
    wrong_type["event_id"] = json!("00000000-0000-4000-8000-000000000001");
    let mut unknown_type = good.clone();
    unknown_type["type"] = json!("message.deleted");
    let mut bad_time = good.clone();
    bad_time["occurred_at"] = json!("yesterday");
    let mut missing = good.clone();
    missing["message"]["id"] = json!(987654321);
    missing["message"]["content"] = json!(result_prefix_leak("x", "fact", "Reply."));
    let oversized = format!("{{\"pad\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("malformed_json", b"{\"event_id\": ".to_vec()),
        ("invalid_utf8", b"{\"a\": \"\xff\xfe\"}".to_vec()),
        ("invalid_event", serde_json::to_vec(&wrong_type).unwrap()),
        ("invalid_event", serde_json::to_vec(&bad_time).unwrap()),
        ("invalid_event", b"[1, 2, 3]".to_vec()),
        ("unknown_type", serde_json::to_vec(&unknown_type).unwrap()),
        ("missing_message", serde_json::to_vec(&missing).unwrap()),
        ("oversized", oversized.into_bytes()),
    ];
    for (_, body) in &cases {
        app.publish_raw(body).await;
    }
    app.publish_event(&good).await;

    let dead = &app.settings.names.dead_letter_queue;
    let mut reasons = Vec::new();
    for _ in 0..cases.len() {
        let (body, headers) = app
            .get_one(dead, Duration::from_secs(20))
            .await
            .expect("dead-lettered message");
        let reason = header(&headers, "x-tcr-reason").expect("reason header");
        assert!(header(&headers, "x-tcr-error").is_some());
        if reason == "invalid_event"
            && body.get("event_id") == Some(&json!("00000000-0000-4000-8000-000000000001"))
        {
            assert_eq!(
                header(&headers, "x-tcr-event-id").as_deref(),
                Some("00000000-0000-4000-8000-000000000001"),
                "the event id is carried when there is one"
            );
            let error = header(&headers, "x-tcr-error").unwrap_or_default();
            assert!(
                error.contains("message.id: invalid type: string"),
                "the field is named: {error}"
            );
        }
        reasons.push(reason);
    }
    reasons.sort();
    let mut expected: Vec<String> = cases.iter().map(|(r, _)| r.to_string()).collect();
    expected.sort();
    assert_eq!(reasons, expected);

    // The good event after all the poison was processed. Moderation also saw the two
    // poison events that name a real message: the one with a bad timestamp as stored
    // (`unreadable`), the missing one as the event carried it (`failed`).
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let (body, _) = app
            .get_one(&app.moderation_queue, Duration::from_secs(20))
            .await
            .expect("moderated");
        let outcome = body["recovery"]["outcome"].as_str().unwrap().to_string();
        let id = if outcome == "failed" {
            987654321
        } else {
            good_id
        };
        assert_eq!(body["message"]["id"], json!(id), "{outcome}");
        outcomes.push(outcome);
    }
    outcomes.sort();
    assert_eq!(outcomes, ["clean", "failed", "unreadable"]);
    assert!(app
        .get_one(&app.moderation_queue, Duration::from_millis(500))
        .await
        .is_none());
    app.wait_events(1.0, Duration::from_secs(10)).await;
    let m = app.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_dead_lettered_total{reason=\"invalid_event\"}"
        ),
        3.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_dead_lettered_total{reason=\"oversized\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_dead_lettered_total{reason=\"missing_message\"}"
        ),
        1.0
    );
    assert_eq!(app.queue_len(&app.settings.names.queue).await, 0);
    app.cleanup().await;
}

/// The backstop for deliveries that crash the worker: the queue's own delivery limit
/// dead-letters a message that keeps coming back, into the same dead-letter queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_dead_letters_by_itself_past_the_delivery_limit() {
    use lapin::options::{BasicGetOptions, BasicNackOptions};
    let app = TestApp::prepare().await;
    toolcall_recovery::amqp::declare_topology(
        &app.channel,
        &app.settings.names,
        &app.settings.publish,
        2,
    )
    .await
    .expect("topology");
    app.publish_raw(b"{\"crashes\": \"the worker\"}").await;
    let queue = &app.settings.names.queue;
    // A consumer that dies on it every time: the message comes back until the limit.
    let mut returns = 0;
    while returns < 10 {
        let Some(m) = app
            .channel
            .basic_get(queue, BasicGetOptions { no_ack: false })
            .await
            .expect("get")
        else {
            if app.queue_len(&app.settings.names.dead_letter_queue).await == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        m.delivery
            .acker
            .nack(BasicNackOptions {
                requeue: true,
                ..Default::default()
            })
            .await
            .expect("nack");
        returns += 1;
    }
    let (body, _) = app
        .get_one(
            &app.settings.names.dead_letter_queue,
            Duration::from_secs(10),
        )
        .await
        .expect("dead-lettered by the broker");
    assert_eq!(body["crashes"], json!("the worker"));
    assert!(
        returns <= 3,
        "dead-lettered after the limit, got {returns} returns"
    );
    app.cleanup().await;
}
