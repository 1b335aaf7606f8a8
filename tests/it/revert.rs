//! Revert (issue #8), checked against the words rather than the implementation:
//! `toolcall-recovery revert` / `POST /v1/messages/{id}/revert` put a message back exactly
//! as it was before recovery (content and `tools_used`, byte for byte), delete what the
//! recovery created (its memories, its `role='tool'` messages) and nothing else, keep a
//! memory the app edited since, mark the ledger rows (never delete them), republish the
//! restored message for moderation; a second revert is a no-op; a message changed since
//! recovery is refused; a reverted message is never recovered again automatically.
//!
//! The identity property: for every outcome of contract §3 that writes something, and for
//! a deterministic sample of generated messages, recover then revert leaves every row of
//! `messages` (every column but `updated_at`) and of `agent_memories` as it was.

use crate::admin::{request, serve};
use crate::harness::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use toolcall_recovery::error::{Error, Poison};
use toolcall_recovery::ids::{EventId, MessageId};
use toolcall_recovery::recover::revert::{revert_message, RevertOutcome, RevertReport, RowFate};
use toolcall_recovery::recover::{self, Mode, Outcome, Policy, Report, Request, Source};
use toolcall_recovery::settings::AdminToken;
use uuid::Uuid;

const T: Duration = Duration::from_secs(20);
const TOKEN: &str = "revert-test-token-0123456789";
/// Text around leaks that the ledger endpoint may show only with `show_text=true`.
const PRIVATE: &str = "PRIVATE-REVERT-9b1c";

// ---- helpers ----

/// Every row of `messages` (every column but `updated_at`) and of `agent_memories`.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    messages: Vec<Value>,
    memories: Vec<Value>,
}

/// Panics with the rows that differ (not two whole tables) when the snapshots differ.
fn assert_same(before: &Snapshot, after: &Snapshot, what: &str) {
    if before == after {
        return;
    }
    let mut diff = Vec::new();
    for (table, b, a) in [
        ("messages", &before.messages, &after.messages),
        ("agent_memories", &before.memories, &after.memories),
    ] {
        let id = |v: &Value| v["id"].as_i64().unwrap_or_default();
        for row in b {
            match a.iter().find(|r| id(r) == id(row)) {
                None => diff.push(format!("{table}: row gone: {row}")),
                Some(r) if r != row => {
                    diff.push(format!("{table}: row changed:\n  was {row}\n  now {r}"))
                }
                Some(_) => {}
            }
        }
        for row in a {
            if !b.iter().any(|r| id(r) == id(row)) {
                diff.push(format!("{table}: new row: {row}"));
            }
        }
    }
    panic!("{what}: the database differs:\n{}", diff.join("\n"));
}

/// What these tests do to their database, as methods of the harness's app (as
/// zero-to-production's `TestApp` has them).
impl TestApp {
    /// A fresh database with one chat and one agent that has `tools` enabled.
    async fn with_agent(tools: &[&str]) -> (TestApp, i64, i64) {
        let app = TestApp::prepare().await;
        let chat = app.create_chat().await;
        let agent = app.create_agent(tools).await;
        (app, chat, agent)
    }

    /// An assistant message of `agent` in `chat` holding `content` (`tools_used` empty).
    async fn assistant_message(&self, chat: i64, agent: i64, content: &str) -> i64 {
        self.create_message(chat, Some(agent), "assistant", Some(content), &[])
            .await
    }

    async fn snapshot(&self) -> Snapshot {
        let rows = |sql: &'static str| {
            let pool = self.pool.clone();
            async move {
                sqlx::query_scalar::<_, sqlx::types::Json<Value>>(sql)
                    .fetch_all(&pool)
                    .await
                    .expect(sql)
                    .into_iter()
                    .map(|j| j.0)
                    .collect::<Vec<Value>>()
            }
        };
        Snapshot {
            messages: rows("SELECT to_jsonb(m) - 'updated_at' FROM messages m ORDER BY m.id").await,
            memories: rows("SELECT to_jsonb(a) FROM agent_memories a ORDER BY a.id").await,
        }
    }

    /// THE recovery, as the backfill runs it.
    async fn recover(&self, id: i64) -> Report {
        recover::recover(
            &self.pool,
            &Policy::default(),
            Request::new(MessageId::new(id), Source::Backfill { model: None }),
        )
        .await
        .expect("recovery runs")
    }

    async fn revert(&self, id: i64) -> RevertReport {
        revert_message(&self.pool, MessageId::new(id), &Source::Cli, false, None)
            .await
            .expect("revert runs")
    }

    async fn ledger_counts(&self) -> (i64, i64) {
        (
            self.count("SELECT count(*) FROM recoveries").await,
            self.count("SELECT count(*) FROM recovery_items").await,
        )
    }

    /// `reverted_at` (as text), `reverted_by`, `revert_summary` of a ledger row.
    async fn revert_marks(&self, recovery_id: i64) -> (Option<String>, Option<String>, Value) {
        let (at, by, summary): (
            Option<String>,
            Option<String>,
            Option<sqlx::types::Json<Value>>,
        ) = sqlx::query_as(
            "SELECT reverted_at::text, reverted_by, revert_summary FROM recoveries WHERE id = $1",
        )
        .bind(recovery_id)
        .fetch_one(&self.pool)
        .await
        .expect("ledger row");
        (at, by, summary.map_or(Value::Null, |j| j.0))
    }

    async fn tool_message_count(&self) -> i64 {
        self.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await
    }

    async fn memory_count(&self) -> i64 {
        self.count("SELECT count(*) FROM agent_memories").await
    }

    async fn create_memory(&self, agent: i64, content: &str, memory_type: &str) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO agent_memories (agent_id, content, memory_type) VALUES ($1, $2, $3) \
             RETURNING id",
        )
        .bind(agent)
        .bind(content)
        .bind(memory_type)
        .fetch_one(&self.pool)
        .await
        .expect("memory")
    }

    async fn create_tool_message(
        &self,
        chat: i64,
        agent: Option<i64>,
        tool_call_id: &str,
        tool_name: Option<&str>,
    ) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO messages (chat_id, agent_id, role, content, tool_call_id, tool_name) \
             VALUES ($1, $2, 'tool', '{\"success\": true}', $3, $4) RETURNING id",
        )
        .bind(chat)
        .bind(agent)
        .bind(tool_call_id)
        .bind(tool_name)
        .fetch_one(&self.pool)
        .await
        .expect("tool message")
    }

    async fn exec(&self, sql: &str, id: i64) {
        sqlx::query(sql)
            .bind(id)
            .execute(&self.pool)
            .await
            .expect(sql);
    }
}

fn fates(f: &[RowFate]) -> Vec<(i64, &'static str)> {
    f.iter().map(|r| (r.id, r.fate)).collect()
}

/// The memory and tool-message ids a pass created, in call order.
fn created_ids(report: &Report) -> (Vec<i64>, Vec<i64>) {
    (
        report.calls.iter().filter_map(|c| c.memory_id).collect(),
        report
            .calls
            .iter()
            .filter_map(|c| c.tool_message_id)
            .collect(),
    )
}

fn save_memory_call(content: &str, memory_type: &str) -> String {
    format!(
        "<tool_call>{}</tool_call>",
        json!({"name": "save_memory", "arguments": {"content": content, "memory_type": memory_type}})
    )
}

// ---- 1. recover then revert is the identity ----

