//! Safe rollout (issue #8): observe mode changes nothing outside the ledger and publishes
//! the original content; switching to recover and backfilling then recovers exactly the
//! observed messages, with no reprocessing flag; disabled families are not detected;
//! a family held in observe mode holds back only the messages that have its leaks.

use crate::backfill::{fingerprint, run};
use crate::harness::*;
use serde_json::{json, Value};
use std::time::Duration;
use toolcall_detect::Family;
use toolcall_recovery::recover::Mode;
use toolcall_recovery::settings::FamilyList;

const T: Duration = Duration::from_secs(20);

/// The situations of contract §3 that write something, for one agent with save_memory and
/// web_search and one without any tool. Returns (message id, content, would-be outcome).
async fn seed(app: &TestApp) -> Vec<(i64, String, &'static str)> {
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let bare = app.create_agent(&[]).await;
    let cases: Vec<(Option<i64>, String, &[&str], &'static str)> = vec![
        (
            Some(agent),
            result_prefix_leak("Likes green tea", "preference", "Noted, green tea it is."),
            &[],
            "recovered",
        ),
        (
            Some(agent),
            hermes_leak("web_search", json!({"q": "tea"}), "Let me look. ", ""),
            &[],
            "forwarded",
        ),
        (
            Some(bare),
            hermes_leak(
                "save_memory",
                json!({"content": "x", "memory_type": "fact"}),
                "",
                " Saved.",
            ),
            &[],
            "tool_not_enabled",
        ),
        (
            Some(agent),
            result_prefix_leak("Already saved", "fact", "Done."),
            &["save_memory"],
            "stripped_only",
        ),
        (
            Some(agent),
            "A plain {name} answer.".to_string(),
            &[],
            "clean",
        ),
    ];
    let mut out = Vec::new();
    for (agent, content, tools_used, outcome) in cases {
        let id = app
            .create_message(chat, agent, "assistant", Some(&content), tools_used)
            .await;
        out.push((id, content, outcome));
    }
    out
}

