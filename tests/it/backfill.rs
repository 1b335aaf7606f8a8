//! The backfill (`toolcall-recovery backfill`) on a seeded history holding every row of
//! the recovery table: the dry run writes nothing and counts right, a real run fixes
//! exactly those messages and republishes them, a second run is a no-op, an interrupted
//! run resumes from its checkpoint, the rate limit holds, transcripts are repaired.
//! Runs in-process through `backfill::run_with`; no worker is started.

use crate::harness::*;
use clap::Parser;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use toolcall_recovery::backfill::{self, BackfillArgs, Summary};
use toolcall_recovery::shutdown;

/// The seeded history: the candidates in id order with the outcome each must get.
pub struct Seeded {
    pub candidates: Vec<(i64, &'static str)>,
    pub recovered: i64,
    pub no_agent: i64,
    pub long_memory: String,
}

impl Seeded {
    pub fn id(&self, outcome: &str) -> i64 {
        self.candidates
            .iter()
            .find(|(_, o)| *o == outcome)
            .map(|(id, _)| *id)
            .expect("seeded outcome")
    }
}

/// Every situation of contract §3, plus rows the walk must not examine.
pub async fn seed(app: &TestApp) -> Seeded {
    let chat = app.create_chat().await;
    let memory_agent = app.create_agent(&["save_memory", "web_search"]).await;
    let no_memory_agent = app.create_agent(&["web_search"]).await;
    let long_memory = "Loves long walks in the Alps with the dog. ".repeat(6);
    let long_memory = long_memory.trim().to_string();
    let rows: Vec<(Option<i64>, String, &[&str], &'static str)> = vec![
        (
            Some(memory_agent),
            "Sets like {x | x > 0} are infinite.".into(),
            &[],
            "clean",
        ),
        (
            Some(memory_agent),
            result_prefix_leak(&long_memory, "preference", "Noted!"),
            &[],
            "recovered",
        ),
        (
            Some(memory_agent),
            result_prefix_leak("Already saved", "fact", "Done."),
            &["save_memory"],
            "stripped_only",
        ),
        (
            None,
            result_prefix_leak("orphan", "fact", "Reply."),
            &[],
            "no_agent",
        ),
        (
            Some(no_memory_agent),
            hermes_leak(
                "save_memory",
                json!({"content": "x", "memory_type": "fact"}),
                "",
                "Sure.",
            ),
            &[],
            "tool_not_enabled",
        ),
        (
            Some(memory_agent),
            hermes_leak(
                "save_memory",
                json!({"content": "x", "memory_type": "bogus"}),
                "",
                "Okay.",
            ),
            &[],
            "invalid_args",
        ),
        (
            Some(memory_agent),
            hermes_leak(
                "web_search",
                json!({"query": "weather in Oslo"}),
                "Let me check. ",
                "",
            ),
            &[],
            "forwarded",
        ),
        (
            Some(memory_agent),
            "{success: true, memory_type: \"journal\", content: \"only this\"}".into(),
            &[],
            "needs_review",
        ),
    ];
    let mut candidates = Vec::new();
    for (agent, content, tools_used, outcome) in rows {
        let id = app
            .create_message(chat, agent, "assistant", Some(&content), tools_used)
            .await;
        candidates.push((id, outcome));
        // Rows the SQL prefilter or the role filter must skip, interleaved.
        app.create_message(
            chat,
            Some(memory_agent),
            "assistant",
            Some("Plain prose."),
            &[],
        )
        .await;
        app.create_message(
            chat,
            None,
            "user",
            Some(&result_prefix_leak("u", "fact", "x")),
            &[],
        )
        .await;
    }
    Seeded {
        recovered: candidates[1].0,
        no_agent: candidates[3].0,
        candidates,
        long_memory,
    }
}

/// Backfill flags for this test's database and exchanges, then `extra`.
pub fn args(app: &TestApp, extra: &[&str]) -> BackfillArgs {
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: BackfillArgs,
    }
    let p = &app.settings.publish;
    let mut v: Vec<String> = vec![
        "backfill".into(),
        format!("--database-url={}", app.db_url),
        format!("--amqp-url={AMQP_URL}"),
        format!("--moderation-exchange={}", p.moderation_exchange),
        format!("--tool-calls-exchange={}", p.tool_calls_exchange),
        "--memory-types=journal,core,fact,preference,goal,relationship".into(),
    ];
    // Small pages (several per run), two at once, no rate limit, unless `extra` says.
    for default in ["--batch-size=3", "--concurrency=2", "--rate=0"] {
        let flag = default.split('=').next().unwrap_or(default);
        if !extra.iter().any(|e| e.starts_with(flag)) {
            v.push(default.into());
        }
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    P::parse_from(v).a
}

/// Runs a backfill to its end; returns the summary and what it printed.
pub async fn run(app: &TestApp, extra: &[&str]) -> (Summary, String) {
    let (_trigger, stop) = shutdown::channel();
    let mut out = Vec::new();
    let summary = backfill::run_with(args(app, extra), stop, &mut out)
        .await
        .expect("backfill runs");
    (summary, String::from_utf8(out).expect("utf-8 output"))
}

/// Everything a run could change, in one comparable value.
pub async fn fingerprint(app: &TestApp) -> (String, i64, i64, i64, i64) {
    let messages: String = sqlx::query_scalar(
        "SELECT coalesce(md5(string_agg(id || ':' || coalesce(content, '~') || tools_used::text \
         || coalesce(tool_name, '~'), ',' ORDER BY id)), '') FROM messages",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    (
        messages,
        app.count("SELECT count(*) FROM agent_memories").await,
        app.count("SELECT count(*) FROM recoveries").await,
        app.count("SELECT count(*) FROM recovery_items").await,
        app.count("SELECT count(*) FROM backfill_checkpoints").await,
    )
}

fn assert_every_outcome_once(s: &Summary) {
    for outcome in [
        "clean",
        "recovered",
        "stripped_only",
        "no_agent",
        "tool_not_enabled",
        "invalid_args",
        "forwarded",
        "needs_review",
    ] {
        assert_eq!(s.count(outcome), 1, "{outcome} in {:?}", s.by_outcome);
    }
    assert_eq!(s.examined, 8, "{:?}", s.by_outcome);
}

async fn checkpoint(app: &TestApp) -> Option<i64> {
    sqlx::query_scalar("SELECT last_message_id FROM backfill_checkpoints WHERE name = 'default'")
        .fetch_optional(&app.pool)
        .await
        .unwrap()
}

async fn drain(app: &TestApp, queue: &str) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some((body, _)) = app.get_one(queue, Duration::from_millis(300)).await {
        out.push(body);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_writes_nothing_and_reports_every_outcome() {
    let app = TestApp::prepare().await;
    let seeded = seed(&app).await;
    let before = fingerprint(&app).await;

    let (summary, out) = run(&app, &["--dry-run", "--json"]).await;
    assert!(summary.dry_run && summary.finished);
    assert_every_outcome_once(&summary);
    assert_eq!(summary.changed, 5);
    assert_eq!(summary.memories_created, 1);
    assert_eq!(fingerprint(&app).await, before, "a dry run writes nothing");
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // One JSON line per message that is not clean, then the summary.
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8, "{out}");
    assert_eq!(lines[7]["summary"]["by_outcome"]["recovered"], json!(1));
    let recovered = &lines[0];
    assert_eq!(recovered["message_id"], json!(seeded.recovered));
    assert_eq!(recovered["outcome"], json!("recovered"));
    assert_eq!(recovered["calls"][0]["family"], json!("result_prefix"));
    assert_eq!(recovered["calls"][0]["tool"], json!("save_memory"));
    let preview = recovered["memory_preview"].as_str().unwrap();
    assert_eq!(preview.chars().count(), 100);
    assert!(seeded
        .long_memory
        .starts_with(preview.trim_end_matches('…')));
    assert_eq!(lines[2]["outcome"], json!("no_agent"));
    assert_eq!(lines[2]["agent_id"], json!(null));
    assert_eq!(lines[2]["calls"][0]["family"], json!("result_prefix"));

    // Bounds: only the ids asked for; the text output names them.
    let (bounded, text) = run(
        &app,
        &[
            "--dry-run",
            &format!("--since-id={}", seeded.recovered),
            &format!("--until-id={}", seeded.no_agent),
        ],
    )
    .await;
    assert_eq!(bounded.examined, 3);
    assert!(
        text.contains(&format!("message {:>10}", seeded.recovered)),
        "{text}"
    );
    assert!(text.contains("memory=\"Loves long walks"), "{text}");
    assert!(text.contains("no_agent"), "{text}");
    assert_eq!(fingerprint(&app).await, before);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_run_fixes_exactly_the_leaks_and_a_second_run_is_a_no_op() {
    let app = TestApp::prepare().await;
    let seeded = seed(&app).await;

    let (summary, _) = run(&app, &[]).await;
    assert!(summary.finished && !summary.dry_run);
    assert_every_outcome_once(&summary);
    assert_eq!(summary.changed, 5);
    assert_eq!(
        (summary.moderation_published, summary.tool_calls_published),
        (5, 1)
    );
    let last = seeded.candidates.last().unwrap().0;
    assert_eq!(checkpoint(&app).await, Some(last));

    // Exactly the leaks were fixed.
    let (content, tools_used) = app.message(seeded.recovered).await;
    assert_eq!(content.as_deref(), Some("Noted!"));
    assert_eq!(tools_used, json!(["save_memory (recovered)"]));
    let memory: String = sqlx::query_scalar("SELECT content FROM agent_memories")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(memory, seeded.long_memory);
    assert_eq!(
        app.message(seeded.id("stripped_only")).await.0.as_deref(),
        Some("Done.")
    );
    assert_eq!(
        app.message(seeded.id("tool_not_enabled"))
            .await
            .0
            .as_deref(),
        Some("Sure.")
    );
    assert_eq!(
        app.message(seeded.id("forwarded")).await.0.as_deref(),
        Some("Let me check.")
    );
    let untouched = app.message(seeded.no_agent).await.0.unwrap();
    assert!(untouched.starts_with("{success"), "no_agent left alone");
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE source = 'backfill'")
            .await,
        6
    );
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 6);
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'user' AND content LIKE '{success%'")
            .await,
        8,
        "user messages are never examined"
    );

