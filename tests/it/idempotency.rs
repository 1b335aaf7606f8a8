//! Redelivered and duplicated events, and several workers on one queue: each leaked call
//! has exactly one effect.

use crate::harness::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_event_five_times_saves_one_memory() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Remember the blue door", "fact", "Got it.");
    let id = app
        .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
        .await;
    let event = app.event_for(id).await;
    for _ in 0..5 {
        app.publish_event(&event).await;
    }
    app.wait_events(5.0, Duration::from_secs(20)).await;
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await,
        1
    );
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 1);
    let (_, tools_used) = app.message(id).await;
    assert_eq!(tools_used, json!(["save_memory (recovered)"]));
    let m = app.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"already_recovered\"}"
        ),
        4.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_memories_created_total{mode=\"recover\"}"
        ),
        1.0
    );
    // Five moderation messages, one id, the same body every time.
    let mut consumer = app.consumer(&app.moderation_queue).await;
    let bodies = collect(&mut consumer, 5, Duration::from_secs(10)).await;
    assert_eq!(bodies.len(), 5);
    assert!(
        bodies.iter().all(|b| b == &bodies[0]),
        "redeliveries republish the same body"
    );
    assert_eq!(bodies[0]["message"]["content"], json!("Got it."));
    assert_eq!(bodies[0]["recovery"]["outcome"], json!("recovered"));
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_500_events_with_duplicates_exact_counts() {
    let app = TestApp::spawn().await;
    let second = app.start_another().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let mut events: Vec<Value> = Vec::new();
    for i in 0..250 {
        let content = match i % 5 {
            0 | 1 => result_prefix_leak(&format!("memory number {i}"), "journal", "Okay."),
            2 => hermes_leak(
                "web_search",
                json!({"query": format!("q{i}")}),
                "Searching. ",
                "",
            ),
            _ => format!("A perfectly clean answer number {i}."),
        };
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(&content), &[])
            .await;
        events.push(app.event_for(id).await);
    }
    // Every event once, then every event again, interleaved.
    let mut consumer = app.consumer(&app.moderation_queue).await;
    let mut calls = app.consumer(&app.tool_calls_queue).await;
    for (a, b) in events.iter().zip(events.iter().rev()) {
        app.publish_event(a).await;
        app.publish_event(b).await;
    }
    let moderation = collect(&mut consumer, 500, Duration::from_secs(90)).await;
    assert_eq!(moderation.len(), 500);
    let ids: HashSet<&str> = moderation
        .iter()
        .filter_map(|b| b["event_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 250, "one moderation id per source event");
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 100);
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await,
        100
    );
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 150);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM messages WHERE tools_used @> '[\"save_memory (recovered)\"]'"
        )
        .await,
        100
    );
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE jsonb_array_length(tools_used) > 1")
            .await,
        0
    );
    // Forwarded calls: every duplicate republishes with the same id; 50 distinct.
    let forwarded = collect(&mut calls, 100, Duration::from_secs(30)).await;
    let call_ids: HashSet<&str> = forwarded
        .iter()
        .filter_map(|b| b["event_id"].as_str())
        .collect();
    assert_eq!(call_ids.len(), 50);
    // Both workers' metrics add up to every event.
    let a = app.metrics().await;
    let b = http_get(second.http_addr, "/metrics").await.unwrap().1;
    let sum = |name: &str| metric_value(&a, name) + metric_value(&b, name);
    assert_eq!(
        total(&a, "toolcall_recovery_events_total") + total(&b, "toolcall_recovery_events_total"),
        500.0
    );
    assert_eq!(
        sum("toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}"),
        100.0
    );
    assert_eq!(
        sum("toolcall_recovery_events_total{mode=\"recover\",outcome=\"forwarded\"}"),
        50.0
    );
    assert_eq!(
        sum("toolcall_recovery_events_total{mode=\"recover\",outcome=\"already_recovered\"}"),
        150.0
    );
    assert_eq!(
        sum("toolcall_recovery_events_total{mode=\"recover\",outcome=\"clean\"}"),
        200.0
    );
    assert_eq!(
        sum("toolcall_recovery_memories_created_total{mode=\"recover\"}"),
        100.0
    );
    second.shutdown();
    second.wait().await.unwrap();
    app.cleanup().await;
}