/// One situation of contract §3 and what its recovery must visibly do.
struct Case {
    name: &'static str,
    agent: Option<i64>,
    content: String,
    tools_used: &'static [&'static str],
    outcome: Outcome,
    memories: i64,
    tool_messages: i64,
    content_changes: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_then_revert_is_the_identity_for_every_outcome() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let other_chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let no_memory = app.create_agent(&["web_search"]).await;
    // Rows the reverts must leave alone: memories (one with the same content a recovery
    // writes), a named tool message, messages of another chat.
    app.create_memory(agent, "  Likes tea  ", "preference")
        .await;
    app.create_memory(agent, "I lost track of the plan.", "journal")
        .await;
    app.create_tool_message(chat, Some(agent), "call_app_1", Some("web_search"))
        .await;
    app.create_message(other_chat, Some(agent), "user", Some("Hi there "), &[])
        .await;

    for case in every_outcome(agent, no_memory) {
        let (id, before, report) = app.recovered_as_the_contract_says(chat, &case).await;
        let marks = app.reverted_exactly(&case, id, &before, &report).await;
        let rid = report.recovery_id.expect("a ledger row");
        app.stays_reverted(&case, id, &before, (rid, &marks)).await;
        app.an_edited_twin_is_refused(chat, &case).await;
    }
    app.cleanup().await;
}

/// The situations of contract §3 that write something, for an agent with save_memory
/// (`agent`) and one without (`no_memory`).
fn every_outcome(agent: i64, no_memory: i64) -> Vec<Case> {
    vec![
        Case {
            name: "recovered (result_prefix)",
            agent: Some(agent),
            content: result_prefix_leak(
                "  I lost track of the plan.  ",
                "journal",
                "You saw right through me.  \n",
            ),
            tools_used: &[],
            outcome: Outcome::Recovered,
            memories: 1,
            tool_messages: 1,
            content_changes: true,
        },
        Case {
            name: "recovered (hermes, with expiry)",
            agent: Some(agent),
            content: hermes_leak(
                "save_memory",
                json!({"content": "Dentist on Friday ", "memory_type": "goal", "expires_around": "2026-12-01"}),
                "Noted! ",
                " I'll remember. ",
            ),
            tools_used: &[],
            outcome: Outcome::Recovered,
            memories: 1,
            tool_messages: 1,
            content_changes: true,
        },
        Case {
            name: "stripped_only",
            agent: Some(agent),
            content: result_prefix_leak("Already saved", "fact", "Done, saved it."),
            tools_used: &["save_memory"],
            outcome: Outcome::StrippedOnly,
            memories: 0,
            tool_messages: 0,
            content_changes: true,
        },
        Case {
            name: "tool_not_enabled",
            agent: Some(no_memory),
            content: hermes_leak(
                "save_memory",
                json!({"content": "x", "memory_type": "fact"}),
                "",
                "Sure.",
            ),
            tools_used: &[],
            outcome: Outcome::ToolNotEnabled,
            memories: 0,
            tool_messages: 1,
            content_changes: true,
        },
        Case {
            name: "invalid_args (call)",
            agent: Some(agent),
            content: hermes_leak(
                "save_memory",
                json!({"content": "x", "memory_type": "bogus"}),
                "",
                "Okay.",
            ),
            tools_used: &[],
            outcome: Outcome::InvalidArgs,
            memories: 0,
            tool_messages: 1,
            content_changes: true,
        },
        Case {
            name: "invalid_args (result object)",
            agent: Some(agent),
            content: result_prefix_leak("something", "not_a_type", "Reply here."),
            tools_used: &[],
            outcome: Outcome::InvalidArgs,
            memories: 0,
            tool_messages: 1,
            content_changes: true,
        },
        Case {
            name: "forwarded",
            agent: Some(agent),
            content: hermes_leak(
                "web_search",
                json!({"query": "weather in Oslo"}),
                "Let me check. ",
                "",
            ),
            tools_used: &[],
            outcome: Outcome::Forwarded,
            memories: 0,
            tool_messages: 0,
            content_changes: true,
        },
        Case {
            name: "needs_review",
            agent: Some(agent),
            content: "{success: true, memory_type: \"journal\", content: \"only this\"}".into(),
            tools_used: &[],
            outcome: Outcome::NeedsReview,
            memories: 0,
            tool_messages: 0,
            content_changes: false,
        },
        Case {
            name: "two leaks: save_memory and web_search",
            agent: Some(agent),
            content: format!(
                "<tool_call>\n{}\n</tool_call>\n<tool_call>{}</tool_call>\nDone, café ☕.  ",
                json!({"name": "save_memory", "arguments": {"content": " Café ☕ über alles ", "memory_type": "fact"}}),
                json!({"name": "web_search", "arguments": {"query": "cafés"}}),
            ),
            tools_used: &[],
            outcome: Outcome::Recovered,
            memories: 1,
            tool_messages: 1,
            content_changes: true,
        },
        Case {
            name: "two leaks: two memories",
            agent: Some(agent),
            content: format!(
                "First.\n{}\nSecond.\n{}\n日本語 ✓",
                save_memory_call("  Born in Lyon", "fact"),
                save_memory_call("Runs on Sundays\n", "relationship"),
            ),
            tools_used: &[],
            outcome: Outcome::Recovered,
            memories: 2,
            tool_messages: 2,
            content_changes: true,
        },
    ]
}

/// The steps of [`recover_then_revert_is_the_identity_for_every_outcome`], each with its
/// assertions, for one case.
impl TestApp {
    /// Creates the case's message and recovers it: the outcome, content, memories and
    /// tool messages of the case. Returns the message, the database before, the report.
    async fn recovered_as_the_contract_says(
        &self,
        chat: i64,
        case: &Case,
    ) -> (i64, Snapshot, Report) {
        let what = case.name;
        let id = self
            .create_message(
                chat,
                case.agent,
                "assistant",
                Some(&case.content),
                case.tools_used,
            )
            .await;
        let before = self.snapshot().await;
        let (mems, tools) = (self.memory_count().await, self.tool_message_count().await);

        let report = self.recover(id).await;
        assert_eq!(report.outcome, case.outcome, "{what}");
        assert_eq!(report.mode, Mode::Recover, "{what}");
        let _ledger_row = report.recovery_id.expect("a ledger row");
        let (content, tools_used) = self.message(id).await;
        assert_eq!(
            content.as_deref() != Some(case.content.as_str()),
            case.content_changes,
            "{what}: content now {content:?}"
        );
        if case.outcome == Outcome::Recovered {
            assert!(
                tools_used
                    .as_array()
                    .expect("array")
                    .contains(&json!("save_memory (recovered)")),
                "{what}: {tools_used}"
            );
        }
        assert_eq!(self.memory_count().await - mems, case.memories, "{what}");
        assert_eq!(
            self.tool_message_count().await - tools,
            case.tool_messages,
            "{what}"
        );
        (id, before, report)
    }

    /// Reverts it: every row the pass created deleted, the message byte-identical, the
    /// database as `before`, the ledger row marked. Returns the marks.
    async fn reverted_exactly(
        &self,
        case: &Case,
        id: i64,
        before: &Snapshot,
        report: &Report,
    ) -> (Option<String>, Option<String>, Value) {
        let what = case.name;
        let rid = report.recovery_id.expect("a ledger row");
        let (memory_ids, tool_ids) = created_ids(report);
        let r = self.revert(id).await;
        assert_eq!(r.outcome, RevertOutcome::Reverted, "{what}: {:?}", r.reason);
        assert_eq!(r.recovery_id, Some(rid), "{what}");
        assert!(!r.dry_run);
        assert_eq!(
            fates(&r.memories),
            memory_ids
                .iter()
                .map(|&i| (i, "deleted"))
                .collect::<Vec<_>>(),
            "{what}"
        );
        assert_eq!(
            fates(&r.tool_messages),
            tool_ids.iter().map(|&i| (i, "deleted")).collect::<Vec<_>>(),
            "{what}"
        );
        let (content, tools_used) = self.message(id).await;
        assert_eq!(
            content.as_deref(),
            Some(case.content.as_str()),
            "{what}: content byte-identical"
        );
        assert_eq!(tools_used, json!(case.tools_used), "{what}");
        assert_same(before, &self.snapshot().await, what);
        let marks = self.revert_marks(rid).await;
        assert!(
            marks.0.is_some() && marks.1.as_deref() == Some("cli"),
            "{what}"
        );
        marks
    }