    // Republished: the cleaned messages for moderation, the forwarded call for the app;
    // what the passes owed is marked sent by the time the run returns (nothing left for a
    // relay to send twice).
    assert_eq!(app.count("SELECT count(*) FROM outbox").await, 6);
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
            .await,
        0
    );
    let moderation = drain(&app, &app.moderation_queue).await;
    assert_eq!(moderation.len(), 5);
    let m = moderation
        .iter()
        .find(|b| b["message"]["id"] == json!(seeded.recovered))
        .expect("recovered message republished");
    assert_eq!(m["message"]["content"], json!("Noted!"));
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));
    assert_eq!(m["origin"], json!("backfill"));
    let calls = drain(&app, &app.tool_calls_queue).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], json!("web_search"));

    // Again: the checkpoint says everything is done.
    let after_first = fingerprint(&app).await;
    let (again, _) = run(&app, &[]).await;
    assert_eq!((again.examined, again.changed), (0, 0));
    assert!(again.finished);

    // Again from the start: recovery is idempotent, nothing changes, nothing is published.
    // Cleaned messages no longer pass the SQL prefilter; what is left is the clean one, the
    // one without agent and the one kept for review.
    let (restart, _) = run(&app, &["--restart"]).await;
    assert_eq!(restart.examined, 3, "{:?}", restart.by_outcome);
    assert_eq!(restart.changed, 0, "{:?}", restart.by_outcome);
    assert_eq!(restart.count("clean"), 1);
    assert_eq!(restart.count("no_agent"), 1);
    assert_eq!(
        restart.count("already_recovered"),
        1,
        "needs_review is recorded once"
    );
    assert_eq!(fingerprint(&app).await, after_first);
    assert!(drain(&app, &app.moderation_queue).await.is_empty());
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_run_resumes_from_its_checkpoint() {
    let app = TestApp::prepare().await;
    let seeded = seed(&app).await;

    // Stopped by --limit after 3 messages: the checkpoint is the third.
    let (first, _) = run(&app, &["--limit=3", "--no-publish"]).await;
    assert_eq!(first.examined, 3);
    assert!(first.limit_reached && !first.finished);
    assert_eq!(checkpoint(&app).await, Some(seeded.candidates[2].0));

    // Cancelled while running (4 messages/s), once the 5th message (tool_not_enabled) is
    // done: it stops between messages and lets those in flight finish.
    let (trigger, stop) = shutdown::channel();
    let pool = app.pool.clone();
    let cancel = tokio::spawn(async move {
        wait_for(
            "tool_not_enabled recovered",
            Duration::from_secs(20),
            || async {
                sqlx::query_scalar::<_, i64>("SELECT count(*) FROM recoveries")
                    .fetch_one(&pool)
                    .await
                    .unwrap()
                    >= 3
            },
        )
        .await;
        trigger.fire();
    });
    let mut out = Vec::new();
    let second = backfill::run_with(args(&app, &["--rate=4", "--no-publish"]), stop, &mut out)
        .await
        .expect("cancelled run ends cleanly");
    cancel.await.unwrap();
    assert!(second.interrupted, "{second:?}");
    assert!(second.examined >= 2 && second.examined < 5, "{second:?}");
    let done = 3 + second.examined as usize;
    assert_eq!(checkpoint(&app).await, Some(seeded.candidates[done - 1].0));

    // The rest, and nothing twice.
    let (third, _) = run(&app, &["--no-publish"]).await;
    assert!(third.finished);
    assert_eq!(first.examined + second.examined + third.examined, 8);
    let mut total = first.by_outcome.clone();
    for s in [&second, &third] {
        for (k, v) in &s.by_outcome {
            *total.entry(k.clone()).or_default() += v;
        }
    }
    assert!(total.values().all(|&n| n == 1), "{total:?}");
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 6);
    assert_eq!(
        app.queue_len(&app.moderation_queue).await,
        0,
        "--no-publish"
    );

    // A bounded run keeps a checkpoint of its own: the full walk's does not move back.
    let first_id = seeded.candidates[0].0;
    let bounds = [
        format!("--since-id={first_id}"),
        format!("--until-id={first_id}"),
        "--no-publish".to_string(),
    ];
    let bounds: Vec<&str> = bounds.iter().map(String::as_str).collect();
    let (bounded, _) = run(&app, &bounds).await;
    assert_eq!(bounded.examined, 1);
    let names: Vec<(String, i64)> =
        sqlx::query_as("SELECT name, last_message_id FROM backfill_checkpoints ORDER BY name")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let last = seeded.candidates.last().unwrap().0;
    assert_eq!(
        names,
        vec![
            ("default".to_string(), last),
            (format!("ids-{first_id}-{first_id}"), first_id)
        ]
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_holds_on_recoveries_not_on_rows_examined() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    for i in 0..100 {
        // Candidates of the SQL prefilter that hold no leak: examined, never recovered.
        app.create_message(
            chat,
            None,
            "assistant",
            Some(&format!("Item [{i}] of {{x}}.")),
            &[],
        )
        .await;
        if i % 10 == 0 {
            app.create_message(
                chat,
                Some(agent),
                "assistant",
                Some(&result_prefix_leak(&format!("fact {i}"), "fact", "Noted.")),
                &[],
            )
            .await;
        }
    }
    let (summary, _) = run(&app, &["--rate=20", "--batch-size=16", "--concurrency=4"]).await;
    assert_eq!(summary.examined, 110);
    // Ten recoveries at 20 per second: on the ledger's own clock (transaction start), the
    // last started about 9 / 20 s after the first; a slot's transaction may begin a little
    // late, so the span is allowed one slot less. Unpaced, the ten take a few milliseconds.
    let span: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM max(created_at) - min(created_at))::float8 FROM recoveries",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 10);
    assert!(span >= 0.40, "ten recoveries within {span} s");

    // Rows that need no recovery are not paced: 100 clean candidates at one recovery per
    // two seconds would take 200 s if rows examined were what the rate bounds.
    let started = Instant::now();
    let (summary, _) = run(
        &app,
        &["--rate=0.5", "--restart", "--dry-run", "--until-id=100"],
    )
    .await;
    assert!(summary.examined >= 90, "{}", summary.examined);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "clean rows were paced"
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_are_repaired_across_history() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    sqlx::query(
        "INSERT INTO messages (chat_id, role, content, tool_calls) VALUES ($1, 'assistant', '', $2)",
    )
    .bind(chat)
    .bind(sqlx::types::Json(json!([{"id": "call_1", "name": "lookup", "arguments": {}}])))
    .execute(&app.pool)
    .await
    .unwrap();
    let mut tool = Vec::new();
    for (call_id, name) in [
        ("call_1", Some("")),
        ("call_9", None),
        ("call_1", Some("lookup")),
    ] {
        tool.push(
            sqlx::query_scalar::<_, i64>(
                "INSERT INTO messages (chat_id, role, content, tool_call_id, tool_name) \
                 VALUES ($1, 'tool', 'r', $2, $3) RETURNING id",
            )
            .bind(chat)
            .bind(call_id)
            .bind(name)
            .fetch_one(&app.pool)
            .await
            .unwrap(),
        );
    }
    let names = || async {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT tool_name FROM messages WHERE role = 'tool' ORDER BY id",
        )
        .fetch_all(&app.pool)
        .await
        .unwrap()
    };
    let before = names().await;

    let (dry, _) = run(&app, &["--dry-run", "--repair-transcripts"]).await;
    let repaired = dry.transcripts.expect("transcripts reported");
    assert_eq!((repaired.chats, repaired.tool_messages), (1, 2));
    assert_eq!(names().await, before, "dry run repairs nothing");

    let (real, text) = run(&app, &["--repair-transcripts"]).await;
    assert_eq!(real.transcripts.map(|r| r.tool_messages), Some(2));
    assert!(text.contains("transcripts repaired: 2"), "{text}");
    assert_eq!(
        names().await,
        vec![
            Some("lookup".into()),
            Some("unknown".into()),
            Some("lookup".into())
        ]
    );
    let _ = tool;
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_a_dry_backfill() {
    let app = TestApp::prepare().await;
    seed(&app).await;
    let before = fingerprint(&app).await;
    let p = &app.settings.publish;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "backfill".to_string(),
            format!("--database-url={}", app.db_url),
            format!("--moderation-exchange={}", p.moderation_exchange),
            format!("--tool-calls-exchange={}", p.tool_calls_exchange),
            "--dry-run".into(),
            "--json".into(),
            "--rate=0".into(),
        ])
        .env_remove("TCR_MEMORY_TYPES")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["summary"]["examined"], json!(8), "{stdout}");
    assert_eq!(last["summary"]["by_outcome"]["recovered"], json!(1));
    assert_eq!(fingerprint(&app).await, before);
    app.cleanup().await;
}

