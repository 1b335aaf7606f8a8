//! Events the worker cannot examine still get their message moderated, as stored, with an
//! outcome that says why (`oversized`, `unreadable`), under the one stand-in id of the
//! message, and are dead-lettered for inspection; a body that names no message, or an
//! event of another type (however broken), is only dead-lettered. With a valid event of
//! the same message, before, after or at the same time, a consumer that follows
//! docs/contract.md ends with the valid event's moderation message current. A clean event
//! with null or blank content has nothing to moderate.

use crate::harness::*;
use serde_json::{json, Value};
use std::time::Duration;
use toolcall_recovery::ids::{unexamined_event_id, EventId, MessageId};
use uuid::Uuid;

const T: Duration = Duration::from_secs(20);

/// Every message in `queue` until none comes for a second (at least `n` expected).
async fn drain(app: &TestApp, queue: &str, n: usize) -> Vec<(Value, lapin::types::FieldTable)> {
    let mut out = Vec::new();
    while let Some(m) = app
        .get_one(
            queue,
            if out.len() < n {
                T
            } else {
                Duration::from_secs(1)
            },
        )
        .await
    {
        out.push(m);
    }
    assert!(
        out.len() >= n,
        "only {} of {n} arrived in {queue}",
        out.len()
    );
    out
}