    /// A second revert changes nothing, and no automatic pass recovers it again.
    async fn stays_reverted(
        &self,
        case: &Case,
        id: i64,
        before: &Snapshot,
        (rid, marks): (i64, &(Option<String>, Option<String>, Value)),
    ) {
        let what = case.name;
        // Idempotent; and no automatic pass (a redelivered event, the backfill, an
        // observe-mode worker) recovers it again.
        let counts = self.ledger_counts().await;
        let again = self.revert(id).await;
        assert_eq!(again.outcome, RevertOutcome::AlreadyReverted, "{what}");
        for (policy, source) in [
            (
                Policy::default(),
                Source::Event {
                    event_id: EventId::new(Uuid::new_v4()),
                    model: None,
                },
            ),
            (Policy::default(), Source::Backfill { model: None }),
            (
                Policy::default().with_mode(Mode::Observe),
                Source::Event {
                    event_id: EventId::new(Uuid::new_v4()),
                    model: None,
                },
            ),
        ] {
            let pass = recover::recover(
                &self.pool,
                &policy,
                Request::new(MessageId::new(id), source.clone()),
            )
            .await
            .expect("pass runs");
            assert_eq!(pass.outcome, Outcome::Reverted, "{what}: {source:?}");
            assert_eq!(pass.content.as_deref(), Some(case.content.as_str()));
        }
        assert_same(before, &self.snapshot().await, what);
        assert_eq!(self.ledger_counts().await, counts, "{what}");
        assert_eq!(self.revert_marks(rid).await, *marks, "{what}");
    }

    /// The same situation, edited after its recovery: the revert is refused and changes
    /// nothing.
    async fn an_edited_twin_is_refused(&self, chat: i64, case: &Case) {
        let what = case.name;
        // The same situation edited after its recovery: refused, nothing changed.
        let twin = self
            .create_message(
                chat,
                case.agent,
                "assistant",
                Some(&case.content),
                case.tools_used,
            )
            .await;
        let twin_rid = self.recover(twin).await.recovery_id.expect("row");
        self.exec(
            "UPDATE messages SET content = content || ' (edited)' WHERE id = $1",
            twin,
        )
        .await;
        let edited = self.snapshot().await;
        let r = self.revert(twin).await;
        assert_eq!(r.outcome, RevertOutcome::Conflict, "{what}: edited twin");
        assert_same(&edited, &self.snapshot().await, what);
        assert_eq!(
            self.revert_marks(twin_rid).await,
            (None, None, Value::Null),
            "{what}"
        );
    }
}

/// `tools_used` comes back byte for byte whatever the app stored there, even shapes the
/// contract does not expect (recovery replaces a non-array with its mark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_used_of_any_shape_is_restored_exactly() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    for stored in ["[]", "null", "{}", "[1, {\"a\": [2]}]", "\"save_memory\""] {
        let leak = result_prefix_leak("Keeps bees", "fact", "Buzz.");
        let id = app.assistant_message(chat, agent, &leak).await;
        sqlx::query("UPDATE messages SET tools_used = $2::jsonb WHERE id = $1")
            .bind(id)
            .bind(stored)
            .execute(&app.pool)
            .await
            .expect("odd tools_used");
        let before = app.snapshot().await;
        let report = app.recover(id).await;
        assert_eq!(report.outcome, Outcome::Recovered, "{stored}");
        assert_ne!(before, app.snapshot().await, "{stored}");
        let r = app.revert(id).await;
        assert_eq!(
            r.outcome,
            RevertOutcome::Reverted,
            "{stored}: {:?}",
            r.reason
        );
        let text: String =
            sqlx::query_scalar("SELECT tools_used::text FROM messages WHERE id = $1")
                .bind(id)
                .fetch_one(&app.pool)
                .await
                .expect("row");
        let want: String = sqlx::query_scalar("SELECT $1::jsonb::text")
            .bind(stored)
            .fetch_one(&app.pool)
            .await
            .expect("jsonb");
        assert_eq!(text, want, "{stored}");
        assert_same(&before, &app.snapshot().await, stored);
    }
    app.cleanup().await;
}

/// SplitMix64: a deterministic sample, the same on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Text before a marked leak: unicode, newlines, trailing spaces, or nothing.
const BEFORE: &[&str] = &[
    "",
    "Okay! ",
    "Sure thing.\n",
    "Grüße aus Köln — ",
    "日本語で答えます。",
    "Let me note that 📝 ",
    "Line one\nline two.\n\n",
    "Trailing spaces.   ",
    "\t",
];
/// Text after a leak (may be blank).
const AFTER: &[&str] = &[
    "",
    " Done.",
    "\nAnything else? 🎉",
    " Merci beaucoup !  ",
    "\n\n— Σ ✓\n",
    " Noted.   \n",
    " 了解しました",
    "   ",
];
/// Text after a leading result object: never blank.
const AFTER_NONBLANK: &[&str] = &[
    "You saw right through me.",
    "Noted 📝  ",
    "\nGrüße!\n",
    " 了解しました。 ",
    "Okay.\n\nSecond paragraph with trailing spaces.   ",
];
/// Memory contents, with leading and trailing whitespace.
const MEMORY: &[&str] = &[
    "  Likes green tea ",
    "\tCafé ☕ über alles\n",
    " 日本に行きたい ",
    "Line one\nline two  ",
    "plain",
    "  ✓ spaces inside  and out  ",
];
const TYPES: &[&str] = &[
    "journal",
    "core",
    "fact",
    "preference",
    "goal",
    "relationship",
    "bogus",
];

/// A leak of a generated message, and whether it may only stand at the start.
fn generated_leak(rng: &mut Rng) -> (String, bool) {
    let memory = rng.pick(MEMORY);
    let memory_type = rng.pick(TYPES);
    let args = json!({"content": memory, "memory_type": memory_type});
    match rng.below(7) {
        0 => (
            format!(
                "{{success: true, memory_type: \"{memory_type}\", content: {}}}",
                json!(memory)
            ),
            true,
        ),
        1 => (
            format!(
                "{{\"success\": true, \"memory_type\": \"{memory_type}\", \"content\": {},}}",
                json!(memory)
            ),
            true,
        ),
        2 => (
            format!(
                "<tool_call>{}</tool_call>",
                json!({"name": "save_memory", "arguments": args})
            ),
            false,
        ),
        3 => (
            format!(
                "<tool_call>\n{}\n</tool_call>",
                json!({"name": "web_search", "arguments": {"query": memory}})
            ),
            false,
        ),
        4 => (
            format!(
                "[TOOL_CALLS][{}]",
                json!({"name": "save_memory", "arguments": args})
            ),
            false,
        ),
        5 => (
            format!(
                "<minimax:tool_call><invoke name=\"save_memory\"><parameter name=\"content\">{}</parameter><parameter name=\"memory_type\">{memory_type}</parameter></invoke></minimax:tool_call>",
                memory.trim()
            ),
            false,
        ),
        _ => (
            format!(
                "{} and {}",
                save_memory_call(memory, memory_type),
                save_memory_call(rng.pick(MEMORY), "fact")
            ),
            false,
        ),
    }
}

