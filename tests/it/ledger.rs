//! The read side of the ledger (`toolcall-recovery ledger`, `ledger::message_ledger`) on
//! rows written by the real recovery path: newest first, every filter narrows exactly,
//! the limit, JSON Lines, and no message content unless `--show-text` asks for it.
//! Observed and reverted rows are made by a direct UPDATE: only their listing is tested
//! here. No worker is started.

use crate::harness::*;
use clap::Parser;
use serde_json::{json, Value};
use toolcall_recovery::cmd::ledger::{self as ledger_cmd, LedgerArgs};
use toolcall_recovery::detect::Family;
use toolcall_recovery::ids::MessageId;
use toolcall_recovery::ledger::{self, Filter};
use toolcall_recovery::recover::Mode;
use toolcall_recovery::recover::{self, Outcome, Report, Request, Source};

/// Text around the leaks that only `--show-text` may print.
const PRIVATE: &str = "PRIVATE-REPLY-7f3a";

/// THE recovery, as the backfill runs it (the one place that names its policy argument).
async fn recover(app: &TestApp, id: i64) -> Report {
    let config = recover::Policy::default();
    recover::recover(
        &app.pool,
        &config,
        Request::new(MessageId::new(id), Source::Backfill { model: None }),
    )
    .await
    .expect("recovery runs")
}

/// The seeded messages, in the order they were recovered (ascending recovery ids).
struct Seeded {
    chat_a: i64,
    chat_b: i64,
    /// chat A, result_prefix save_memory: `recovered`. Made 3 days old, reverted.
    memory: i64,
    /// chat A, hermes web_search: `forwarded`. Made old (2020), observed.
    forwarded: i64,
    /// chat B, two hermes calls (save_memory recovered + web_search forwarded): `recovered`
    /// with a `forwarded` item; its first removed text holds a newline and unicode.
    two_calls: i64,
    /// chat B, a bare result object: `needs_review`.
    review: i64,
    /// chat B, clean: no ledger row.
    clean: i64,
}

async fn seed(app: &TestApp) -> Seeded {
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let chat_a = app.create_chat().await;
    let chat_b = app.create_chat().await;
    let memory = app
        .create_message(
            chat_a,
            Some(agent),
            "assistant",
            Some(&result_prefix_leak(
                "Likes tea",
                "preference",
                &format!("Noted! {PRIVATE}"),
            )),
            &[],
        )
        .await;
    let forwarded = app
        .create_message(
            chat_a,
            Some(agent),
            "assistant",
            Some(&hermes_leak(
                "web_search",
                json!({"query": "weather in Oslo"}),
                &format!("Let me check. {PRIVATE} "),
                "",
            )),
            &[],
        )
        .await;
    let two = format!(
        "<tool_call>\n{}\n</tool_call>\n<tool_call>{}</tool_call>\nDone, {PRIVATE}.",
        json!({"name": "save_memory", "arguments": {"content": "Café ☕ über alles", "memory_type": "fact"}}),
        json!({"name": "web_search", "arguments": {"query": "cafés"}}),
    );
    let two_calls = app
        .create_message(chat_b, Some(agent), "assistant", Some(&two), &[])
        .await;
    let review = app
        .create_message(
            chat_b,
            Some(agent),
            "assistant",
            Some("{success: true, memory_type: \"journal\", content: \"only this\"}"),
            &[],
        )
        .await;
    let clean = app
        .create_message(
            chat_b,
            Some(agent),
            "assistant",
            Some("Sets like {x | x > 0} are infinite."),
            &[],
        )
        .await;
    let expect = [
        (memory, Outcome::Recovered),
        (forwarded, Outcome::Forwarded),
        (two_calls, Outcome::Recovered),
        (review, Outcome::NeedsReview),
        (clean, Outcome::Clean),
    ];
    for (id, outcome) in expect {
        assert_eq!(recover(app, id).await.outcome, outcome, "message {id}");
    }
    for (sql, id) in [
        (
            "UPDATE recoveries SET created_at = now() - interval '3 days', \
             reverted_at = now(), reverted_by = 'admin', \
             revert_summary = '{\"deleted_memory_ids\": [1]}' WHERE message_id = $1",
            memory,
        ),
        (
            "UPDATE recoveries SET created_at = '2020-01-01T00:00:00Z', mode = 'observe' \
             WHERE message_id = $1",
            forwarded,
        ),
    ] {
        sqlx::query(sql)
            .bind(id)
            .execute(&app.pool)
            .await
            .expect("mark row");
    }
    Seeded {
        chat_a,
        chat_b,
        memory,
        forwarded,
        two_calls,
        review,
        clean,
    }
}