fn moderation_id(event_id: &str) -> String {
    EventId::new(Uuid::parse_str(event_id).unwrap())
        .moderation_event_id()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_moderated_as_stored_and_dead_lettered() {
    let app = TestApp::spawn().await;
    // A 2 MB reply (over the 1 MiB --max-body-bytes), leak and all: it is not examined.
    let content = format!(
        "{}Here is the log you pasted:\n{}",
        result_prefix_leak("Likes long logs", "fact", ""),
        "2026-01-01 INFO line of a long pasted log\n".repeat(50_000)
    );
    assert!(content.len() > 2_000_000);
    let (_, _, id) = app.leak(&["save_memory"], &content).await;
    let event = app.event_for(id).await;
    let body = serde_json::to_vec(&event).unwrap();
    // Delivered twice (a redelivery): the same moderation id both times.
    app.publish_raw(&body).await;
    app.publish_raw(&body).await;

    let moderated = drain(&app, &app.moderation_queue, 2).await;
    assert_eq!(moderated.len(), 2, "one moderation per delivery");
    let source = event["event_id"].as_str().unwrap();
    let stand_in = unexamined_event_id(MessageId::new(id));
    for (m, _) in &moderated {
        assert_eq!(
            m["event_id"],
            json!(stand_in.moderation_event_id().to_string()),
            "the stand-in of the message"
        );
        assert_eq!(m["source_event_id"], json!(stand_in.to_string()));
        assert_eq!(m["recovery"]["unexamined_event_id"], json!(source));
        assert_eq!(m["message"]["id"], json!(id));
        assert!(
            m["message"]["content"] == json!(content),
            "the content as stored, unchanged"
        );
        assert_eq!(m["recovery"]["outcome"], json!("oversized"));
        assert_eq!(m["recovery"]["reason"], json!("oversized"));
    }
    let dead = drain(&app, &app.settings.names.dead_letter_queue, 2).await;
    assert_eq!(dead.len(), 2);
    for (d, headers) in &dead {
        assert_eq!(
            header(headers, "x-tcr-reason").as_deref(),
            Some("oversized")
        );
        assert_eq!(
            header(headers, "x-tcr-event-id").as_deref(),
            Some(source),
            "the event id read by the scan is carried"
        );
        assert_eq!(d, &event, "the dead letter is the body as delivered");
    }
    assert_eq!(
        app.message(id).await.0.as_deref(),
        Some(content.as_str()),
        "not examined, so not recovered"
    );
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_that_do_not_decode_but_name_a_message_are_moderated_and_dead_lettered() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let stored = "The answer as the app stored it.";
    let id = app
        .create_message(chat, None, "assistant", Some(stored), &[])
        .await;
    let event_id = Uuid::new_v4().to_string();
    let prefix = format!(
        r#"{{"event_id":"{event_id}","type":"message.finalized","occurred_at":"2026-11-22T04:00:00Z","message":{{"id":{id},"chat_id":{chat},"role":"assistant","content":"#
    );
    // Broken JSON around a valid id: the content's string is not closed properly.
    let malformed = format!(r#"{prefix}"The answer" as the app" stored it.}}}}"#).into_bytes();
    // Not UTF-8 inside the content.
    let mut not_utf8 = format!(r#"{prefix}""#).into_bytes();
    not_utf8.extend_from_slice(b"\xff\xfe broken");
    not_utf8.extend_from_slice(br#""}}"#);
    // JSON, but the wrong shape (a bad timestamp), and no event id at all.
    let wrong_shape = serde_json::to_vec(&json!({
        "type": "message.finalized", "occurred_at": "yesterday",
        "message": {"id": id, "chat_id": chat, "role": "assistant", "content": stored}
    }))
    .unwrap();
    // Names no message: dead-lettered only.
    let nameless = format!(r#"{{"event_id":"{event_id}","message":{{"chat_id":1,"#).into_bytes();
    // Another event type: no finalized message, dead-lettered only.
    let other_type = serde_json::to_vec(&json!({
        "event_id": Uuid::new_v4().to_string(), "type": "message.deleted",
        "occurred_at": "2026-11-22T04:00:00Z",
        "message": {"id": id, "chat_id": chat, "role": "assistant", "content": stored}
    }))
    .unwrap();
    // Another type, broken too (a missing field): still no finalized message.
    let other_type_broken = serde_json::to_vec(&json!({
        "event_id": Uuid::new_v4().to_string(), "type": "message.deleted",
        "occurred_at": "2026-11-22T04:00:00Z",
        "message": {"id": id, "role": "assistant", "content": stored}
    }))
    .unwrap();
    for body in [
        &malformed,
        &not_utf8,
        &wrong_shape,
        &nameless,
        &other_type,
        &other_type_broken,
    ] {
        app.publish_raw(body).await;
    }

    let mut reasons: Vec<String> = drain(&app, &app.settings.names.dead_letter_queue, 6)
        .await
        .iter()
        .map(|(_, h)| header(h, "x-tcr-reason").expect("reason"))
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "invalid_event",
            "invalid_utf8",
            "malformed_json",
            "malformed_json",
            "unknown_type",
            "unknown_type"
        ]
    );
    let mut moderated = drain(&app, &app.moderation_queue, 3).await;
    assert_eq!(
        moderated.len(),
        3,
        "the nameless and the other types are not"
    );
    moderated.sort_by_key(|(m, _)| m["recovery"]["reason"].as_str().map(str::to_string));
    let reasons: Vec<&Value> = moderated
        .iter()
        .map(|(m, _)| &m["recovery"]["reason"])
        .collect();
    assert_eq!(
        reasons,
        [
            &json!("invalid_event"),
            &json!("invalid_utf8"),
            &json!("malformed_json")
        ]
    );
    for (m, _) in &moderated {
        assert_eq!(m["recovery"]["outcome"], json!("unreadable"));
        assert_eq!(m["message"]["id"], json!(id));
        assert_eq!(m["message"]["chat_id"], json!(chat));
        assert_eq!(m["message"]["content"], json!(stored));
        assert_eq!(m["type"], json!("message.finalized"));
    }
    // One stand-in for the message, whatever event id each body shows (or none).
    let stand_in = unexamined_event_id(MessageId::new(id));
    for (m, _) in &moderated {
        assert_eq!(
            m["event_id"],
            json!(stand_in.moderation_event_id().to_string())
        );
        assert_eq!(m["source_event_id"], json!(stand_in.to_string()));
    }
    let shown: Vec<&Value> = moderated
        .iter()
        .map(|(m, _)| &m["recovery"]["unexamined_event_id"])
        .collect();
    assert_eq!(
        shown,
        [&Value::Null, &json!(event_id), &json!(event_id)],
        "the event id a body shows is kept, for the dead letter"
    );
    assert_eq!(app.queue_len(&app.settings.names.queue).await, 0);
    app.cleanup().await;
}

/// Whether a moderation message is the stand-in of an unexamined body
/// (docs/contract.md, "Which moderation message is current").
fn is_stand_in(m: &Value) -> bool {
    matches!(
        m["recovery"]["outcome"].as_str(),
        Some("oversized" | "unreadable")
    )
}

/// A consumer that follows the rule of docs/contract.md over `arrived` (the moderation
/// messages of one message, in arrival order): drops a repeated `event_id`, never lets a
/// stand-in replace another version. Returns the current version and how many versions
/// it moderated.
fn by_the_rule(arrived: &[Value]) -> (Value, usize) {
    let mut seen = std::collections::HashSet::new();
    let mut current: Option<&Value> = None;
    let mut moderated = 0;
    for m in arrived {
        if !seen.insert(m["event_id"].clone()) {
            continue;
        }
        if current.is_some() && is_stand_in(m) {
            continue;
        }
        current = Some(m);
        moderated += 1;
    }
    (current.expect("one").clone(), moderated)
}

/// A message with a valid event and two bodies that name it but cannot be examined (one
/// with its own event id, one with none): the valid event before them, after them, and at
/// the same time. Moderation gets two versions of each message, no more: the valid
/// event's, and one stand-in the two bodies share; by the rule, the valid event's is
/// current in every order, and with the valid event first the stand-in is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_a_valid_event_and_unexamined_ones_has_one_current_moderation() {
    let app = TestApp::spawn().await;
    let leak = format!(
        "{}Sure, noted.",
        result_prefix_leak("Prefers tea", "preference", "")
    );
    let dead = app.settings.names.dead_letter_queue.clone();
    let poison = |id: i64, chat: i64| {
        let own_id = format!(
            r#"{{"event_id":"{}","type":"message.finalized","occurred_at":"2026-11-22T04:00:00Z","message":{{"id":{id},"chat_id":"{chat}","role":"assistant","content":"x"}}}}"#,
            Uuid::new_v4()
        );
        let no_id = format!(
            r#"{{"type":"message.finalized","message":{{"id":{id},"chat_id":{chat},"content":"cut sho"#
        );
        [own_id.into_bytes(), no_id.into_bytes()]
    };
    let mut valid = Vec::new();
    for order in ["before", "after", "same time"] {
        let (chat, _, id) = app.leak(&["save_memory"], &leak).await;
        let event = app.event_for(id).await;
        let dead_before = app.queue_len(&dead).await;
        match order {
            "before" => {
                app.publish_event(&event).await;
                app.wait_events(valid.len() as f64 + 1.0, T).await;
                for body in poison(id, chat) {
                    app.publish_raw(&body).await;
                }
            }
            "after" => {
                for body in poison(id, chat) {
                    app.publish_raw(&body).await;
                }
                wait_for("the two dead letters", T, || async {
                    app.queue_len(&dead).await >= dead_before + 2
                })
                .await;
                app.publish_event(&event).await;
            }
            _ => {
                let [a, b] = poison(id, chat);
                app.publish_event(&event).await;
                app.publish_raw(&a).await;
                app.publish_raw(&b).await;
            }
        }
        valid.push((order, id, event));
        app.wait_events(valid.len() as f64, T).await;
    }
    let moderated = drain(&app, &app.moderation_queue, 9).await;
    assert_eq!(moderated.len(), 9, "three per message");
    for (order, id, event) in &valid {
        let arrived: Vec<Value> = moderated
            .iter()
            .map(|(m, _)| m.clone())
            .filter(|m| m["message"]["id"] == json!(id))
            .collect();
        let stand_in = unexamined_event_id(MessageId::new(*id))
            .moderation_event_id()
            .to_string();
        let examined = moderation_id(event["event_id"].as_str().unwrap());
        let mut ids: Vec<String> = arrived
            .iter()
            .map(|m| m["event_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids.dedup();
        let mut expected = vec![stand_in.clone(), examined.clone()];
        expected.sort();
        assert_eq!(ids, expected, "{order}: two versions, no more");
        for m in &arrived {
            assert_eq!(
                is_stand_in(m),
                m["event_id"] == json!(stand_in),
                "{order}: {m}"
            );
        }
        let (current, times) = by_the_rule(&arrived);
        assert_eq!(current["event_id"], json!(examined), "{order}");
        assert_eq!(
            current["message"]["content"],
            json!("Sure, noted."),
            "{order}: the message as recovered"
        );
        if *order == "before" {
            assert_eq!(times, 1, "the stand-ins came after the valid one: dropped");
            for m in arrived.iter().filter(|m| is_stand_in(m)) {
                assert_eq!(m["message"]["content"], json!("Sure, noted."), "as stored");
            }
        }
    }
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        3,
        "one memory per message"
    );
    assert_eq!(app.queue_len(&dead).await, 6);
    app.cleanup().await;
}

/// The contract moderates every finalized message with non-blank content: an event whose
/// content is null or blank has none, so it is acked as clean, and neither moderated nor
/// dead-lettered (it is no poison: `content` may be null).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_event_with_null_or_blank_content_is_acked_and_not_moderated() {
    let app = TestApp::spawn().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let null = app
        .create_message(chat, Some(agent), "assistant", None, &[])
        .await;
    let blank = app
        .create_message(chat, Some(agent), "assistant", Some(" \n\t "), &[])
        .await;
    let good = app
        .create_message(chat, Some(agent), "assistant", Some("Fine."), &[])
        .await;
    for id in [null, blank, good] {
        let event = app.event_for(id).await;
        app.publish_event(&event).await;
    }
    app.wait_events(3.0, T).await;
    assert_eq!(
        app.metric("toolcall_recovery_events_total{mode=\"recover\",outcome=\"clean\"}")
            .await,
        3.0
    );
    let moderated = drain(&app, &app.moderation_queue, 1).await;
    assert_eq!(moderated.len(), 1, "only the message with content");
    assert_eq!(moderated[0].0["message"]["id"], json!(good));
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    assert_eq!(app.queue_len(&app.settings.names.queue).await, 0);
    app.cleanup().await;
}