/// `n` leaked save_memory results in one chat, after `first`: their ids in order.
async fn leaks_after(app: &TestApp, chat: i64, agent: i64, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let content = result_prefix_leak(&format!("later {i}"), "fact", "Ok.");
        ids.push(
            app.create_message(chat, Some(agent), "assistant", Some(&content), &[])
                .await,
        );
    }
    ids
}

/// Recoveries committed for these messages.
async fn recovered_among(app: &TestApp, ids: &[i64]) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM recoveries WHERE message_id = ANY($1)")
        .bind(ids)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_recovery_holds_the_checkpoint_but_not_the_walk() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let mut clean = Vec::new();
    for i in 0..2 {
        let content = format!("See [step {i}](https://example.com/{i}).");
        clean.push(
            app.create_message(chat, Some(agent), "assistant", Some(&content), &[])
                .await,
        );
    }
    let waiting = leaks_after(&app, chat, agent, 1).await[0];
    let later = leaks_after(&app, chat, agent, 6).await;
    let lock = app.lock_row(waiting).await;

    // One page and one checkpoint save per candidate; two recoveries at once, so one waits
    // for the lock while the other goes on.
    let args = args(&app, &["--batch-size=1", "--no-publish", "--json"]);
    let (_trigger, stop) = shutdown::channel();
    let running = tokio::spawn(async move {
        let mut out = Vec::new();
        let summary = backfill::run_with(args, stop, &mut out).await;
        (summary, String::from_utf8(out).expect("utf-8 output"))
    });

    // The messages after the waiting one are recovered; the checkpoint reaches the one
    // before it and stays there.
    wait_for("the later leaks recovered", Duration::from_secs(30), || {
        let (app, later) = (&app, &later);
        async move { recovered_among(app, later).await == later.len() as i64 }
    })
    .await;
    wait_for(
        "the checkpoint at the last message before the waiting one",
        Duration::from_secs(30),
        || async { checkpoint(&app).await == Some(clean[1]) },
    )
    .await;
    assert_eq!(recovered_among(&app, &[waiting]).await, 0);
    assert_eq!(
        checkpoint(&app).await,
        Some(clean[1]),
        "never past the waiting one"
    );

    lock.rollback().await.unwrap();
    let (summary, out) = running.await.unwrap();
    let summary = summary.expect("backfill runs");
    assert!(summary.finished, "{summary:?}");
    assert_eq!(summary.examined, 9);
    assert_eq!(summary.count("recovered"), 7, "{:?}", summary.by_outcome);
    assert_eq!(checkpoint(&app).await, later.last().copied());
    assert_eq!(recovered_among(&app, &[waiting]).await, 1);

    // The lines come out in id order, though the waiting one finished last.
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<i64> = lines
        .iter()
        .filter_map(|l| l["message_id"].as_i64())
        .collect();
    let expected: Vec<i64> = std::iter::once(waiting).chain(later).collect();
    assert_eq!(ids, expected, "{out}");
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_a_recovery_waits_resumes_without_repeats_or_gaps() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let all = leaks_after(&app, chat, agent, 21).await;
    let (waiting, later) = (all[0], &all[1..]);
    let lock = app.lock_row(waiting).await;

    // Ten candidates a second: the run is stopped long before it has started them all.
    let (trigger, stop) = shutdown::channel();
    let args = args(&app, &["--rate=10", "--batch-size=2", "--no-publish"]);
    let running = tokio::spawn(async move {
        let mut out = Vec::new();
        backfill::run_with(args, stop, &mut out).await
    });
    wait_for(
        "three later leaks recovered",
        Duration::from_secs(30),
        || async { recovered_among(&app, later).await >= 3 },
    )
    .await;
    trigger.fire();
    // Stopped, with the first recovery still waiting: nothing is covered yet.
    assert_eq!(checkpoint(&app).await, None);

    lock.rollback().await.unwrap();
    let first = running.await.unwrap().expect("stopped run ends cleanly");
    assert!(first.interrupted && !first.finished, "{first:?}");
    let examined = usize::try_from(first.examined).unwrap();
    assert!((4..all.len()).contains(&examined), "{first:?}");
    // What was started is done, and exactly that is covered.
    assert_eq!(checkpoint(&app).await, Some(all[examined - 1]));
    assert_eq!(
        recovered_among(&app, &all[..examined]).await,
        examined as i64
    );
    assert_eq!(recovered_among(&app, &all[examined..]).await, 0);

    let (second, _) = run(&app, &["--no-publish"]).await;
    assert!(second.finished);
    assert_eq!(first.examined + second.examined, all.len() as u64);
    assert_eq!(recovered_among(&app, &all).await, all.len() as i64);
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        all.len() as i64
    );
    app.cleanup().await;
}

