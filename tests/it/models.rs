//! Leaks by model (#16), through the real worker, broker and database: events carry model
//! ids as providers spell them, `/metrics` shows them under their normalised labels and
//! never more label values than the configured list + `other` + `unknown` (a flood of
//! 10,000 distinct ids included), the ledger records the id of each pass, `ledger --model`
//! and the admin API's ledger endpoint find it, and the backfill's summary breaks down by
//! the model column of the app's `messages` table.

use crate::admin::request;
use crate::backfill::run;
use crate::harness::*;
use futures_util::future::try_join_all;
use lapin::options::BasicPublishOptions;
use lapin::BasicProperties;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use toolcall_recovery::cmd::ledger::{self as ledger_cmd, LedgerArgs};
use toolcall_recovery::model::Models;
use toolcall_recovery::settings::AdminToken;
use uuid::Uuid;

/// A finalized event of an assistant message with this content and `model_id` (`None`:
/// the field is absent). A clean message needs no row: the worker takes it to no database.
fn event(
    message_id: i64,
    chat_id: i64,
    agent_id: Option<i64>,
    content: &str,
    model: Option<Value>,
) -> Value {
    let mut message = json!({
        "id": message_id, "chat_id": chat_id, "agent_id": agent_id, "role": "assistant",
        "content": content, "tools_used": [],
    });
    if let Some(model) = model {
        message["model_id"] = model;
    }
    json!({
        "event_id": Uuid::new_v4().to_string(),
        "type": "message.finalized",
        "occurred_at": "2026-11-22T04:00:00Z",
        "message": message,
    })
}

/// Publishes many events, their confirms awaited together rather than one by one.
async fn publish_all(app: &TestApp, events: &[Value]) {
    let n = &app.settings.names;
    for chunk in events.chunks(500) {
        let mut confirms = Vec::with_capacity(chunk.len());
        for e in chunk {
            let body = serde_json::to_vec(e).expect("json");
            confirms.push(
                app.channel
                    .basic_publish(
                        &n.input_exchange,
                        &n.input_routing_key,
                        BasicPublishOptions {
                            mandatory: true,
                            ..Default::default()
                        },
                        &body,
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await
                    .expect("publish"),
            );
        }
        try_join_all(confirms).await.expect("confirms");
    }
}

/// The values of `label` over the series of `metric` in a scrape, each with the sum of
/// its series.
fn label_values(scrape: &str, metric: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let needle = format!("{label}=\"");
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix(metric).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some(start) = rest.find(&needle) else {
            continue;
        };
        let value = &rest[start + needle.len()..];
        let value = &value[..value.find('"').expect("closing quote")];
        let sample: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("value");
        *out.entry(value.to_string()).or_default() += sample;
    }
    out
}

fn ledger_args(app: &TestApp, extra: &[&str]) -> LedgerArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: LedgerArgs,
    }
    let mut v = vec![
        "ledger".to_string(),
        format!("--database-url={}", app.db_url),
        "--json".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    P::try_parse_from(v).expect("ledger flags").a
}