/// A generated message: (content, tools_used).
fn generated_message(rng: &mut Rng) -> (String, &'static [&'static str]) {
    let tools_used: &'static [&'static str] = if rng.below(6) == 0 {
        &["save_memory"]
    } else {
        &[]
    };
    if rng.below(10) == 0 {
        // Nothing but a result object: left for review.
        let content = format!(
            "{}{{success: true, memory_type: \"fact\", content: {}}}{}",
            rng.pick(&["", " ", "\n"]),
            json!(rng.pick(MEMORY)),
            rng.pick(&["", "  ", "\n"]),
        );
        return (content, &[]);
    }
    let (leak, leading) = generated_leak(rng);
    let content = if leading {
        format!(
            "{}{leak}{}",
            rng.pick(&["", " ", "\n"]),
            rng.pick(AFTER_NONBLANK)
        )
    } else {
        format!("{}{leak}{}", rng.pick(BEFORE), rng.pick(AFTER))
    };
    (content, tools_used)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_then_revert_is_the_identity_on_a_generated_sample() {
    let app = TestApp::prepare().await;
    let chats = [
        app.create_chat().await,
        app.create_chat().await,
        app.create_chat().await,
    ];
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let no_memory = app.create_agent(&["web_search"]).await;
    for m in MEMORY {
        app.create_memory(agent, m, "fact").await;
        app.create_memory(agent, m.trim(), "journal").await;
    }
    let mut rng = Rng(0x5EED_2026_0008);
    let mut ids = Vec::new();
    for i in 0..40 {
        let (content, tools_used) = generated_message(&mut rng);
        let who = if rng.below(5) == 0 { no_memory } else { agent };
        let id = app
            .create_message(
                chats[i % chats.len()],
                Some(who),
                "assistant",
                Some(&content),
                tools_used,
            )
            .await;
        // Replies in between, as in a real chat.
        app.create_message(chats[i % chats.len()], None, "user", Some("ok  "), &[])
            .await;
        ids.push((id, content));
    }
    let before = app.snapshot().await;

    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for (id, content) in &ids {
        let report = app.recover(*id).await;
        assert!(
            !matches!(
                report.outcome,
                Outcome::Clean | Outcome::NoAgent | Outcome::AlreadyRecovered | Outcome::Reverted
            ),
            "the sample must hold leaks only; message {id} {content:?}: {:?}",
            report.outcome
        );
        let now = app.message(*id).await.0;
        assert_eq!(
            now.as_deref() == Some(content.as_str()),
            report.outcome == Outcome::NeedsReview,
            "message {id} {content:?} after {:?}: {now:?}",
            report.outcome
        );
        *seen.entry(report.outcome.as_str()).or_default() += 1;
    }
    for outcome in [
        "recovered",
        "stripped_only",
        "tool_not_enabled",
        "invalid_args",
        "forwarded",
        "needs_review",
    ] {
        assert!(
            seen.contains_key(outcome),
            "sample covers {outcome}: {seen:?}"
        );
    }
    assert_ne!(before, app.snapshot().await, "the recoveries changed rows");

    // Reverted in another order than recovered.
    let mut order: Vec<usize> = (0..ids.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    for i in order {
        let (id, content) = &ids[i];
        let r = app.revert(*id).await;
        assert_eq!(
            r.outcome,
            RevertOutcome::Reverted,
            "message {id} {content:?}: {:?}",
            r.reason
        );
        assert_eq!(app.message(*id).await.0.as_deref(), Some(content.as_str()));
    }
    assert_same(&before, &app.snapshot().await, "sample");
    app.cleanup().await;
}

/// Transcript repair fixes a separate fault (Gemini rejects unnamed function responses)
/// and is deliberately not undone: a pre-existing unnamed tool message of the chat stays
/// named after the revert; everything else is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_repair_of_other_tool_messages_is_kept_after_revert() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    sqlx::query(
        "INSERT INTO messages (chat_id, agent_id, role, content, tool_calls) \
         VALUES ($1, $2, 'assistant', '', $3)",
    )
    .bind(chat)
    .bind(agent)
    .bind(sqlx::types::Json(
        json!([{"id": "call_1", "name": "lookup", "arguments": {}}]),
    ))
    .execute(&app.pool)
    .await
    .unwrap();
    let named = app
        .create_tool_message(chat, None, "call_1", Some(""))
        .await;
    let orphan = app
        .create_tool_message(chat, None, "call_missing", None)
        .await;
    let leak = result_prefix_leak("repair me", "fact", "Reply.");
    let id = app.assistant_message(chat, agent, &leak).await;
    let mut before = app.snapshot().await;

    let report = app.recover(id).await;
    assert_eq!(report.outcome, Outcome::Recovered);
    let r = app.revert(id).await;
    assert_eq!(r.outcome, RevertOutcome::Reverted);
    assert_eq!(app.message(id).await.0, Some(leak));
    for row in &mut before.messages {
        if row["id"] == json!(named) {
            row["tool_name"] = json!("lookup");
        } else if row["id"] == json!(orphan) {
            row["tool_name"] = json!("unknown");
        }
    }
    assert_same(
        &before,
        &app.snapshot().await,
        "everything but the repaired names is back",
    );
    app.cleanup().await;
}

// ---- 2. idempotent ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_revert_is_a_no_op_and_ledger_rows_are_kept() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Prefers tea", "preference", "Tea it is.");
    let id = app.assistant_message(chat, agent, &leak).await;
    let original = app.snapshot().await;
    let report = app.recover(id).await;
    let rid = report.recovery_id.expect("ledger row");
    let (memory_ids, tool_ids) = created_ids(&report);
    let counts = app.ledger_counts().await;
    assert_eq!(counts, (1, 1));

    // A dry run says what it would do and writes nothing.
    let recovered = app.snapshot().await;
    let dry = revert_message(&app.pool, MessageId::new(id), &Source::Cli, true, None)
        .await
        .expect("dry revert");
    assert!(dry.dry_run);
    assert_eq!(dry.outcome, RevertOutcome::Reverted);
    assert_eq!(fates(&dry.memories), vec![(memory_ids[0], "deleted")]);
    assert_same(&recovered, &app.snapshot().await, "dry run");
    assert_eq!(app.revert_marks(rid).await, (None, None, Value::Null));

    let first = app.revert(id).await;
    assert_eq!(first.outcome, RevertOutcome::Reverted);
    assert_same(&original, &app.snapshot().await, "first revert");
    let marks = app.revert_marks(rid).await;
    assert!(marks.0.is_some(), "reverted_at set");
    assert_eq!(marks.1.as_deref(), Some("cli"));
    assert_eq!(
        marks.2["memories"],
        json!([{"id": memory_ids[0], "fate": "deleted"}]),
        "revert_summary: {}",
        marks.2
    );
    assert_eq!(
        marks.2["tool_messages"],
        json!([{"id": tool_ids[0], "fate": "deleted"}]),
        "revert_summary: {}",
        marks.2
    );
    assert_eq!(app.ledger_counts().await, counts, "ledger rows are kept");

    for by in [Source::Cli, Source::Admin] {
        for dry_run in [false, true] {
            let again = revert_message(&app.pool, MessageId::new(id), &by, dry_run, None)
                .await
                .expect("revert runs");
            assert_eq!(again.outcome, RevertOutcome::AlreadyReverted, "{by:?}");
            assert_eq!(again.recovery_id, Some(rid));
            assert!(again.memories.is_empty() && again.tool_messages.is_empty());
            assert!(
                again.reason.as_deref().is_some_and(|r| !r.is_empty()),
                "answers so"
            );
            assert_eq!(again.content.as_deref(), Some(leak.as_str()));
        }
    }
    assert_same(&original, &app.snapshot().await, "second revert");
    assert_eq!(app.revert_marks(rid).await, marks, "the mark is not redone");
    assert_eq!(app.ledger_counts().await, counts);
    app.cleanup().await;
}

