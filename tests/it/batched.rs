//! The statements of a batch (issue #23): one statement per kind for all its messages.
//! Against the real PostgreSQL: a batch writes what the same passes one at a time write,
//! each ledger item points at its own memory and tool message, a chat's transcript is
//! repaired once, observed passes are rolled back beside applied ones, and a statement the
//! database refuses names the message whose row it was.

use crate::harness::*;
use serde_json::{json, Value};
use sqlx::Row;
use toolcall_detect::Family;
use toolcall_recovery::ids::MessageId;
use toolcall_recovery::outbound::StandIn;
use toolcall_recovery::recover::{self, Mode, Outcome, Report, Request, Source};
use toolcall_recovery::settings::FamilyList;

fn item<'a>(id: i64, envelope: &'a StandIn) -> Request<'a> {
    Request {
        message_id: MessageId::new(id),
        source: Source::Backfill { model: None },
        envelope: Some(envelope),
    }
}

fn save(content: &str) -> String {
    hermes_leak(
        "save_memory",
        json!({"content": content, "memory_type": "fact"}),
        "",
        "",
    )
}

/// Messages covering the recovery table: a result object, two save_memory calls and a
/// forwarded call in one message, refused arguments, a clean reply, a bare result left for
/// review, a leak the model's own tool call already ran, no agent.
fn contents() -> Vec<(String, Vec<&'static str>, bool)> {
    let two_and_a_search = format!(
        "Noted. {} and {} then {} Done.",
        save("likes tea"),
        save("lives in Lyon"),
        hermes_leak("web_search", json!({"q": "tea"}), "", "")
    );
    let bad_type = hermes_leak(
        "save_memory",
        json!({"content": "x", "memory_type": "nope"}),
        "A. ",
        " B.",
    );
    vec![
        (
            result_prefix_leak("likes cake", "fact", "Sure."),
            vec![],
            true,
        ),
        (two_and_a_search, vec![], true),
        (bad_type, vec![], true),
        ("A plain reply.".to_string(), vec![], true),
        ("{success: true}".to_string(), vec![], true),
        (save("ran already"), vec!["save_memory"], true),
        (result_prefix_leak("nobody", "fact", "Ok."), vec![], false),
    ]
}

/// One message's pass, without what differs between two runs (ids, times, chats).
async fn normalised(app: &TestApp, report: &Report) -> Value {
    let id = report.message_id.get();
    let ledger = sqlx::query(
        "SELECT id, outcome, mode, source, content_before, content_after, tools_used_before, \
           tools_used_after, summary, cardinality(repaired_tool_message_ids) AS repaired \
         FROM recoveries WHERE message_id = $1",
    )
    .bind(id)
    .fetch_optional(&app.pool)
    .await
    .unwrap();
    let ledger = match ledger {
        None => Value::Null,
        Some(r) => {
            let items: Vec<Value> = sqlx::query(
                "SELECT i.leak_index, i.item_index, i.family, i.span_start, i.span_end, \
                   i.removed_text, i.call_name, i.call_arguments, i.result_object, i.outcome, \
                   i.detail, i.memory_id IS NOT NULL AS has_memory, m.content AS memory, \
                   t.content AS tool_message, i.tool_call_id IS NOT NULL AS has_call_id \
                 FROM recovery_items i \
                 LEFT JOIN agent_memories m ON m.id = i.memory_id \
                 LEFT JOIN messages t ON t.id = i.tool_message_id \
                 WHERE i.recovery_id = $1 ORDER BY i.leak_index, i.item_index",
            )
            .bind(r.get::<i64, _>("id"))
            .fetch_all(&app.pool)
            .await
            .unwrap()
            .iter()
            .map(|i| {
                let tool: Option<String> = i.get("tool_message");
                // The tool message's body names its memory by id: keep the rest.
                let tool = tool.map(|t| {
                    let mut v: Value = serde_json::from_str(&t).unwrap();
                    v.as_object_mut().unwrap().remove("memory_id");
                    v
                });
                json!({
                    "at": [i.get::<i32, _>("leak_index"), i.get::<i32, _>("item_index")],
                    "family": i.get::<String, _>("family"),
                    "span": [i.get::<i32, _>("span_start"), i.get::<i32, _>("span_end")],
                    "removed": i.get::<String, _>("removed_text"),
                    "name": i.get::<Option<String>, _>("call_name"),
                    "arguments": i.get::<Option<sqlx::types::Json<Value>>, _>("call_arguments").map(|j| j.0),
                    "result": i.get::<Option<sqlx::types::Json<Value>>, _>("result_object").map(|j| j.0),
                    "outcome": i.get::<String, _>("outcome"),
                    "detail": i.get::<Option<String>, _>("detail"),
                    "memory": [json!(i.get::<bool, _>("has_memory")), json!(i.get::<Option<String>, _>("memory"))],
                    "tool_message": tool,
                    "call_id": i.get::<bool, _>("has_call_id"),
                })
            })
            .collect();
            json!({
                "outcome": r.get::<String, _>("outcome"),
                "mode": r.get::<String, _>("mode"),
                "source": r.get::<String, _>("source"),
                "before": r.get::<Option<String>, _>("content_before"),
                "after": r.get::<Option<String>, _>("content_after"),
                "tools_before": r.get::<sqlx::types::Json<Value>, _>("tools_used_before").0,
                "tools_after": r.get::<sqlx::types::Json<Value>, _>("tools_used_after").0,
                "summary": r.get::<sqlx::types::Json<Value>, _>("summary").0,
                "repaired": r.get::<Option<i32>, _>("repaired"),
                "items": items,
            })
        }
    };
    let (content, tools_used) = app.message(id).await;
    let outbox = app
        .count(&format!(
            "SELECT count(*) FROM outbox WHERE message_id = {id}"
        ))
        .await;
    json!({
        "outcome": report.outcome.as_str(),
        "mode": report.mode.as_str(),
        "calls": report.calls.iter().map(|c| c.outcome.as_str()).collect::<Vec<_>>(),
        "memories_created": report.memories_created,
        "forwarded": report.forward.len(),
        "report_content": report.content,
        "summary": report.summary,
        "pending_outbox": report.outbox.len(),
        "content": content,
        "tools_used": tools_used,
        "ledger": ledger,
        "outbox": outbox,
    })
}