async fn listed(app: &TestApp, filter: Filter) -> Vec<i64> {
    ledger::list(&app.pool, &filter, false)
        .await
        .expect("list")
        .iter()
        .map(|e| e.message_id)
        .collect()
}

fn ledger_args(app: &TestApp, extra: &[&str]) -> LedgerArgs {
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: LedgerArgs,
    }
    let mut v = vec![
        "ledger".to_string(),
        format!("--database-url={}", app.db_url),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    P::try_parse_from(v).expect("ledger flags").a
}

/// Runs `toolcall-recovery ledger` in-process; returns how many it listed and what it
/// printed.
async fn run(app: &TestApp, extra: &[&str]) -> (usize, String) {
    let mut out = Vec::new();
    let n = ledger_cmd::run(ledger_args(app, extra), &mut out)
        .await
        .expect("ledger runs");
    (n, String::from_utf8(out).expect("utf-8 output"))
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

async fn removed_texts(app: &TestApp, message: i64) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT i.removed_text FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id \
         WHERE r.message_id = $1 ORDER BY i.leak_index, i.item_index",
    )
    .bind(message)
    .fetch_all(&app.pool)
    .await
    .expect("removed texts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_newest_first_and_every_filter_narrows_exactly() {
    let app = TestApp::prepare().await;
    let s = seed(&app).await;
    let all = vec![s.review, s.two_calls, s.forwarded, s.memory];
    assert_eq!(listed(&app, Filter::default()).await, all, "newest first");
    let cases: Vec<(&str, Filter, Vec<i64>)> = vec![
        (
            "message",
            Filter {
                message_id: Some(s.two_calls),
                ..Filter::default()
            },
            vec![s.two_calls],
        ),
        (
            "clean message",
            Filter {
                message_id: Some(s.clean),
                ..Filter::default()
            },
            vec![],
        ),
        (
            "chat A",
            Filter {
                chat_id: Some(s.chat_a),
                ..Filter::default()
            },
            vec![s.forwarded, s.memory],
        ),
        (
            "chat B",
            Filter {
                chat_id: Some(s.chat_b),
                ..Filter::default()
            },
            vec![s.review, s.two_calls],
        ),
        (
            "family hermes",
            Filter {
                family: Some(Family::Hermes),
                ..Filter::default()
            },
            vec![s.two_calls, s.forwarded],
        ),
        (
            "family result_only",
            Filter {
                family: Some(Family::ResultOnly),
                ..Filter::default()
            },
            vec![s.review],
        ),
        (
            "family mistral",
            Filter {
                family: Some(Family::Mistral),
                ..Filter::default()
            },
            vec![],
        ),
        (
            "outcome recovered",
            Filter {
                outcome: Some(Outcome::Recovered),
                ..Filter::default()
            },
            vec![s.two_calls, s.memory],
        ),
        (
            "outcome forwarded: the row's or an item's",
            Filter {
                outcome: Some(Outcome::Forwarded),
                ..Filter::default()
            },
            vec![s.two_calls, s.forwarded],
        ),
        (
            "outcome needs_review",
            Filter {
                outcome: Some(Outcome::NeedsReview),
                ..Filter::default()
            },
            vec![s.review],
        ),
        (
            "mode observe",
            Filter {
                mode: Some(Mode::Observe),
                ..Filter::default()
            },
            vec![s.forwarded],
        ),
        (
            "mode recover",
            Filter {
                mode: Some(Mode::Recover),
                ..Filter::default()
            },
            vec![s.review, s.two_calls, s.memory],
        ),
        (
            "combined",
            Filter {
                chat_id: Some(s.chat_b),
                family: Some(Family::Hermes),
                outcome: Some(Outcome::Forwarded),
                mode: Some(Mode::Recover),
                ..Filter::default()
            },
            vec![s.two_calls],
        ),
        (
            "limit",
            Filter {
                limit: 2,
                ..Filter::default()
            },
            vec![s.review, s.two_calls],
        ),
    ];
    for (what, filter, want) in cases {
        assert_eq!(listed(&app, filter).await, want, "{what}");
    }

    // --since, absolute and relative, through the flags.
    for (since, want) in [
        ("2021-01-01", vec![s.review, s.two_calls, s.memory]),
        (
            "2019-12-31T23:00:00-02:00",
            vec![s.review, s.two_calls, s.memory],
        ),
        ("2019-12-31T23:00:00Z", all.clone()),
        ("7d", vec![s.review, s.two_calls, s.memory]),
        ("1d", vec![s.review, s.two_calls]),
        ("30m", vec![s.review, s.two_calls]),
    ] {
        let filter = ledger_args(&app, &[&format!("--since={since}")]).filter();
        assert_eq!(listed(&app, filter).await, want, "--since {since}");
    }
    let filter = ledger_args(
        &app,
        &["--outcome=forwarded", "--chat", &s.chat_a.to_string()],
    )
    .filter();
    assert_eq!(listed(&app, filter).await, vec![s.forwarded]);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_carry_the_ledger_fields() {
    let app = TestApp::prepare().await;
    let s = seed(&app).await;
    let entries = ledger::list(&app.pool, &Filter::default(), false)
        .await
        .expect("list");
    let two = entries
        .iter()
        .find(|e| e.message_id == s.two_calls)
        .expect("two calls listed");
    assert_eq!(two.chat_id, s.chat_b);
    assert_eq!(
        (two.source.as_str(), two.mode.as_str()),
        ("backfill", "recover")
    );
    assert_eq!(two.outcome, "recovered");
    assert_eq!(two.families, vec!["hermes".to_string()]);
    assert!(!two.reverted && two.reverted_at.is_none());
    let names: Vec<_> = two.items.iter().map(|i| i.name.as_deref()).collect();
    assert_eq!(names, vec![Some("save_memory"), Some("web_search")]);
    let outcomes: Vec<_> = two.items.iter().map(|i| i.outcome.as_str()).collect();
    assert_eq!(outcomes, vec!["recovered", "forwarded"]);
    assert!(two.items[0].memory_id.is_some() && two.items[0].tool_message_id.is_some());
    assert_eq!(two.items[1].arguments, Some(json!({"query": "cafés"})));
    // Adjacent blocks are one leak: both items share its span and removed text.
    let texts = removed_texts(&app, s.two_calls).await;
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0], texts[1]);
    assert_eq!((two.items[0].leak_index, two.items[1].leak_index), (0, 0));
    assert_eq!((two.items[0].item_index, two.items[1].item_index), (0, 1));
    for item in &two.items {
        assert_eq!(item.removed_bytes, texts[0].len() as i64);
        assert_eq!(
            i64::from(item.span_end - item.span_start),
            item.removed_bytes
        );
    }
    let summary: i64 = sqlx::query_scalar(
        "SELECT (summary->>'bytes_removed')::bigint FROM recoveries WHERE message_id = $1",
    )
    .bind(s.two_calls)
    .fetch_one(&app.pool)
    .await
    .expect("summary");
    assert_eq!(two.bytes_removed, summary, "bytes_removed from the summary");

    // A row whose summary lacks bytes_removed falls back to the sum of the spans.
    sqlx::query("UPDATE recoveries SET summary = summary - 'bytes_removed' WHERE message_id = $1")
        .bind(s.two_calls)
        .execute(&app.pool)
        .await
        .expect("update");
    let again = ledger::list(
        &app.pool,
        &Filter {
            message_id: Some(s.two_calls),
            ..Filter::default()
        },
        false,
    )
    .await
    .expect("list");
    assert_eq!(
        again[0].bytes_removed,
        texts[0].len() as i64,
        "one leak counted once"
    );

    // needs_review leaves the text in place: nothing removed.
    let review = entries
        .iter()
        .find(|e| e.message_id == s.review)
        .expect("review listed");
    assert_eq!(review.bytes_removed, 0);
    assert_eq!(review.items[0].removed_bytes, 0);
    assert!(review.items[0].span_end > 0);

    let memory = entries
        .iter()
        .find(|e| e.message_id == s.memory)
        .expect("memory listed");
    assert!(memory.reverted && memory.reverted_at.is_some());
    assert_eq!(memory.reverted_by.as_deref(), Some("admin"));
    assert_eq!(
        memory.revert_summary,
        Some(json!({"deleted_memory_ids": [1]}))
    );
    assert_eq!(memory.families, vec!["result_prefix".to_string()]);

    // The text listing: markers and the final count.
    let (n, text) = run(&app, &[]).await;
    assert_eq!(n, 4);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].contains(&format!("message {}", s.review)) && lines[0].contains("needs_review")
    );
    assert!(lines[1].contains("recovered  hermes save_memory,web_search  removed "));
    assert!(lines[2].ends_with("[observed]"), "{text}");
    assert!(
        lines[3].contains("  [reverted ") && lines[3].ends_with(" by admin]"),
        "{text}"
    );
    assert_eq!(lines[4], "4 recoveries");
    let (_, text) = run(&app, &["--limit=2"]).await;
    assert!(
        text.ends_with(
            "2 recoveries (the limit; older ones match too: raise --limit or narrow the filters)\n"
        ),
        "{text}"
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_parse_and_carry_the_fields() {
    let app = TestApp::prepare().await;
    let s = seed(&app).await;
    let (n, text) = run(&app, &["--json"]).await;
    assert_eq!(n, 4);
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 4);
    let ids: Vec<i64> = lines
        .iter()
        .map(|l| l["message_id"].as_i64().expect("message_id"))
        .collect();
    assert_eq!(ids, vec![s.review, s.two_calls, s.forwarded, s.memory]);
    let recovery_ids: Vec<i64> = lines
        .iter()
        .map(|l| l["recovery_id"].as_i64().expect("recovery_id"))
        .collect();
    assert!(recovery_ids.windows(2).all(|w| w[0] > w[1]));
    for l in &lines {
        for key in [
            "recovery_id",
            "created_at",
            "message_id",
            "chat_id",
            "agent_id",
            "source",
            "event_id",
            "mode",
            "outcome",
            "families",
            "bytes_removed",
            "reverted",
            "reverted_at",
            "reverted_by",
            "revert_summary",
            "items",
        ] {
            assert!(l.get(key).is_some(), "{key} in {l}");
        }
        let at = l["created_at"].as_str().expect("created_at");
        assert!(
            chrono::DateTime::parse_from_rfc3339(at).is_ok(),
            "RFC 3339: {at}"
        );
    }
    let forwarded = &lines[2];
    assert_eq!(forwarded["mode"], json!("observe"));
    assert_eq!(forwarded["outcome"], json!("forwarded"));
    assert_eq!(forwarded["families"], json!(["hermes"]));
    assert_eq!(forwarded["items"][0]["name"], json!("web_search"));
    assert_eq!(
        forwarded["items"][0]["arguments"],
        json!({"query": "weather in Oslo"})
    );
    assert_eq!(lines[3]["reverted"], json!(true));
    assert_eq!(lines[3]["reverted_by"], json!("admin"));
    assert_eq!(lines[0]["items"][0]["outcome"], json!("needs_review"));
    assert!(lines[0]["items"][0]["result_object"].is_object());
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_only_with_show_text_and_then_verbatim() {
    let app = TestApp::prepare().await;
    let s = seed(&app).await;
    let texts = removed_texts(&app, s.two_calls).await;
    assert!(
        texts[0].contains('\n') && texts[0].contains("Café ☕ über alles"),
        "{texts:?}"
    );

    for flags in [&["--json"][..], &[][..]] {
        let (_, out) = run(&app, flags).await;
        assert!(
            !out.contains(PRIVATE),
            "content leaked with {flags:?}: {out}"
        );
        assert!(!out.contains("<tool_call>"), "removed text with {flags:?}");
        assert!(!out.contains("content_before") && !out.contains("removed_text"));
    }
    let plain = ledger::message_ledger(&app.pool, s.two_calls, false)
        .await
        .expect("ledger");
    let plain_text = plain.to_string();
    assert!(!plain_text.contains(PRIVATE) && !plain_text.contains("removed_text"));

    // JSON with --show-text: the content and each removed text exactly as stored.
    let (_, out) = run(
        &app,
        &[
            "--json",
            "--show-text",
            "--message",
            &s.two_calls.to_string(),
        ],
    )
    .await;
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1);
    let before = lines[0]["content_before"].as_str().expect("content_before");
    assert!(before.contains(PRIVATE) && before.contains("Café ☕"));
    assert!(lines[0]["content_after"]
        .as_str()
        .expect("content_after")
        .contains(PRIVATE));
    let got: Vec<&str> = lines[0]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["removed_text"].as_str().expect("removed_text"))
        .collect();
    assert_eq!(got, texts.iter().map(String::as_str).collect::<Vec<_>>());

    // Text with --show-text: every line of the removed text, verbatim, after the marker.
    let (_, out) = run(
        &app,
        &["--show-text", "--message", &s.two_calls.to_string()],
    )
    .await;
    let quoted: String = texts[0]
        .split('\n')
        .map(|l| format!("    | {l}\n"))
        .collect();
    assert_eq!(out.matches(&quoted).count(), 1, "once per leak: {out}");
    assert!(out.contains("  - item 1: hermes save_memory  recovered"));
    assert!(out.contains("  - item 2: hermes web_search  forwarded"));

    let shown = ledger::message_ledger(&app.pool, s.two_calls, true)
        .await
        .expect("ledger");
    assert_eq!(
        shown["recoveries"][0]["items"][0]["removed_text"],
        json!(texts[0])
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ledger_lists_one_message_newest_first() {
    let app = TestApp::prepare().await;
    let s = seed(&app).await;
    let none = ledger::message_ledger(&app.pool, s.clean, false)
        .await
        .expect("ledger");
    assert_eq!(none, json!({"message_id": s.clean, "recoveries": []}));
    let unknown = ledger::message_ledger(&app.pool, i64::MAX, false)
        .await
        .expect("ledger");
    assert_eq!(unknown["recoveries"], json!([]));

    // The leak is back (the app rewrote the content): a second real pass, a newer row.
    let first: i64 = sqlx::query_scalar("SELECT id FROM recoveries WHERE message_id = $1")
        .bind(s.forwarded)
        .fetch_one(&app.pool)
        .await
        .expect("row");
    sqlx::query(
        "UPDATE messages m SET content = r.content_before FROM recoveries r \
         WHERE r.id = $1 AND m.id = r.message_id",
    )
    .bind(first)
    .execute(&app.pool)
    .await
    .expect("leak back");
    let again = recover(&app, s.forwarded).await;
    assert_eq!(again.outcome, Outcome::Forwarded);
    let second = again.recovery_id.expect("a second row");
    let ledger = ledger::message_ledger(&app.pool, s.forwarded, false)
        .await
        .expect("ledger");
    assert_eq!(ledger["message_id"], json!(s.forwarded));
    let ids: Vec<i64> = ledger["recoveries"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| r["recovery_id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids, vec![second, first]);
    let modes: Vec<&Value> = ledger["recoveries"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| &r["mode"])
        .collect();
    assert_eq!(modes, vec![&json!("recover"), &json!("observe")]);
    for r in ledger["recoveries"].as_array().expect("list") {
        assert_eq!(r["items"][0]["name"], json!("web_search"));
    }
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_lists_one_message_as_json() {
    let app = TestApp::prepare().await;
    let s = seed(&app).await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "ledger".to_string(),
            format!("--database-url={}", app.db_url),
            "--json".into(),
            "--message".into(),
            s.two_calls.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 1, "{stdout}");
    assert_eq!(lines[0]["message_id"], json!(s.two_calls));
    assert_eq!(lines[0]["items"][1]["outcome"], json!("forwarded"));
    assert!(!stdout.contains(PRIVATE));
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_refuses_a_missing_database_without_creating_it() {
    let name = format!(
        "tcr_test_missing_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "ledger".to_string(),
            format!("--database-url={PG_BASE}/{name}"),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("binary runs");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("toolcall-recovery ledger: ") && stderr.contains("does not exist"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    let admin = sqlx::PgPool::connect(&format!("{PG_BASE}/postgres"))
        .await
        .expect("admin");
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&admin)
            .await
            .expect("query");
    assert!(!exists, "the ledger command created a database");
    admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmigrated_database_is_refused() {
    let app = TestApp::prepare().await;
    sqlx::query(
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)",
    )
    .execute(&app.pool)
    .await
    .expect("unapply");
    let err = ledger_cmd::run(ledger_args(&app, &[]), &mut Vec::new())
        .await
        .expect_err("pending migrations refused");
    assert!(err.to_string().contains("pending migration"), "{err}");
    app.cleanup().await;
}

/// `n` ledger rows of message `message`, straight into the table (what a busy worker leaves).
async fn insert_rows(app: &TestApp, message: i64, n: i64) {
    sqlx::query(
        "INSERT INTO recoveries (message_id, chat_id, source, outcome, tools_used_before, \
           tools_used_after, summary) \
         SELECT $1, 1, 'backfill', 'recovered', '[]', '[]', '{}' FROM generate_series(1, $2)",
    )
    .bind(message)
    .bind(n)
    .execute(&app.pool)
    .await
    .expect("rows");
}

/// `toolcall-recovery ledger <args>`: (exit code, stdout, stderr).
async fn ledger_binary(app: &TestApp, args: &[&str]) -> (Option<i32>, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .arg("ledger")
        .arg(format!("--database-url={}", app.db_url))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("binary runs");
    (
        output.status.code(),
        String::from_utf8(output.stdout).expect("utf-8"),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Issue 32, item 1: a listing the limit cut says so on stderr, in `--json` mode too (a
/// script piping the rows on must not take them for all); one the limit did not cut,
/// exactly at the limit, says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_cut_by_the_limit_says_so_on_stderr() {
    let app = TestApp::prepare().await;
    insert_rows(&app, 7, i64::from(ledger::DEFAULT_LIMIT)).await;
    for json in [true, false] {
        let args: &[&str] = if json { &["--json"] } else { &[] };
        let (code, stdout, stderr) = ledger_binary(&app, args).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(!stderr.contains("showing"), "exactly the limit: {stderr}");
        if json {
            assert_eq!(json_lines(&stdout).len(), 50);
        } else {
            assert!(stdout.ends_with("\n50 recoveries\n"), "{stdout}");
        }
    }
    insert_rows(&app, 7, 1).await;
    for json in [true, false] {
        let args: &[&str] = if json { &["--json"] } else { &[] };
        let (code, stdout, stderr) = ledger_binary(&app, args).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stderr.contains("showing 50 of at least 51 matching rows; pass --limit N"),
            "json {json}: {stderr}"
        );
        if json {
            assert_eq!(json_lines(&stdout).len(), 50, "{stdout}");
        }
    }
    // A limit of its own, in process: the note goes where it is told.
    let (mut out, mut note) = (Vec::new(), Vec::new());
    let n = ledger_cmd::run_with(
        ledger_args(&app, &["--json", "--limit=20"]),
        &mut out,
        &mut note,
    )
    .await
    .expect("ledger runs");
    assert_eq!(n, 20);
    assert_eq!(
        String::from_utf8(note).expect("utf-8"),
        format!("{}\n", ledger_cmd::cut_note(20))
    );
    // `--until`: before that time only.
    let (_, stdout, _) = ledger_binary(&app, &["--json", "--until=2000-01-01"]).await;
    assert_eq!(stdout, "");
    app.cleanup().await;
}