/// One transaction holding the row locked: reverts racing each other revert once; a
/// revert racing a redelivered event ends the same whichever goes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_reverts_and_passes_revert_exactly_once() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Racing", "fact", "Go.");
    let id = app.assistant_message(chat, agent, &leak).await;
    let original = app.snapshot().await;
    app.recover(id).await;

    let reverts: Vec<_> = (0..8)
        .map(|_| {
            let pool = app.pool.clone();
            tokio::spawn(async move {
                revert_message(&pool, MessageId::new(id), &Source::Admin, false, None)
                    .await
                    .expect("revert runs")
                    .outcome
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for r in reverts {
        outcomes.push(r.await.expect("task"));
    }
    let once = outcomes
        .iter()
        .filter(|o| **o == RevertOutcome::Reverted)
        .count();
    assert_eq!(once, 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, RevertOutcome::Reverted | RevertOutcome::AlreadyReverted)),
        "{outcomes:?}"
    );
    assert_same(&original, &app.snapshot().await, "racing reverts");

    // Recovered again by the admin, then a revert and a redelivered event at once.
    let pass = recover::recover(
        &app.pool,
        &Policy::default(),
        Request::new(MessageId::new(id), Source::Admin),
    )
    .await
    .expect("admin pass");
    assert_eq!(pass.outcome, Outcome::Recovered);
    let pool = app.pool.clone();
    let event = tokio::spawn(async move {
        recover::recover(
            &pool,
            &Policy::default(),
            Request::new(
                MessageId::new(id),
                Source::Event {
                    event_id: EventId::new(Uuid::new_v4()),
                    model: None,
                },
            ),
        )
        .await
        .expect("event pass")
        .outcome
    });
    let r = app.revert(id).await;
    let event = event.await.expect("task");
    assert_eq!(r.outcome, RevertOutcome::Reverted);
    assert!(
        matches!(event, Outcome::AlreadyRecovered | Outcome::Reverted),
        "{event:?}"
    );
    assert_same(&original, &app.snapshot().await, "revert racing an event");
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE reverted_at IS NOT NULL")
            .await,
        2
    );
    app.cleanup().await;
}

// ---- 3. refusals ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_changed_since_recovery_or_never_recovered_is_refused() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let msg = |content: String| {
        let app = &app;
        async move { app.assistant_message(chat, agent, &content).await }
    };
    let edited = msg(result_prefix_leak("Likes jazz", "preference", "Jazz!")).await;
    let retagged = msg(result_prefix_leak("Likes blues", "preference", "Blues!")).await;
    let clean = msg("Sets like {x | x > 0} are infinite.".into()).await;
    let untouched = msg(result_prefix_leak("Never processed", "fact", "Hm.")).await;
    let observed = msg(result_prefix_leak("Only observed", "fact", "Seen.")).await;

    let rid_edited = app.recover(edited).await.recovery_id.expect("row");
    let rid_retagged = app.recover(retagged).await.recovery_id.expect("row");
    assert_eq!(app.recover(clean).await.outcome, Outcome::Clean);
    let observe = recover::recover(
        &app.pool,
        &Policy::default().with_mode(Mode::Observe),
        Request::new(MessageId::new(observed), Source::Backfill { model: None }),
    )
    .await
    .expect("observe pass");
    assert_eq!(observe.mode, Mode::Observe);
    let rid_observed = observe.recovery_id.expect("observe row");

    // The app edits after recovery: the content, or tools_used.
    app.exec(
        "UPDATE messages SET content = content || ' (edited)' WHERE id = $1",
        edited,
    )
    .await;
    app.exec(
        "UPDATE messages SET tools_used = tools_used || '[\"web_search\"]' WHERE id = $1",
        retagged,
    )
    .await;
    let counts = app.ledger_counts().await;
    let before = app.snapshot().await;

    for (id, rid, what) in [
        (edited, rid_edited, "content"),
        (retagged, rid_retagged, "tools_used"),
    ] {
        let r = app.revert(id).await;
        assert_eq!(r.outcome, RevertOutcome::Conflict, "{what}");
        assert!(
            r.reason.as_deref().is_some_and(|s| s.contains(what)),
            "a clear reason naming the {what}: {:?}",
            r.reason
        );
        assert!(r.memories.is_empty() && r.tool_messages.is_empty());
        assert_eq!(app.revert_marks(rid).await, (None, None, Value::Null));
    }
    for (id, what) in [
        (clean, "clean"),
        (untouched, "never recovered"),
        (observed, "only observed"),
    ] {
        let r = app.revert(id).await;
        assert_eq!(r.outcome, RevertOutcome::NothingToRevert, "{what}");
        assert!(r.reason.as_deref().is_some_and(|s| !s.is_empty()), "{what}");
    }
    assert_eq!(
        app.revert_marks(rid_observed).await,
        (None, None, Value::Null)
    );
    assert_same(&before, &app.snapshot().await, "refusals change nothing");
    assert_eq!(app.ledger_counts().await, counts);

    let missing = revert_message(
        &app.pool,
        MessageId::new(i64::MAX),
        &Source::Cli,
        false,
        None,
    )
    .await
    .expect_err("unknown message");
    assert!(
        matches!(missing, Error::Poison(Poison::MissingMessage(m)) if m.get() == i64::MAX),
        "{missing:?}"
    );

    // The refusal is about the current state: once the app undoes its edit, it reverts.
    app.exec(
        "UPDATE messages SET tools_used = '[\"save_memory (recovered)\"]' WHERE id = $1",
        retagged,
    )
    .await;
    assert_eq!(app.revert(retagged).await.outcome, RevertOutcome::Reverted);
    assert_eq!(
        app.message(retagged).await.0,
        Some(result_prefix_leak("Likes blues", "preference", "Blues!"))
    );
    app.cleanup().await;
}