/// The messages of [`contents`], each in a chat of its own with an agent of its own.
async fn seed(app: &TestApp) -> Vec<i64> {
    let mut ids = Vec::new();
    for (content, tools_used, with_agent) in contents() {
        let chat = app.create_chat().await;
        let agent = app.create_agent(&["save_memory", "web_search"]).await;
        let agent = with_agent.then_some(agent);
        let id = app
            .create_message(chat, agent, "assistant", Some(&content), &tools_used)
            .await;
        ids.push(id);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_writes_what_the_same_passes_one_at_a_time_write() {
    let app = TestApp::prepare().await;
    let policy = app.settings.policy();
    let stand_in = StandIn::by(Source::Backfill { model: None });
    let together = seed(&app).await;
    let alone = seed(&app).await;

    let items = together.iter().map(|&id| item(id, &stand_in)).collect();
    let batched = recover::recover_batch(&app.pool, &policy, items)
        .await
        .unwrap();
    let mut one_by_one = Vec::new();
    for &id in &alone {
        let one = recover::recover_batch(&app.pool, &policy, vec![item(id, &stand_in)])
            .await
            .unwrap();
        one_by_one.extend(one);
    }

    let outcomes: Vec<Outcome> = batched.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Recovered,
            Outcome::Recovered,
            Outcome::InvalidArgs,
            Outcome::Clean,
            Outcome::NeedsReview,
            Outcome::StrippedOnly,
            Outcome::NoAgent,
        ]
    );
    for (b, a) in batched.iter().zip(&one_by_one) {
        assert_eq!(
            normalised(&app, b).await,
            normalised(&app, a).await,
            "message {} (batched) against {} (alone)",
            b.message_id,
            a.message_id
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 6);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_item_of_a_batch_points_at_its_own_memory_and_tool_message() {
    let app = TestApp::prepare().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let content = format!(
            "{} {}",
            save(&format!("first of {i}")),
            save(&format!("second of {i}"))
        );
        let (_, _, id) = app.leak(&["save_memory"], &content).await;
        ids.push(id);
    }
    let stand_in = StandIn::by(Source::Backfill { model: None });
    // Out of id order, so the batch's order is not the ids'.
    let items = ids.iter().rev().map(|&id| item(id, &stand_in)).collect();
    let reports = recover::recover_batch(&app.pool, &app.settings.policy(), items)
        .await
        .unwrap();
    assert!(reports.iter().all(|r| r.memories_created == 2));

    let rows = sqlx::query(
        "SELECT r.message_id, r.chat_id, i.call_arguments->>'content' AS asked, \
           i.memory_id, i.tool_message_id, i.tool_call_id, m.content AS saved, \
           t.content AS body, t.tool_call_id AS t_call_id, t.chat_id AS t_chat \
         FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id \
         JOIN agent_memories m ON m.id = i.memory_id \
         JOIN messages t ON t.id = i.tool_message_id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 12, "two items with a memory per message");
    for row in rows {
        let asked: String = row.get("asked");
        assert_eq!(
            row.get::<String, _>("saved"),
            asked,
            "the memory of its own call"
        );
        let body: Value = serde_json::from_str(&row.get::<String, _>("body")).unwrap();
        assert_eq!(body["memory_id"], json!(row.get::<i64, _>("memory_id")));
        assert_eq!(body["content"], json!(asked));
        assert_eq!(
            row.get::<Option<String>, _>("t_call_id"),
            row.get::<Option<String>, _>("tool_call_id")
        );
        assert_eq!(row.get::<i64, _>("t_chat"), row.get::<i64, _>("chat_id"));
        let message_id: i64 = row.get("message_id");
        let report = reports
            .iter()
            .find(|r| r.message_id.get() == message_id)
            .unwrap();
        let call = report
            .calls
            .iter()
            .find(|c| c.arguments.as_ref().unwrap()["content"] == json!(asked))
            .unwrap();
        assert_eq!(call.memory_id, Some(row.get::<i64, _>("memory_id")));
        assert_eq!(
            call.tool_message_id,
            Some(row.get::<i64, _>("tool_message_id"))
        );
    }
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_in_a_batch_is_repaired_once_and_reported_on_its_first_message() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let orphan = app.create_message(chat, None, "tool", Some("r"), &[]).await;
    let mut ids = Vec::new();
    for i in 0..2 {
        let content = result_prefix_leak(&format!("m{i}"), "fact", "Ok.");
        ids.push(
            app.create_message(chat, Some(agent), "assistant", Some(&content), &[])
                .await,
        );
    }
    let stand_in = StandIn::by(Source::Backfill { model: None });
    let items = vec![item(ids[1], &stand_in), item(ids[0], &stand_in)];
    let reports = recover::recover_batch(&app.pool, &app.settings.policy(), items)
        .await
        .unwrap();

    assert_eq!(
        reports[1].repaired_tool_messages,
        vec![orphan],
        "the first in id order"
    );
    assert!(reports[0].repaired_tool_messages.is_empty());
    let repaired: Vec<Vec<i64>> =
        sqlx::query_scalar("SELECT repaired_tool_message_ids FROM recoveries ORDER BY message_id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(repaired, vec![vec![orphan], vec![]]);
    let name: Option<String> = sqlx::query_scalar("SELECT tool_name FROM messages WHERE id = $1")
        .bind(orphan)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("unknown"));
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_rolls_back_its_observed_passes_and_keeps_its_applied_ones() {
    let mut app = TestApp::prepare().await;
    app.settings.policy.families_observe = FamilyList(vec![Family::Mistral]);
    let mistral = format!(
        "Searching.[TOOL_CALLS]{}",
        json!([{"name": "save_memory", "arguments": {"content": "observed", "memory_type": "fact"}}])
    );
    let (_, _, observed) = app.leak(&["save_memory"], &mistral).await;
    let applied_leak = save("applied");
    let (_, _, applied) = app.leak(&["save_memory"], &applied_leak).await;
    let stand_in = StandIn::by(Source::Backfill { model: None });
    let items = vec![item(observed, &stand_in), item(applied, &stand_in)];
    let reports = recover::recover_batch(&app.pool, &app.settings.policy(), items)
        .await
        .unwrap();

    assert_eq!(
        (reports[0].mode, reports[0].outcome),
        (Mode::Observe, Outcome::Recovered)
    );
    assert_eq!(
        (reports[1].mode, reports[1].outcome),
        (Mode::Recover, Outcome::Recovered)
    );
    assert_eq!(
        app.message(observed).await.0.as_deref(),
        Some(mistral.as_str())
    );
    assert_eq!(app.message(applied).await.0.as_deref(), Some(""));
    let memories: Vec<String> = sqlx::query_scalar("SELECT content FROM agent_memories")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(memories, ["applied"]);
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await,
        1
    );
    let observed_items = app
        .count(&format!(
            "SELECT count(*) FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id \
             WHERE r.message_id = {observed} AND r.mode = 'observe' \
               AND i.memory_id IS NULL AND i.tool_message_id IS NULL"
        ))
        .await;
    assert_eq!(
        observed_items, 1,
        "the observed item names nothing that was undone"
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_the_database_refuses_names_the_message_whose_row_it_was() {
    let app = TestApp::prepare().await;
    sqlx::query(
        "ALTER TABLE agent_memories ADD CONSTRAINT app_rule CHECK (content <> 'forbidden')",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let mut ids = Vec::new();
    for content in ["fine", "forbidden", "also fine"] {
        let (_, _, id) = app
            .leak(
                &["save_memory"],
                &result_prefix_leak(content, "fact", "Ok."),
            )
            .await;
        ids.push(id);
    }
    let stand_in = StandIn::by(Source::Backfill { model: None });
    let items = vec![
        item(ids[2], &stand_in),
        item(ids[1], &stand_in),
        item(ids[0], &stand_in),
    ];
    let err = recover::recover_batch(&app.pool, &app.settings.policy(), items)
        .await
        .expect_err("the refused memory fails the batch");

    assert_eq!(err.failed, Some(1), "the item of the refused message");
    assert_eq!(err.error.dead_letter_reason(), "rejected_by_database");
    assert!(err.is_the_items_own());
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.cleanup().await;
}
