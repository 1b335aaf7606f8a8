//! Every row of the recovery table (contract §3), end to end: publish an event, observe
//! the database rows, the moderation message and the metrics.

use crate::harness::*;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// Creates a message, publishes its event, returns (message id, moderation body).
async fn publish_and_get(
    app: &TestApp,
    chat: i64,
    agent: Option<i64>,
    content: &str,
    tools_used: &[&str],
) -> (i64, Value) {
    let id = app
        .create_message(chat, agent, "assistant", Some(content), tools_used)
        .await;
    let event = app.event_for(id).await;
    app.publish_event(&event).await;
    let (body, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderation message");
    assert_eq!(body["source_event_id"], event["event_id"]);
    assert_ne!(
        body["event_id"], event["event_id"],
        "moderation id is derived, not copied"
    );
    assert_eq!(body["message"]["id"], json!(id));
    assert_eq!(
        body["message"]["model_id"],
        json!("gemini-2.5-flash"),
        "unknown fields carried"
    );
    (id, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_message_is_published_untouched_without_database_writes() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let (id, body) =
        publish_and_get(&app, chat, Some(agent), "Just a normal {name} reply.", &[]).await;
    assert_eq!(
        body["message"]["content"],
        json!("Just a normal {name} reply.")
    );
    assert_eq!(body["recovery"]["outcome"], json!("clean"));
    assert_eq!(
        app.message(id).await.0.as_deref(),
        Some("Just a normal {name} reply.")
    );
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.wait_events(1.0, T).await;
    assert_eq!(
        app.metric("toolcall_recovery_events_total{mode=\"recover\",outcome=\"clean\"}")
            .await,
        1.0
    );
    let published = format!(
        "toolcall_recovery_messages_published_total{{exchange=\"{}\"}}",
        app.settings.publish.moderation_exchange
    );
    assert_eq!(app.metric(&published).await, 1.0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_memory_result_prefix_is_recovered() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let leak = result_prefix_leak(
        "  I lost track of the plan.  ",
        "journal",
        "You saw right through me.",
    );
    let (id, body) = publish_and_get(&app, chat, Some(agent), &leak, &[]).await;

    // The message: cleaned, tools_used appended.
    let (content, tools_used) = app.message(id).await;
    assert_eq!(content.as_deref(), Some("You saw right through me."));
    assert_eq!(tools_used, json!(["save_memory (recovered)"]));
    // One memory, content trimmed.
    let mem = sqlx::query_as::<_, (i64, String, String)>(
        "SELECT agent_id, content, memory_type FROM agent_memories",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        mem,
        vec![(
            agent,
            "I lost track of the plan.".to_string(),
            "journal".to_string()
        )]
    );
    // The tool message: one second before, named, with a stable tool_call_id.
    let (role, name, call_id, secs): (String, String, String, f64) = sqlx::query_as(
        "SELECT t.role, t.tool_name, t.tool_call_id, \
                extract(epoch from (m.created_at - t.created_at))::float8 \
         FROM messages t JOIN messages m ON m.id = $1 WHERE t.role = 'tool' AND t.chat_id = m.chat_id",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!((role.as_str(), name.as_str()), ("tool", "save_memory"));
    assert_eq!(call_id, format!("tcr-{id}-1"));
    assert!(
        (secs - 1.0).abs() < 1e-6,
        "tool message 1 s earlier, got {secs}"
    );
    // The ledger: removed text verbatim, family, call, outcome, before/after.
    let (removed, family, call_name, outcome, before, after): (String, String, String, String, String, String) =
        sqlx::query_as(
            "SELECT i.removed_text, i.family, i.call_name, i.outcome, r.content_before, r.content_after \
             FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id",
        )
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(
        leak.starts_with(&removed) && removed.starts_with("{success"),
        "removed: {removed}"
    );
    assert_eq!(
        (family.as_str(), call_name.as_str(), outcome.as_str()),
        ("result_prefix", "save_memory", "recovered")
    );
    assert_eq!(before, leak);
    assert_eq!(after, "You saw right through me.");
    // The moderation message carries the cleaned message and the recovery summary.
    assert_eq!(
        body["message"]["content"],
        json!("You saw right through me.")
    );
    assert_eq!(
        body["message"]["tools_used"],
        json!(["save_memory (recovered)"])
    );
    assert_eq!(body["recovery"]["outcome"], json!("recovered"));
    assert_eq!(body["recovery"]["families"], json!(["result_prefix"]));
    assert_eq!(body["recovery"]["calls"][0]["outcome"], json!("recovered"));
    assert!(body["recovery"]["bytes_removed"].as_u64().unwrap() > 0);
    // Metrics.
    app.wait_events(1.0, T).await;
    let m = app.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_value(&m, "toolcall_recovery_calls_total{family=\"result_prefix\",mode=\"recover\",outcome=\"recovered\",tool=\"save_memory\"}"),
        1.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_memories_created_total{mode=\"recover\"}"
        ),
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_save_memory_with_expiry_is_recovered() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = hermes_leak(
        "save_memory",
        json!({"content": "Dentist on Friday", "memory_type": "goal", "expires_around": "2026-12-01"}),
        "Noted! ",
        " I'll remember.",
    );
    let (id, body) = publish_and_get(&app, chat, Some(agent), &leak, &[]).await;
    let (content, _) = app.message(id).await;
    let content = content.unwrap();
    assert!(!content.contains("tool_call"), "cleaned: {content}");
    assert!(content.starts_with("Noted!") && content.ends_with("I'll remember."));
    let expires: Option<String> = sqlx::query_scalar(
        "SELECT to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM agent_memories WHERE memory_type = 'goal'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(expires.as_deref(), Some("2026-12-01"));
    assert_eq!(body["recovery"]["families"], json!(["hermes"]));
    assert_eq!(body["message"]["content"], json!(content));
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_already_used_strips_only() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Saved already", "fact", "Done, saved it.");
    let (id, body) = publish_and_get(&app, chat, Some(agent), &leak, &["save_memory"]).await;
    let (content, tools_used) = app.message(id).await;
    assert_eq!(content.as_deref(), Some("Done, saved it."));
    assert_eq!(tools_used, json!(["save_memory"]));
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM recovery_items WHERE outcome = 'stripped_only'")
            .await,
        1
    );
    assert_eq!(body["recovery"]["outcome"], json!("stripped_only"));
    app.wait_events(1.0, T).await;
    assert_eq!(
        app.metric("toolcall_recovery_events_total{mode=\"recover\",outcome=\"stripped_only\"}")
            .await,
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_without_agent_is_left_alone() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let leak = result_prefix_leak("orphan", "fact", "Reply.");
    let (id, body) = publish_and_get(&app, chat, None, &leak, &[]).await;
    assert_eq!(app.message(id).await.0.as_deref(), Some(leak.as_str()));
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    assert_eq!(body["recovery"]["outcome"], json!("no_agent"));
    assert_eq!(body["message"]["content"], json!(leak));
    app.wait_events(1.0, T).await;
    assert_eq!(
        app.metric("toolcall_recovery_events_total{mode=\"recover\",outcome=\"no_agent\"}")
            .await,
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_memory_not_enabled_and_invalid_args_record_errors() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let no_tool = app.create_agent(&["web_search"]).await;
    let with_tool = app.create_agent(&["save_memory"]).await;

    let leak = hermes_leak(
        "save_memory",
        json!({"content": "x", "memory_type": "fact"}),
        "",
        "Sure.",
    );
    let (a, body_a) = publish_and_get(&app, chat, Some(no_tool), &leak, &[]).await;
    assert_eq!(body_a["recovery"]["outcome"], json!("tool_not_enabled"));
    assert_eq!(app.message(a).await.0.as_deref(), Some("Sure."));

    let leak = hermes_leak(
        "save_memory",
        json!({"content": "x", "memory_type": "bogus"}),
        "",
        "Okay.",
    );
    let (b, body_b) = publish_and_get(&app, chat, Some(with_tool), &leak, &[]).await;
    assert_eq!(body_b["recovery"]["outcome"], json!("invalid_args"));
    assert_eq!(app.message(b).await.0.as_deref(), Some("Okay."));

    let leak = hermes_leak(
        "save_memory",
        json!({"content": "   ", "memory_type": "fact"}),
        "",
        "Fine.",
    );
    let (_, body_c) = publish_and_get(&app, chat, Some(with_tool), &leak, &[]).await;
    assert_eq!(body_c["recovery"]["outcome"], json!("invalid_args"));

    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    let errors: Vec<(String, String)> =
        sqlx::query_as("SELECT tool_name, content FROM messages WHERE role = 'tool' ORDER BY id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(errors.len(), 3, "one error tool message per refused call");
    for (name, content) in &errors {
        assert_eq!(name, "save_memory");
        let v: Value = serde_json::from_str(content).unwrap();
        assert_eq!(v["success"], json!(false));
    }
    app.wait_events(3.0, T).await;
    let m = app.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"tool_not_enabled\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"invalid_args\"}"
        ),
        2.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_result_object_is_invalid_args() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("something", "not_a_type", "Reply here.");
    let (id, body) = publish_and_get(&app, chat, Some(agent), &leak, &[]).await;
    assert_eq!(body["recovery"]["outcome"], json!("invalid_args"));
    assert_eq!(app.message(id).await.0.as_deref(), Some("Reply here."));
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrunnable_call_is_forwarded() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["web_search"]).await;
    let leak = hermes_leak(
        "web_search",
        json!({"query": "weather in Oslo"}),
        "Let me check. ",
        "",
    );
    let (id, body) = publish_and_get(&app, chat, Some(agent), &leak, &[]).await;
    assert_eq!(app.message(id).await.0.as_deref(), Some("Let me check."));
    assert_eq!(body["recovery"]["outcome"], json!("forwarded"));
    let (call, _) = app
        .get_one(&app.tool_calls_queue, T)
        .await
        .expect("tool call published");
    assert_eq!(call["name"], json!("web_search"));
    assert_eq!(call["arguments"], json!({"query": "weather in Oslo"}));
    assert_eq!(call["message_id"], json!(id));
    assert_eq!(call["chat_id"], json!(chat));
    assert_eq!(call["agent_id"], json!(agent));
    assert_eq!(call["family"], json!("hermes"));
    assert!(call["event_id"].as_str().is_some());
    app.wait_events(1.0, T).await;
    assert_eq!(
        app.metric("toolcall_recovery_calls_total{family=\"hermes\",mode=\"recover\",outcome=\"forwarded\",tool=\"web_search\"}").await,
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_only_needs_review_and_is_recorded_once() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let content = "{success: true, memory_type: \"journal\", content: \"only this\"}";
    let id = app
        .create_message(chat, Some(agent), "assistant", Some(content), &[])
        .await;
    let event = app.event_for(id).await;
    for _ in 0..3 {
        app.publish_event(&event).await;
    }
    let mut bodies = Vec::new();
    for _ in 0..3 {
        bodies.push(
            app.get_one(&app.moderation_queue, T)
                .await
                .expect("moderation")
                .0,
        );
    }
    assert!(bodies
        .iter()
        .all(|b| b["message"]["content"] == json!(content)));
    assert!(bodies
        .iter()
        .all(|b| b["event_id"] == bodies[0]["event_id"]));
    assert_eq!(app.message(id).await.0.as_deref(), Some(content));
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM recovery_items WHERE outcome = 'needs_review'")
            .await,
        1
    );
    app.wait_events(3.0, T).await;
    let m = app.metrics().await;
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"needs_review\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_value(
            &m,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"already_recovered\"}"
        ),
        2.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_is_repaired_in_the_same_pass() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let asst: i64 = sqlx::query_scalar(
        "INSERT INTO messages (chat_id, agent_id, role, content, tool_calls) \
         VALUES ($1, $2, 'assistant', '', $3) RETURNING id",
    )
    .bind(chat)
    .bind(agent)
    .bind(sqlx::types::Json(
        json!([{"id": "call_1", "name": "lookup", "arguments": {}}]),
    ))
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let named: i64 = sqlx::query_scalar(
        "INSERT INTO messages (chat_id, role, content, tool_call_id, tool_name) \
         VALUES ($1, 'tool', 'r', 'call_1', '') RETURNING id",
    )
    .bind(chat)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let orphan: i64 = sqlx::query_scalar(
        "INSERT INTO messages (chat_id, role, content, tool_call_id, tool_name) \
         VALUES ($1, 'tool', 'r', 'call_missing', NULL) RETURNING id",
    )
    .bind(chat)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let _ = asst;
    let leak = result_prefix_leak("repair me", "fact", "Reply.");
    publish_and_get(&app, chat, Some(agent), &leak, &[]).await;
    let name = |id: i64| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>("SELECT tool_name FROM messages WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(name(named).await.as_deref(), Some("lookup"));
    assert_eq!(name(orphan).await.as_deref(), Some("unknown"));
    app.cleanup().await;
}