// ---- 4. what the revert deletes, keeps and reports ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_memories_are_kept_and_nothing_recovery_did_not_create_is_deleted() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let content = format!(
        "{}{}{} All three noted.",
        save_memory_call("alpha ", "fact"),
        save_memory_call("beta", "fact"),
        save_memory_call("gamma", "fact"),
    );
    let id = app.assistant_message(chat, agent, &content).await;
    // Look-alikes recovery did not create: a memory of the same agent with the content
    // a recovered call writes, a tool message of the chat with the tool_call_id the
    // first recovered call gets.
    let twin_memory = app.create_memory(agent, "gamma", "fact").await;
    let twin_tool = app
        .create_tool_message(
            chat,
            Some(agent),
            &format!("tcr-{id}-1"),
            Some("save_memory"),
        )
        .await;

    let report = app.recover(id).await;
    assert_eq!(report.outcome, Outcome::Recovered);
    let (memories, tools) = created_ids(&report);
    assert_eq!((memories.len(), tools.len()), (3, 3), "{:?}", report.calls);
    // The app edits one memory, deletes another, and deletes one tool message.
    sqlx::query(
        "UPDATE agent_memories SET content = 'alpha, as the user corrected it' WHERE id = $1",
    )
    .bind(memories[0])
    .execute(&app.pool)
    .await
    .unwrap();
    app.exec("DELETE FROM agent_memories WHERE id = $1", memories[1])
        .await;
    app.exec("DELETE FROM messages WHERE id = $1", tools[2])
        .await;

    let r = app.revert(id).await;
    assert_eq!(r.outcome, RevertOutcome::Reverted, "{:?}", r.reason);
    assert_eq!(
        fates(&r.memories),
        vec![
            (memories[0], "kept_edited"),
            (memories[1], "gone"),
            (memories[2], "deleted")
        ]
    );
    assert_eq!(
        fates(&r.tool_messages),
        vec![
            (tools[0], "deleted"),
            (tools[1], "deleted"),
            (tools[2], "gone")
        ]
    );
    assert_eq!(app.message(id).await, (Some(content), json!([])));
    let left: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, content FROM agent_memories ORDER BY id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        left,
        vec![
            (twin_memory, "gamma".to_string()),
            (memories[0], "alpha, as the user corrected it".to_string())
        ]
    );
    let tool_left: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM messages WHERE role = 'tool' ORDER BY id")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(tool_left, vec![twin_tool]);
    let (_, _, summary) = app.revert_marks(report.recovery_id.expect("row")).await;
    assert!(
        summary.to_string().contains("kept_edited"),
        "the ledger reports the kept memory: {summary}"
    );
    app.cleanup().await;
}

// ---- 5. a reverted message stays reverted ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reverted_message_is_recovered_again_only_by_an_explicit_admin_recover() {
    let mut app = TestApp::prepare().await;
    app.settings.admin.admin_token = Some(AdminToken::new(TOKEN));
    app.start().await;
    let addr = app.http_addr.expect("worker HTTP");
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Allergic to peanuts", "fact", "I'll keep that in mind.");
    let id = app.assistant_message(chat, agent, &leak).await;
    let event = app.event_for(id).await;
    app.publish_event(&event).await;
    let (first, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderation message");
    assert_eq!(first["recovery"]["outcome"], json!("recovered"));
    assert_eq!(app.memory_count().await, 1);

    let r = app.revert(id).await;
    assert_eq!(r.outcome, RevertOutcome::Reverted);
    let reverted = app.snapshot().await;
    let counts = app.ledger_counts().await;

    // The original event, delivered again.
    app.publish_event(&event).await;
    let (again, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderation message after the redelivery");
    assert_eq!(again["message"]["content"], json!(leak));
    assert_eq!(again["message"]["tools_used"], json!([]));
    assert_eq!(again["recovery"]["outcome"], json!("reverted"));
    app.wait_events(2.0, T).await;
    assert_eq!(
        app.metric("toolcall_recovery_events_total{mode=\"recover\",outcome=\"reverted\"}")
            .await,
        1.0
    );
    assert_same(&reverted, &app.snapshot().await, "after the redelivery");
    assert_eq!(app.ledger_counts().await, counts);

    // A recover-mode backfill leaves it reverted too, and publishes nothing for it.
    let (summary, _) = crate::backfill::run(&app, &[]).await;
    assert_eq!(summary.count("reverted"), 1, "{summary:?}");
    assert_same(&reverted, &app.snapshot().await, "after the backfill");
    assert_eq!(app.ledger_counts().await, counts);
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // Only the admin's explicit recover works on it again.
    let (status, body) = request(
        addr,
        "POST",
        &format!("/v1/messages/{id}/recover"),
        Some(&bearer()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("recovered"));
    assert_eq!(
        app.message(id).await.0.as_deref(),
        Some("I'll keep that in mind.")
    );
    assert_eq!(app.memory_count().await, 1);
    assert_eq!(
        app.ledger_counts().await.0,
        counts.0 + 1,
        "a new ledger row"
    );
    let (status, ledger) = request(
        addr,
        "GET",
        &format!("/v1/messages/{id}/ledger"),
        Some(&bearer()),
    )
    .await;
    assert_eq!(status, 200, "{ledger}");
    let rows = ledger["recoveries"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert!(rows[0]["recovery_id"].as_i64() > rows[1]["recovery_id"].as_i64());
    assert_eq!(rows[0]["reverted"], json!(false));
    assert_eq!(rows[1]["reverted"], json!(true));
    app.cleanup().await;
}

// ---- 6. the admin API ----

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_and_ledger_need_the_token() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Secret", "fact", "Okay.");
    let id = app.assistant_message(chat, agent, &leak).await;
    app.recover(id).await;
    let recovered = app.snapshot().await;
    let paths = [
        ("POST", format!("/v1/messages/{id}/revert")),
        ("POST", format!("/v1/messages/{id}/revert?dry_run=true")),
        ("GET", format!("/v1/messages/{id}/ledger")),
        ("GET", format!("/v1/messages/{id}/ledger?show_text=true")),
    ];

    let disabled = serve(&app, None).await;
    for (method, path) in &paths {
        for auth in [None, Some(bearer())] {
            let (status, body) = request(disabled, method, path, auth.as_deref()).await;
            assert_eq!(status, 404, "no token configured: {method} {path}");
            assert_eq!(body["error"]["code"], json!("not_found"));
        }
    }
    let guarded = serve(&app, Some(TOKEN)).await;
    for (method, path) in &paths {
        for auth in [
            None,
            Some("Bearer wrong".to_string()),
            Some(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1])),
            Some(TOKEN.to_string()),
        ] {
            let (status, body) = request(guarded, method, path, auth.as_deref()).await;
            assert_eq!(status, 401, "{method} {path} with {auth:?}");
            assert_eq!(body["error"]["code"], json!("unauthorized"));
            assert!(
                !body.to_string().contains("Secret"),
                "nothing of the message shown unauthenticated: {body}"
            );
        }
    }
    assert_same(&recovered, &app.snapshot().await, "unauthorized requests");
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE reverted_at IS NOT NULL")
            .await,
        0
    );
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_revert_restores_publishes_refuses_and_counts() {
    let mut app = TestApp::prepare().await;
    app.settings.admin.admin_token = Some(AdminToken::new(TOKEN));
    app.start().await;
    let addr = app.http_addr.expect("worker HTTP");
    let auth = bearer();
    let auth = Some(auth.as_str());
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Likes tea", "preference", &format!("Noted! {PRIVATE}"));
    let a = app.assistant_message(chat, agent, &leak).await;
    let edited_leak = result_prefix_leak("Likes coffee", "preference", "Coffee!");
    let edited = app.assistant_message(chat, agent, &edited_leak).await;
    let clean = app
        .create_message(chat, Some(agent), "assistant", Some("Plain answer."), &[])
        .await;
    let report = app.recover(a).await;
    let rid = report.recovery_id.expect("row");
    let (memory_ids, _) = created_ids(&report);
    app.recover(edited).await;
    app.exec(
        "UPDATE messages SET content = 'Coffee! (edited)' WHERE id = $1",
        edited,
    )
    .await;
    let recovered = app.snapshot().await;
    let revert_path = |id: i64| format!("/v1/messages/{id}/revert");

    // Dry run: says what it would do, writes nothing, publishes nothing.
    let (status, body) = request(
        addr,
        "POST",
        &format!("{}?dry_run=true", revert_path(a)),
        auth,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("reverted"));
    assert_eq!(body["dry_run"], json!(true));
    assert_eq!(
        body["memories"],
        json!([{"id": memory_ids[0], "fate": "deleted"}])
    );
    assert_same(&recovered, &app.snapshot().await, "dry run");
    assert_eq!(app.revert_marks(rid).await, (None, None, Value::Null));
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // A mistyped or badly valued dry_run is refused with a JSON error, never taken for a
    // real revert.
    for query in ["?dryrun=true", "?dry_run=1"] {
        let path = format!("{}{query}", revert_path(a));
        let (status, body) = request(addr, "POST", &path, auth).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], json!("invalid_query"), "{body}");
    }
    assert_same(&recovered, &app.snapshot().await, "refused queries");
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // 200: reverted, exactly one moderation message with the restored text.
    let (status, body) = request(addr, "POST", &revert_path(a), auth).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("reverted"));
    assert_eq!(body["message_id"], json!(a));
    assert_eq!(body["recovery_id"], json!(rid));
    assert_eq!(body["dry_run"], json!(false));
    assert_eq!(app.message(a).await, (Some(leak.clone()), json!([])));
    assert_eq!(app.revert_marks(rid).await.1.as_deref(), Some("admin"));
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderation message");
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0, "exactly one");
    assert_eq!(m["message"]["id"], json!(a));
    assert_eq!(m["message"]["content"], json!(leak));
    assert_eq!(m["message"]["tools_used"], json!([]));
    assert_eq!(m["recovery"]["outcome"], json!("reverted"));
    assert_eq!(m["recovery"]["reverted_recovery_id"], json!(rid));

    // 200 again: already reverted, nothing changed; the restored message was confirmed
    // the first time (its outbox row is sent), so nothing is published twice. (A publish
    // that was lost is sent when asked again: `asking_again_publishes_a_revert_whose_publish_was_lost`.)
    let after = app.snapshot().await;
    let (status, body) = request(addr, "POST", &revert_path(a), auth).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("already_reverted"));
    assert_eq!(body["published"]["moderation"], json!(0), "{body}");
    assert_same(&after, &app.snapshot().await, "second revert");
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // 409s and 404.
    let before_refusals = app.snapshot().await;
    for (id, code) in [(clean, "nothing_to_revert"), (edited, "conflict")] {
        let (status, body) = request(addr, "POST", &revert_path(id), auth).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], json!(code), "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{body}"
        );
    }
    assert_same(&before_refusals, &app.snapshot().await, "refusals");
    let (status, body) = request(addr, "POST", &revert_path(i64::MAX), auth).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    let m = app.metrics().await;
    for (result, n) in [
        ("reverted", 1.0),
        ("already_reverted", 1.0),
        ("nothing_to_revert", 1.0),
        ("conflict", 1.0),
    ] {
        assert_eq!(
            metric_value(
                &m,
                &format!("toolcall_recovery_reverts_total{{result=\"{result}\"}}")
            ),
            n,
            "{result}"
        );
    }

    // The ledger: newest first, reverted, content only with show_text.
    let ledger_path = |id: i64| format!("/v1/messages/{id}/ledger");
    let (status, body) = request(addr, "GET", &ledger_path(a), auth).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message_id"], json!(a));
    let rows = body["recoveries"].as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["recovery_id"], json!(rid));
    assert_eq!(rows[0]["reverted"], json!(true));
    assert_eq!(rows[0]["reverted_by"], json!("admin"));
    assert!(!body.to_string().contains(PRIVATE), "{body}");
    let (status, body) = request(
        addr,
        "GET",
        &format!("{}?show_text=true", ledger_path(a)),
        auth,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["recoveries"][0]["content_before"], json!(leak));
    let (status, body) = request(addr, "GET", &ledger_path(clean), auth).await;
    assert_eq!((status, body["recoveries"].clone()), (200, json!([])));
    let (status, body) = request(addr, "GET", &ledger_path(i64::MAX), auth).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );

    // Recovered again by the admin: a newer row on top of the reverted one.
    let (status, body) = request(addr, "POST", &format!("/v1/messages/{a}/recover"), auth).await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = request(addr, "GET", &ledger_path(a), auth).await;
    let reverted: Vec<&Value> = body["recoveries"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| &r["reverted"])
        .collect();
    assert_eq!(reverted, vec![&json!(false), &json!(true)], "{body}");
    app.cleanup().await;
}