/// The message ids `toolcall-recovery ledger --json` lists with these flags.
async fn ledger_messages(app: &TestApp, extra: &[&str]) -> Vec<i64> {
    let mut out = Vec::new();
    ledger_cmd::run(ledger_args(app, extra), &mut out)
        .await
        .expect("ledger runs");
    String::from_utf8(out)
        .expect("utf-8")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json line")["message_id"]
                .as_i64()
                .expect("id")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_ids_are_counted_under_their_normalised_labels() {
    let mut app = TestApp::prepare().await;
    app.settings.admin.admin_token = Some(AdminToken::new("models-token"));
    app.start().await;
    // Every label of the default list is there at 0 before any event.
    let primed = label_values(
        &app.metrics().await,
        "toolcall_recovery_messages_seen_total",
        "model",
    );
    let all: Vec<String> = Models::default().names().map(str::to_string).collect();
    assert_eq!(primed.keys().cloned().collect::<Vec<_>>(), {
        let mut sorted = all.clone();
        sorted.sort();
        sorted
    });
    assert!(primed.values().all(|v| *v == 0.0));
    let unrecovered = label_values(
        &app.metrics().await,
        "toolcall_recovery_unrecovered_calls_total",
        "outcome",
    );
    assert_eq!(
        unrecovered.keys().collect::<Vec<_>>(),
        ["invalid_args", "needs_review", "tool_not_enabled"]
    );

    let clean: Vec<(Option<Value>, &str)> = vec![
        (
            Some(json!("models/gemini-2.5-flash-preview-05-20")),
            "gemini-2.5-flash",
        ),
        (Some(json!("google/gemini-2.5-flash")), "gemini-2.5-flash"),
        (Some(json!(" GEMINI-2.5-Flash ")), "gemini-2.5-flash"),
        (Some(json!("GPT-4o-2024-08-06")), "gpt-4o"),
        (Some(json!("openai/gpt-4o-mini")), "gpt-4o-mini"),
        (
            Some(json!("us.anthropic.claude-3-7-sonnet-20250219-v1:0")),
            "claude",
        ),
        (
            Some(json!("anthropic/claude-sonnet-4-20250514")),
            "claude-sonnet",
        ),
        (Some(json!("acme/secret-model-9000")), "other"),
        (Some(json!(null)), "unknown"),
        (None, "unknown"),
        (Some(json!("   ")), "unknown"),
    ];
    let events: Vec<Value> = clean
        .iter()
        .enumerate()
        .map(|(i, (model, _))| {
            event(
                1_000_000 + i as i64,
                1,
                None,
                "A clean answer.",
                model.clone(),
            )
        })
        .collect();
    publish_all(&app, &events).await;

    // Two leaks, so the leak and unrecovered counters have series: a recovered save_memory
    // and a bare result object left for review.
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Prefers green tea", "preference", "Noted!");
    let recovered = app
        .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
        .await;
    let bare = "{success: true, memory_type: \"journal\", content: \"only this\"}";
    let review = app
        .create_message(chat, Some(agent), "assistant", Some(bare), &[])
        .await;
    let qwen = "openrouter/qwen/qwen3-235b-a22b-2507:free";
    publish_all(
        &app,
        &[
            event(recovered, chat, Some(agent), &leak, Some(json!(qwen))),
            event(review, chat, Some(agent), bare, Some(json!("x-ai/grok-4"))),
        ],
    )
    .await;
    app.wait_events((clean.len() + 2) as f64, Duration::from_secs(60))
        .await;

    let scrape = app.metrics().await;
    let seen = label_values(&scrape, "toolcall_recovery_messages_seen_total", "model");
    let mut want: BTreeMap<String, f64> = all.iter().map(|m| (m.clone(), 0.0)).collect();
    for (_, label) in &clean {
        *want.entry(label.to_string()).or_default() += 1.0;
    }
    *want.entry("qwen3".into()).or_default() += 1.0;
    *want.entry("grok-4".into()).or_default() += 1.0;
    assert_eq!(seen, want, "messages seen by model");
    for (sample, value) in [
        (
            "toolcall_recovery_leaks_total{family=\"result_prefix\",model=\"qwen3\"}",
            1.0,
        ),
        (
            "toolcall_recovery_leaks_total{family=\"result_only\",model=\"grok-4\"}",
            1.0,
        ),
        (
            "toolcall_recovery_unrecovered_calls_total{model=\"grok-4\",outcome=\"needs_review\"}",
            1.0,
        ),
        (
            "toolcall_recovery_unrecovered_calls_total{model=\"qwen3\",outcome=\"needs_review\"}",
            0.0,
        ),
        (
            "toolcall_recovery_leaked_messages_total{model=\"qwen3\"}",
            1.0,
        ),
        (
            "toolcall_recovery_leaked_messages_total{model=\"grok-4\"}",
            1.0,
        ),
    ] {
        assert_eq!(metric_value(&scrape, sample), value, "{sample}");
    }
    assert_eq!(
        label_values(&scrape, "toolcall_recovery_leaks_total", "model").len(),
        2,
        "leak series by family appear only for models that leaked"
    );
    let leaked = label_values(&scrape, "toolcall_recovery_leaked_messages_total", "model");
    assert_eq!(
        leaked.len(),
        all.len(),
        "leaked messages are primed for every label"
    );
    assert_eq!(leaked.values().sum::<f64>(), 2.0);

    // The ledger keeps the id as the event spelled it.
    let recorded: Vec<(i64, Option<String>, String)> =
        sqlx::query_as("SELECT message_id, model, source FROM recoveries ORDER BY message_id")
            .fetch_all(&app.pool)
            .await
            .expect("ledger rows");
    assert_eq!(
        recorded,
        [
            (recovered, Some(qwen.to_string()), "event".to_string()),
            (review, Some("x-ai/grok-4".to_string()), "event".to_string()),
        ]
    );
    // `ledger --model` by label, by the id in any case, and `other` / `unknown`.
    assert_eq!(ledger_messages(&app, &["--model=qwen3"]).await, [recovered]);
    assert_eq!(
        ledger_messages(&app, &["--model=OpenRouter/Qwen/qwen3-235b-a22b-2507:FREE"]).await,
        [recovered]
    );
    assert_eq!(ledger_messages(&app, &["--model=grok-4"]).await, [review]);
    assert_eq!(
        ledger_messages(&app, &["--model=grok"]).await,
        Vec::<i64>::new(),
        "a label, not a prefix"
    );
    assert_eq!(
        ledger_messages(&app, &["--model=other"]).await,
        Vec::<i64>::new()
    );
    assert_eq!(
        ledger_messages(&app, &["--model=unknown"]).await,
        Vec::<i64>::new()
    );
    // Under another list the same id has another label.
    assert_eq!(
        ledger_messages(&app, &["--models=qwen*", "--model=qwen"]).await,
        [recovered]
    );
    assert_eq!(
        ledger_messages(&app, &["--models=qwen*", "--model=other"]).await,
        [review]
    );
    let mut both = ledger_messages(&app, &[]).await;
    both.sort_unstable();
    assert_eq!(both, [recovered, review], "no filter: both");
    // The admin API's ledger endpoint shows it.
    let addr = app.http_addr.expect("worker address");
    let (status, body) = request(
        addr,
        "GET",
        &format!("/v1/messages/{recovered}/ledger"),
        Some("Bearer models-token"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["recoveries"][0]["model"], json!(qwen), "{body}");
    assert_eq!(body["recoveries"][0]["source"], json!("event"));
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_model_ids_stays_within_the_configured_series() {
    let mut app = TestApp::prepare().await;
    app.settings.models.models = Models::parse("gemini-2.5-flash*,gpt-4o").expect("list");
    app.settings.prefetch = 64;
    app.settings.concurrency = 16;
    app.start().await;
    const FLOOD: usize = 10_000;
    let mut events = Vec::with_capacity(FLOOD);
    let mut want: BTreeMap<&str, f64> = BTreeMap::new();
    let mut distinct = BTreeSet::new();
    for i in 0..FLOOD {
        let (model, label) = match i % 5 {
            // Distinct ids, one model: a snapshot per id.
            0 => (json!(format!("openai/GPT-4o-{}", 20_000_000 + i)), "gpt-4o"),
            1 => (
                json!(format!("vertex_ai/gemini-2.5-flash-exp-{i:06}")),
                "gemini-2.5-flash",
            ),
            // Made-up ids of every shape: other.
            2 => (
                json!(format!("gpt-4o-{}", Uuid::new_v4().simple())),
                "other",
            ),
            3 => (
                json!(format!(
                    "ev\u{0}il/\u{1b}[31m{}\n\"model\"=\"x\"",
                    Uuid::new_v4()
                )),
                "other",
            ),
            _ if i % 10 == 4 => (json!("é".repeat(1 + i % 300)), "other"),
            _ => (Value::Null, "unknown"),
        };
        if let Some(id) = model.as_str() {
            distinct.insert(id.to_string());
        }
        *want.entry(label).or_default() += 1.0;
        events.push(event(
            2_000_000 + i as i64,
            1,
            None,
            "A clean answer.",
            Some(model),
        ));
    }
    assert!(
        distinct.len() > 7_000,
        "the flood names {} distinct ids",
        distinct.len()
    );
    // Leaks under made-up ids too, so the leak and unrecovered counters see the flood.
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    for i in 0..30 {
        let content = if i % 2 == 0 {
            result_prefix_leak(&format!("memory {i}"), "journal", "Okay.")
        } else {
            "{success: true, memory_type: \"journal\", content: \"only this\"}".to_string()
        };
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(&content), &[])
            .await;
        let (model, label) = if i % 3 == 0 {
            (format!("models/gemini-2.5-flash-{i}"), "gemini-2.5-flash")
        } else {
            (format!("leaky-model-{}", Uuid::new_v4()), "other")
        };
        *want.entry(label).or_default() += 1.0;
        events.push(event(id, chat, Some(agent), &content, Some(json!(model))));
    }
    publish_all(&app, &events).await;
    app.wait_events(events.len() as f64, Duration::from_secs(180))
        .await;

    let scrape = app.metrics().await;
    let allowed: BTreeSet<&str> = ["gemini-2.5-flash", "gpt-4o", "other", "unknown"].into();
    let seen = label_values(&scrape, "toolcall_recovery_messages_seen_total", "model");
    assert_eq!(
        seen,
        want.iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        "every event counted once, under one of the four labels"
    );
    for metric in [
        "toolcall_recovery_messages_seen_total",
        "toolcall_recovery_leaked_messages_total",
        "toolcall_recovery_leaks_total",
        "toolcall_recovery_unrecovered_calls_total",
    ] {
        let values = label_values(&scrape, metric, "model");
        assert!(
            values.keys().all(|v| allowed.contains(v.as_str())),
            "{metric}: model label values {:?}",
            values.keys().collect::<Vec<_>>()
        );
    }
    assert_eq!(
        scrape
            .lines()
            .filter(|l| l.starts_with("toolcall_recovery_messages_seen_total{"))
            .count(),
        4
    );
    assert_eq!(
        scrape
            .lines()
            .filter(|l| l.starts_with("toolcall_recovery_unrecovered_calls_total{"))
            .count(),
        4 * 3
    );
    let leaks = label_values(&scrape, "toolcall_recovery_leaks_total", "model");
    assert_eq!(leaks.get("other"), Some(&20.0), "{leaks:?}");
    assert_eq!(leaks.get("gemini-2.5-flash"), Some(&10.0), "{leaks:?}");
    let leaked = label_values(&scrape, "toolcall_recovery_leaked_messages_total", "model");
    assert_eq!(leaked.len(), 4, "{leaked:?}");
    assert_eq!(leaked.values().sum::<f64>(), 30.0, "{leaked:?}");
    assert_eq!(
        metric_value(&scrape, "toolcall_recovery_unrecovered_calls_total{model=\"other\",outcome=\"needs_review\"}")
            + metric_value(&scrape, "toolcall_recovery_unrecovered_calls_total{model=\"gemini-2.5-flash\",outcome=\"needs_review\"}"),
        15.0
    );
    // The whole scrape stays small: no series per id anywhere.
    let series = scrape.lines().filter(|l| !l.starts_with('#')).count();
    assert!(series < 400, "{series} series in the scrape");
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backfill_summary_breaks_down_by_the_model_column() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let rows: Vec<(String, &str)> = vec![
        (
            result_prefix_leak("Likes tea", "preference", "Noted!"),
            "models/gemini-2.5-flash-preview-05-20",
        ),
        (
            result_prefix_leak("Likes jazz", "preference", "Sure."),
            "gemini-2.5-flash",
        ),
        (
            "{success: true, memory_type: \"journal\", content: \"only this\"}".into(),
            "gemini-2.5-flash",
        ),
        (
            "Sets like {x | x > 0} are infinite.".into(),
            "gemini-2.5-flash",
        ),
        (
            hermes_leak(
                "save_memory",
                json!({"content": "x", "memory_type": "bogus"}),
                "",
                "Okay.",
            ),
            "openai/gpt-4o-2024-08-06",
        ),
        ("Arrays [1, 2] are fine.".into(), "acme-9000"),
    ];
    let mut ids = Vec::new();
    for (content, _) in &rows {
        ids.push(
            app.create_message(chat, Some(agent), "assistant", Some(content), &[])
                .await,
        );
    }
    // The contract's table has no model column: every model is unknown.
    let (summary, text) = run(&app, &["--dry-run"]).await;
    assert_eq!(summary.by_model.keys().collect::<Vec<_>>(), ["unknown"]);
    let unknown = &summary.by_model["unknown"];
    assert_eq!(unknown.examined, 6);
    assert_eq!(unknown.leaked, 4);
    assert_eq!(unknown.leaks.get("result_prefix"), Some(&2));
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("unknown")
            && l.contains("examined 6  leaked 4 (result_prefix 2, hermes 1, result_only 1)  unrecovered 2 (invalid_args 1, needs_review 1)")),
        "{text}"
    );
    assert!(
        text.contains(
            "by model (examined, leaked (would be) by family, unrecovered calls by outcome):"
        ),
        "{text}"
    );

    // The app's table with a model column, as many chat apps have.
    sqlx::query("ALTER TABLE messages ADD COLUMN model_id text")
        .execute(&app.pool)
        .await
        .expect("model column");
    for (id, (_, model)) in ids.iter().zip(&rows) {
        sqlx::query("UPDATE messages SET model_id = $2 WHERE id = $1")
            .bind(id)
            .bind(model)
            .execute(&app.pool)
            .await
            .expect("model");
    }
    let (summary, text) = run(&app, &["--dry-run", "--json"]).await;
    let by_model = serde_json::to_value(&summary.by_model).expect("json");
    assert_eq!(
        by_model,
        json!({
            "gemini-2.5-flash": {"examined": 4, "leaked": 3, "leaks": {"result_prefix": 2, "result_only": 1}, "unrecovered": {"needs_review": 1}},
            "gpt-4o": {"examined": 1, "leaked": 1, "leaks": {"hermes": 1}, "unrecovered": {"invalid_args": 1}},
            "other": {"examined": 1, "leaked": 0, "leaks": {}, "unrecovered": {}},
        }),
        "{text}"
    );
    let last: Value =
        serde_json::from_str(text.lines().last().expect("summary line")).expect("json");
    assert_eq!(last["summary"]["by_model"], by_model);
    let first: Value =
        serde_json::from_str(text.lines().next().expect("a message line")).expect("json");
    assert_eq!(first["model"], json!("gemini-2.5-flash"));
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries").await,
        0,
        "a dry run writes nothing"
    );

    // Another column name, or none: unknown again.
    let (summary, _) = run(&app, &["--dry-run", "--model-column=no_such_column"]).await;
    assert_eq!(summary.by_model.keys().collect::<Vec<_>>(), ["unknown"]);
    let (summary, _) = run(&app, &["--dry-run", "--model-column="]).await;
    assert_eq!(summary.by_model.keys().collect::<Vec<_>>(), ["unknown"]);

    // A real run records each pass's model in the ledger, as the row spelled it.
    let (summary, _) = run(&app, &["--no-publish"]).await;
    assert_eq!(summary.by_model["gpt-4o"].leaks.get("hermes"), Some(&1));
    let recorded: Vec<(i64, Option<String>, String)> =
        sqlx::query_as("SELECT message_id, model, source FROM recoveries ORDER BY message_id")
            .fetch_all(&app.pool)
            .await
            .expect("ledger");
    assert_eq!(
        recorded,
        [
            (ids[0], Some(rows[0].1.to_string()), "backfill".to_string()),
            (ids[1], Some(rows[1].1.to_string()), "backfill".to_string()),
            (ids[2], Some(rows[2].1.to_string()), "backfill".to_string()),
            (ids[4], Some(rows[4].1.to_string()), "backfill".to_string()),
        ]
    );
    let mut gemini = ledger_messages(&app, &["--model=gemini-2.5-flash"]).await;
    gemini.sort_unstable();
    assert_eq!(gemini, [ids[0], ids[1], ids[2]]);
    app.cleanup().await;
}