async fn ledger_modes(app: &TestApp) -> Vec<(i64, String, String)> {
    sqlx::query_as("SELECT message_id, mode, outcome FROM recoveries ORDER BY message_id, id")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_mode_writes_only_the_ledger_and_a_recover_backfill_then_recovers_them() {
    let mut app = TestApp::prepare().await;
    app.settings.policy.mode = Mode::Observe;
    app.start().await;
    let cases = seed(&app).await;
    let before = fingerprint(&app).await;

    let mut events = Vec::new();
    for (id, content, outcome) in &cases {
        let event = app.event_for(*id).await;
        app.publish_event(&event).await;
        let (body, _) = app
            .get_one(&app.moderation_queue, T)
            .await
            .expect("moderation message");
        assert_eq!(body["message"]["id"], json!(id));
        assert_eq!(
            body["message"]["content"],
            json!(content),
            "moderation gets the original content"
        );
        assert_eq!(body["recovery"]["mode"], json!("observe"));
        assert_eq!(body["recovery"]["outcome"], json!(outcome), "{body}");
        events.push((event, body));
    }
    app.wait_events(cases.len() as f64, T).await;

    // Nothing changed outside the ledger: messages, memories, tool messages.
    let after = fingerprint(&app).await;
    assert_eq!(after.0, before.0, "messages untouched");
    assert_eq!(after.1, 0, "no memory");
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await,
        0
    );
    assert_eq!(
        app.queue_len(&app.tool_calls_queue).await,
        0,
        "no call forwarded"
    );
    let ledger = ledger_modes(&app).await;
    let want: Vec<(i64, String, String)> = cases
        .iter()
        .filter(|c| c.2 != "clean")
        .map(|c| (c.0, "observe".to_string(), c.2.to_string()))
        .collect();
    assert_eq!(ledger, want);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM recovery_items \
             WHERE memory_id IS NOT NULL OR tool_message_id IS NOT NULL"
        )
        .await,
        0,
        "an observed item names no row"
    );
    // The would-be removed text is kept verbatim all the same.
    let removed: String = sqlx::query_scalar(
        "SELECT i.removed_text FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id \
         WHERE r.message_id = $1",
    )
    .bind(cases[0].0)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(cases[0].1.starts_with(&removed) && removed.starts_with("{success: true"));
    for (sample, n) in [
        (
            "toolcall_recovery_events_total{mode=\"observe\",outcome=\"recovered\"}",
            1.0,
        ),
        (
            "toolcall_recovery_events_total{mode=\"observe\",outcome=\"clean\"}",
            1.0,
        ),
        (
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}",
            0.0,
        ),
        (
            "toolcall_recovery_memories_created_total{mode=\"observe\"}",
            1.0,
        ),
        (
            "toolcall_recovery_memories_created_total{mode=\"recover\"}",
            0.0,
        ),
        (
            "toolcall_recovery_calls_total{family=\"hermes\",mode=\"observe\",outcome=\"forwarded\",tool=\"web_search\"}",
            1.0,
        ),
        ("toolcall_recovery_mode{mode=\"observe\"}", 1.0),
    ] {
        assert_eq!(app.metric(sample).await, n, "{sample}");
    }

    // A redelivery records nothing twice and republishes the same body.
    let (event, first_body) = &events[0];
    app.publish_event(event).await;
    let (again, _) = app.get_one(&app.moderation_queue, T).await.expect("again");
    assert_eq!(again["event_id"], first_body["event_id"]);
    assert_eq!(again["recovery"], first_body["recovery"]);
    app.wait_events(cases.len() as f64 + 1.0, T).await;
    assert_eq!(ledger_modes(&app).await.len(), want.len());

    // Switch to recover: the backfill recovers exactly the observed messages.
    let (summary, _) = run(&app, &["--no-publish"]).await;
    for (_, _, outcome) in cases.iter().filter(|c| c.2 != "clean") {
        assert_eq!(summary.count(outcome), 1, "{outcome} in {summary:?}");
    }
    assert_eq!(summary.memories_created, 1);
    for (id, content, outcome) in &cases {
        let now = app.message(*id).await.0.unwrap_or_default();
        if *outcome == "clean" {
            assert_eq!(&now, content);
        } else {
            assert_ne!(&now, content, "message {id} ({outcome}) recovered");
        }
    }
    assert_eq!(
        app.message(cases[0].0).await.0.as_deref(),
        Some("Noted, green tea it is.")
    );
    let applied = app
        .count("SELECT count(*) FROM recoveries WHERE mode = 'recover'")
        .await;
    assert_eq!(applied, want.len() as i64);
    let settled = fingerprint(&app).await;
    run(&app, &["--no-publish"]).await;
    assert_eq!(
        fingerprint(&app).await,
        settled,
        "a second run changes nothing"
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_backfill_then_recover_backfill_needs_no_reprocessing_flag() {
    let app = TestApp::prepare().await;
    let cases = seed(&app).await;
    let before = fingerprint(&app).await;

    let (observed, _) = run(&app, &["--mode=observe", "--no-publish"]).await;
    assert!(observed.finished);
    assert_eq!(observed.count("recovered"), 1, "{observed:?}");
    assert_eq!(observed.changed, 0, "an observe run changes nothing");
    let after = fingerprint(&app).await;
    assert_eq!((after.0, after.1), (before.0.clone(), before.1));
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE mode <> 'observe'")
            .await,
        0
    );
    // The observe run finished the walk: its checkpoint is past every message.
    assert_eq!(
        app.count("SELECT count(*) FROM backfill_checkpoints WHERE finished_at IS NOT NULL")
            .await,
        1
    );

    let (recovered, _) = run(&app, &["--no-publish"]).await;
    let leaks = cases.iter().filter(|c| c.2 != "clean").count() as u64;
    assert_eq!(recovered.revisited, leaks, "{recovered:?}");
    assert_eq!(recovered.count("recovered"), 1);
    assert_eq!(recovered.memories_created, 1);
    assert_eq!(
        app.message(cases[0].0).await.0.as_deref(),
        Some("Noted, green tea it is.")
    );
    let (third, _) = run(&app, &["--no-publish"]).await;
    assert_eq!(third.revisited, 0, "nothing observed is left");
    assert_eq!(third.memories_created, 0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_family_is_not_detected_and_others_still_are() {
    let mut app = TestApp::prepare().await;
    app.settings.policy.detect.families_disabled = FamilyList(vec![Family::Hermes]);
    app.start().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let hermes = hermes_leak(
        "save_memory",
        json!({"content": "likes tea", "memory_type": "fact"}),
        "Sure. ",
        "",
    );
    let prefix = result_prefix_leak("likes coffee", "fact", "Okay.");
    let mut bodies = Vec::new();
    for content in [&hermes, &prefix] {
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(content), &[])
            .await;
        app.publish_event(&app.event_for(id).await).await;
        let (body, _) = app
            .get_one(&app.moderation_queue, T)
            .await
            .expect("moderation");
        bodies.push((id, body));
    }
    assert_eq!(bodies[0].1["message"]["content"], json!(hermes));
    assert_eq!(bodies[0].1["recovery"]["outcome"], json!("clean"));
    assert_eq!(
        app.message(bodies[0].0).await.0.as_deref(),
        Some(hermes.as_str())
    );
    assert_eq!(bodies[1].1["recovery"]["outcome"], json!("recovered"));
    assert_eq!(app.message(bodies[1].0).await.0.as_deref(), Some("Okay."));
    let ledger = ledger_modes(&app).await;
    assert_eq!(
        ledger,
        vec![(bodies[1].0, "recover".to_string(), "recovered".to_string())]
    );
    assert_eq!(
        app.metric("toolcall_recovery_family_mode{family=\"hermes\",mode=\"disabled\"}")
            .await,
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_family_in_observe_mode_holds_back_only_messages_with_its_leaks() {
    let mut app = TestApp::prepare().await;
    app.settings.policy.families_observe = FamilyList(vec![Family::Mistral]);
    app.start().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let mistral = format!(
        "Searching.[TOOL_CALLS]{}",
        json!([{"name": "web_search", "arguments": {"q": "tea"}}])
    );
    // A message with a leak of each: the observed family holds back the whole message.
    let both = format!(
        "{}{}",
        hermes_leak(
            "save_memory",
            json!({"content": "likes tea", "memory_type": "fact"}),
            "Noted. ",
            " And "
        ),
        mistral
    );
    let hermes = hermes_leak(
        "save_memory",
        json!({"content": "likes cake", "memory_type": "fact"}),
        "Noted. ",
        "",
    );
    let mut results: Vec<(i64, String, Value)> = Vec::new();
    for content in [&mistral, &both, &hermes] {
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(content), &[])
            .await;
        app.publish_event(&app.event_for(id).await).await;
        let (body, _) = app
            .get_one(&app.moderation_queue, T)
            .await
            .expect("moderation");
        results.push((id, content.clone(), body));
    }
    for (id, content, body) in &results[..2] {
        assert_eq!(body["recovery"]["mode"], json!("observe"), "{body}");
        assert_eq!(body["message"]["content"], json!(content));
        assert_eq!(app.message(*id).await.0.as_deref(), Some(content.as_str()));
    }
    let (id, _, body) = &results[2];
    assert_eq!(body["recovery"]["mode"], json!("recover"));
    assert_eq!(body["recovery"]["outcome"], json!("recovered"));
    assert_eq!(app.message(*id).await.0.as_deref(), Some("Noted."));
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 1);
    assert_eq!(
        app.queue_len(&app.tool_calls_queue).await,
        0,
        "observed calls stay"
    );
    assert_eq!(
        app.metric("toolcall_recovery_family_mode{family=\"mistral\",mode=\"observe\"}")
            .await,
        1.0
    );
    assert_eq!(
        app.metric("toolcall_recovery_family_mode{family=\"hermes\",mode=\"recover\"}")
            .await,
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_recover_endpoint_observes_in_observe_mode_and_recovers_an_observed_message_after(
) {
    let mut app = TestApp::prepare().await;
    let cases = seed(&app).await;
    let (id, content, _) = cases[0].clone();
    let before = fingerprint(&app).await;

    app.settings.policy.mode = Mode::Observe;
    let observing = crate::admin::serve(&app, Some(crate::admin::TOKEN)).await;
    let (status, body) = crate::admin::recover(observing, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], json!("observe"));
    assert_eq!(body["outcome"], json!("recovered"));
    assert_eq!(body["content"], json!(content), "the content as it stays");
    assert_eq!(
        body["published"],
        json!({"moderation": 0, "tool_calls": 0, "pending": 0, "unroutable": 0})
    );
    assert_eq!(fingerprint(&app).await.0, before.0, "nothing changed");
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);
    // Pressing again records nothing new.
    let (status, body) = crate::admin::recover(observing, id).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE mode = 'observe'")
            .await,
        1
    );

    app.settings.policy.mode = Mode::Recover;
    let recovering = crate::admin::serve(&app, Some(crate::admin::TOKEN)).await;
    let (status, body) = crate::admin::recover(recovering, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], json!("recover"));
    assert_eq!(body["outcome"], json!("recovered"));
    assert_eq!(
        app.message(id).await.0.as_deref(),
        Some("Noted, green tea it is.")
    );
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 1);
    let (published, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("the recovered message is published");
    assert_eq!(
        published["message"]["content"],
        json!("Noted, green tea it is.")
    );
    assert_eq!(published["recovery"]["mode"], json!("recover"));
    app.cleanup().await;
}