// ---- 7. the command line ----

struct Cli {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `toolcall-recovery revert` on this test's database and exchanges.
async fn cli(app: &TestApp, extra: &[&str]) -> Cli {
    let p = &app.settings.publish;
    let mut args = vec![
        "revert".to_string(),
        format!("--database-url={}", app.db_url),
        format!("--moderation-exchange={}", p.moderation_exchange),
        format!("--tool-calls-exchange={}", p.tool_calls_exchange),
    ];
    if !extra.iter().any(|e| e.starts_with("--amqp-url")) {
        args.push(format!("--amqp-url={AMQP_URL}"));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("binary runs");
    Cli {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("utf-8"),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reverts_dry_runs_and_refuses() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory", "web_search"]).await;
    let mut leaks = Vec::new();
    let mut ids = Vec::new();
    for (i, memory) in ["Likes tea", "Hates rain", "Speaks Welsh", "Has a cat"]
        .iter()
        .enumerate()
    {
        let leak = result_prefix_leak(memory, "fact", &format!("Reply {i} ✓"));
        let id = app.assistant_message(chat, agent, &leak).await;
        assert_eq!(app.recover(id).await.outcome, Outcome::Recovered);
        leaks.push(leak);
        ids.push(id);
    }
    let (a, b, c, d) = (ids[0], ids[1], ids[2], ids[3]);
    app.exec(
        "UPDATE messages SET content = 'Reply 3, edited' WHERE id = $1",
        d,
    )
    .await;
    let (a_s, b_s, c_s, d_s) = (a.to_string(), b.to_string(), c.to_string(), d.to_string());
    let reverted = || async {
        app.count("SELECT count(*) FROM recoveries WHERE reverted_at IS NOT NULL")
            .await
    };

    // --dry-run: exit 0, nothing written, nothing published.
    let before = app.snapshot().await;
    let out = cli(&app, &["--dry-run", "--message", &a_s]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("would revert"), "{}", out.stdout);
    assert_same(&before, &app.snapshot().await, "dry run");
    assert_eq!(reverted().await, 0);
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // A real run: exit 0, restored, published once.
    let out = cli(&app, &["--message", &a_s]).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(app.message(a).await, (Some(leaks[0].clone()), json!([])));
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderation message");
    assert_eq!(m["message"]["content"], json!(leaks[0]));
    assert_eq!(m["recovery"]["outcome"], json!("reverted"));
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);
    let rid_a: i64 = sqlx::query_scalar("SELECT id FROM recoveries WHERE message_id = $1")
        .bind(a)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(app.revert_marks(rid_a).await.1.as_deref(), Some("cli"));

    // Again: exit 0, already reverted, nothing changed; the restored message was confirmed
    // the first time, so it is not published twice.
    let after_a = app.snapshot().await;
    let out = cli(&app, &["--message", &a_s]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("already_reverted"), "{}", out.stdout);
    assert_same(&after_a, &app.snapshot().await, "second run");
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    // A conflict: exit 3, unchanged.
    let out = cli(&app, &["--message", &d_s]).await;
    assert_eq!(out.code, Some(3), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("conflict"), "{}", out.stdout);
    assert_eq!(app.message(d).await.0.as_deref(), Some("Reply 3, edited"));

    // Mixed, as a comma list: exit 3, the revertable one reverted.
    let out = cli(&app, &["--message", &format!("{b_s},{d_s}")]).await;
    assert_eq!(out.code, Some(3), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(app.message(b).await, (Some(leaks[1].clone()), json!([])));
    assert_eq!(app.message(d).await.0.as_deref(), Some("Reply 3, edited"));
    assert_eq!(reverted().await, 2);
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderation message of the reverted one");
    assert_eq!(m["message"]["id"], json!(b));
    assert_eq!(m["message"]["content"], json!(leaks[1]));
    assert_eq!(
        app.queue_len(&app.moderation_queue).await,
        0,
        "none for the refused one"
    );

    // --json: one parsable object per message, an unknown one included.
    let out = cli(
        &app,
        &[
            "--json",
            "--no-publish",
            "--message",
            &c_s,
            "--message",
            &d_s,
            "--message",
            "999999999",
        ],
    )
    .await;
    assert_eq!(out.code, Some(3), "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert_eq!(
        (lines[0]["message_id"].clone(), lines[0]["outcome"].clone()),
        (json!(c), json!("reverted"))
    );
    assert_eq!(lines[0]["memories"][0]["fate"], json!("deleted"));
    assert_eq!(
        (lines[1]["message_id"].clone(), lines[1]["outcome"].clone()),
        (json!(d), json!("conflict"))
    );
    assert_eq!(lines[2]["message_id"], json!(999_999_999));
    assert_eq!(app.message(c).await, (Some(leaks[2].clone()), json!([])));
    assert_eq!(
        app.queue_len(&app.moderation_queue).await,
        0,
        "--no-publish"
    );
    assert_eq!(reverted().await, 3);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_changes_nothing_when_the_broker_is_unreachable() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Likes tea", "fact", "Okay.");
    let id = app.assistant_message(chat, agent, &leak).await;
    app.recover(id).await;
    let before = app.snapshot().await;
    let out = cli(
        &app,
        &[
            "--message",
            &id.to_string(),
            "--amqp-url=amqp://guest:guest@127.0.0.1:1/%2f",
        ],
    )
    .await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert_same(&before, &app.snapshot().await, "unreachable broker");
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE reverted_at IS NOT NULL")
            .await,
        0
    );
    app.cleanup().await;
}

/// A revert whose moderation publish never happened (here `--no-publish`; in the field a
/// broker failure after the commit) is published when the revert is asked for again, and
/// not once the message changed after the revert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_again_publishes_a_revert_whose_publish_was_lost() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Likes tea", "fact", "Okay.");
    let id = app.assistant_message(chat, agent, &leak).await;
    app.recover(id).await;
    let id_s = id.to_string();
    let out = cli(&app, &["--message", &id_s, "--no-publish"]).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    let out = cli(&app, &["--message", &id_s]).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("already_reverted"), "{}", out.stdout);
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("the restored message, published now");
    assert_eq!(m["message"]["content"], json!(leak));
    assert_eq!(m["recovery"]["outcome"], json!("reverted"));