/// Leaks queued for one committer are recovered together (group commit) and each exactly
/// once. Rows of one transaction share its `now()`, so the ledger's `created_at` tells how
/// many transactions the recoveries took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_run_commits_queued_leaks_together_and_each_once() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let ids = leaks_after(&app, chat, agent, 40).await;
    let (summary, _) = run(
        &app,
        &[
            "--concurrency=1",
            "--recoveries-per-commit=16",
            "--batch-size=100",
            "--no-publish",
        ],
    )
    .await;

    assert_eq!(summary.by_outcome.get("recovered"), Some(&40));
    assert_eq!(recovered_among(&app, &ids).await, 40);
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 40);
    let transactions = app
        .count("SELECT count(DISTINCT created_at) FROM recoveries")
        .await;
    assert!(
        transactions < 40,
        "40 recoveries in {transactions} transactions: none was shared"
    );
    // ... and a second run finds nothing left to do.
    let (again, _) = run(&app, &["--no-publish", "--restart"]).await;
    assert_eq!(again.by_outcome.get("recovered"), None);
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 40);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observe_run_creates_no_memory_and_its_summary_says_so() {
    let app = TestApp::prepare().await;
    seed(&app).await;
    let (summary, text) = run(&app, &["--mode=observe", "--no-publish"]).await;
    assert_eq!(summary.count("recovered"), 1, "{summary:?}");
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    assert_eq!(summary.memories_created, 0, "{text}");
    assert_eq!(summary.memories_observed, 1, "{text}");
    assert!(text.contains("  memories created: 0\n"), "{text}");
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_moves_with_time_at_a_low_rate() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    // Twelve recoveries at one every two seconds: more than 20 s, far fewer rows than a
    // batch, so progress shown only by batch would show nothing before the end.
    let ids = leaks_after(&app, chat, agent, 12).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args([
            "backfill".to_string(),
            format!("--database-url={}", app.db_url),
            "--no-publish".into(),
            "--rate=0.5".into(),
            "--batch-size=500".into(),
            "--metrics-addr=127.0.0.1:0".into(),
        ])
        .env("RUST_LOG", "info")
        .env_remove("TCR_MEMORY_TYPES")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = next_json(&mut lines).await;
        if let Some(addr) = line["addr"].as_str() {
            break addr.parse::<std::net::SocketAddr>().unwrap();
        }
    };
    let gauge = "toolcall_recovery_backfill_progress";
    let shown = &std::sync::Mutex::new(0.0);
    wait_for(
        "the progress gauge moves",
        Duration::from_secs(60),
        || async move {
            let value = http_get(addr, "/metrics")
                .await
                .map_or(0.0, |(_, text)| metric_value(&text, gauge));
            *shown.lock().unwrap() = value;
            value > 0.0
        },
    )
    .await;
    let shown = *shown.lock().unwrap();
    assert!(
        shown < *ids.last().unwrap() as f64,
        "shown before the end of the run: {shown}"
    );
    // The log line that says how far it got comes too, while the run goes on.
    loop {
        let line = next_json(&mut lines).await;
        if line["message"] == "backfill progress" {
            assert!(line["last_id"].as_i64().unwrap() >= ids[0], "{line}");
            break;
        }
    }
    assert!(child.try_wait().unwrap().is_none(), "still running");
    crate::process::signal(&child, "-TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("stops")
        .unwrap();
    assert!(status.success(), "{status:?}");
    app.cleanup().await;
}

/// The next line a binary logs (JSON: its stderr is not a terminal).
async fn next_json<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    let line = line
        .expect("a log line")
        .expect("stderr")
        .expect("not closed");
    serde_json::from_str(&line).expect("JSON: stderr is not a terminal")
}