    // Edited since the revert: that text is not the revert's to announce.
    sqlx::query("UPDATE messages SET content = 'edited by the app' WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    let out = cli(&app, &["--message", &id_s]).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);
    app.cleanup().await;
}

/// Issue 32, item 1: `revert` with the ledger's filters reverts every message whose latest
/// ledger row matches, across pages (here of 3 rows, for 7 matches), leaves the rest alone,
/// dry-runs without writing, and sums up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reverts_every_match_of_the_filters_across_pages() {
    let (app, chat, agent) = TestApp::with_agent(&["save_memory", "web_search"]).await;
    let mut matching = BTreeSet::new();
    for i in 0..7 {
        let leak = result_prefix_leak(&format!("Fact {i}"), "fact", &format!("Reply {i}."));
        let id = app.assistant_message(chat, agent, &leak).await;
        assert_eq!(app.recover(id).await.outcome, Outcome::Recovered);
        matching.insert(id);
    }
    let mut others = Vec::new();
    for i in 0..2 {
        let leak = hermes_leak(
            "web_search",
            json!({"query": format!("q{i}")}),
            "Checking. ",
            "",
        );
        let id = app.assistant_message(chat, agent, &leak).await;
        assert_eq!(app.recover(id).await.outcome, Outcome::Forwarded);
        others.push(id);
    }
    let filters = ["--family=result_prefix", "--mode=recover", "--page-size=3"];
    let reverted_rows = || async {
        app.count("SELECT count(*) FROM recoveries WHERE reverted_at IS NOT NULL")
            .await
    };

    // Dry run: every match listed, nothing written or published.
    let before = app.snapshot().await;
    let mut args = filters.to_vec();
    args.push("--dry-run");
    let out = cli(&app, &args).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.matches("would revert ledger row").count(),
        7,
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.ends_with(
            "7 message(s): 7 would be reverted, 0 already reverted before, 0 refused, 0 failed\n"
        ),
        "{}",
        out.stdout
    );
    assert_same(&before, &app.snapshot().await, "dry run");
    assert_eq!(reverted_rows().await, 0);

    // The real run, as JSON: one object per match, each reverted and published once; the
    // summary on stderr; the messages the filters do not match untouched.
    let mut args = filters.to_vec();
    args.push("--json");
    let out = cli(&app, &args).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let ids: BTreeSet<i64> = lines
        .iter()
        .map(|l| l["message_id"].as_i64().expect("an id"))
        .collect();
    assert_eq!((lines.len(), &ids), (7, &matching), "{}", out.stdout);
    assert!(lines.iter().all(|l| l["outcome"] == json!("reverted")));
    assert!(
        out.stderr
            .contains("7 message(s): 7 reverted, 0 already reverted before, 0 refused, 0 failed"),
        "{}",
        out.stderr
    );
    assert_eq!(reverted_rows().await, 7);
    for id in &others {
        let reverted: Option<String> =
            sqlx::query_scalar("SELECT reverted_by FROM recoveries WHERE message_id = $1")
                .bind(id)
                .fetch_one(&app.pool)
                .await
                .unwrap();
        assert_eq!(reverted, None, "message {id} does not match the filters");
    }
    let published = collect(&mut app.consumer(&app.moderation_queue).await, 7, T).await;
    let published: BTreeSet<i64> = published
        .iter()
        .map(|m| m["message"]["id"].as_i64().expect("an id"))
        .collect();
    assert_eq!(published, matching);

    // Again: every match is already reverted; nothing changes.
    let after = app.snapshot().await;
    let out = cli(&app, &filters).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.ends_with(
            "7 message(s): 0 reverted, 7 already reverted before, 0 refused, 0 failed\n"
        ),
        "{}",
        out.stdout
    );
    assert_same(&after, &app.snapshot().await, "second run");
    app.cleanup().await;
}

/// The filters and `--message` are two ways to say which messages: one of them is needed,
/// and they do not mix.
#[test]
fn revert_needs_ids_or_filters_and_not_both() {
    use clap::Parser;
    use toolcall_recovery::cmd::revert::RevertArgs;
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: RevertArgs,
    }
    assert!(P::try_parse_from(["revert"]).is_err());
    assert!(P::try_parse_from(["revert", "--message=1", "--family=hermes"]).is_err());
    let p = P::try_parse_from(["revert", "--since=24h", "--mode=recover"]).expect("filters");
    assert!(p.a.messages.is_empty() && p.a.filters.any());
    assert_eq!(
        p.a.page_size,
        toolcall_recovery::cmd::revert::DEFAULT_PAGE_SIZE
    );
    let err = P::try_parse_from(["revert", "--outcome=recoverd"])
        .err()
        .expect("a typo is refused")
        .to_string();
    assert!(err.contains("needs_review"), "{err}");
}
