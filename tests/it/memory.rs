//! Memory bounded by bytes (issue #21): a burst of large events, leaky with `messages`
//! locked (so every leak in flight waits on the database) and then clean, against the real
//! binary at its defaults (prefetch, byte budget, concurrency), keeps the worker's peak
//! resident memory (VmHWM, read from /proc) under the bound README.md and
//! docs/operations.md state, and loses nothing: every message is moderated once and every
//! leak recovered once. Small enough for CI; the full-size figures are in BENCHMARKS.md §6.

use crate::harness::*;
use futures_util::StreamExt;
use lapin::options::BasicAckOptions;
use std::collections::HashSet;
use std::time::Duration;
use toolcall_recovery::ids::EventId;

/// Events per burst and the size of each message's content.
const EVENTS: usize = 80;
const CONTENT_BYTES: usize = 900_000;
/// How long `messages` stays locked while the leaky burst waits.
const LOCKED: Duration = Duration::from_secs(3);
/// The documented bound at the defaults (docs/operations.md, "Memory"): 32 MiB + 6 x the
/// byte budget (`--max-in-flight-bytes`, 32 MiB), in MiB.
const BOUND_MIB: f64 = 32.0 + 6.0 * 32.0;

/// A reply of about [`CONTENT_BYTES`]: a pasted log, lines of plain text.
fn large(i: usize, leak: bool) -> String {
    let mut text = if leak {
        result_prefix_leak(&format!("memory {i}"), "journal", "Here is the log:\n")
    } else {
        format!("Here is log {i}:\n")
    };
    while text.len() < CONTENT_BYTES {
        text.push_str("2026-11-22T04:00:00Z INFO request served in 12 ms\n");
    }
    text
}

/// The peak resident memory of a process so far, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM");
    kb / 1024.0
}

/// The moderation ids the events must be published under.
fn moderation_ids(events: &[serde_json::Value]) -> HashSet<String> {
    events
        .iter()
        .map(|e| {
            let id = uuid::Uuid::parse_str(e["event_id"].as_str().expect("id")).expect("uuid");
            EventId::new(id).moderation_event_id().to_string()
        })
        .collect()
}

/// Publishes the burst and reads the moderation sink until as many messages arrived: the
/// moderation ids they carried, and how many messages there were.
async fn burst(
    app: &TestApp,
    sink: &mut lapin::Consumer,
    events: &[serde_json::Value],
) -> (HashSet<String>, usize) {
    for e in events {
        app.publish_event(e).await;
    }
    let (mut ids, mut received) = (HashSet::new(), 0);
    while received < events.len() {
        let next = tokio::time::timeout(Duration::from_secs(120), sink.next()).await;
        let Ok(Some(Ok(d))) = next else {
            panic!("only {} of {} moderated", ids.len(), events.len());
        };
        d.acker.ack(BasicAckOptions::default()).await.expect("ack");
        let v: serde_json::Value = serde_json::from_slice(&d.data).expect("json");
        ids.insert(v["event_id"].as_str().expect("id").to_string());
        received += 1;
    }
    (ids, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_large_events_stays_under_the_memory_bound_and_loses_nothing() {
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let mut leaky = Vec::new();
    let mut clean = Vec::new();
    for i in 0..EVENTS {
        for (leak, events) in [(true, &mut leaky), (false, &mut clean)] {
            let id = app
                .create_message(chat, Some(agent), "assistant", Some(&large(i, leak)), &[])
                .await;
            events.push(app.event_for(id).await);
        }
    }
    // The worker at its defaults: no --prefetch, --concurrency or byte budget given.
    let args: Vec<String> = app
        .binary_args()
        .into_iter()
        .filter(|a| !a.starts_with("--prefetch") && !a.starts_with("--concurrency"))
        .collect();
    let (mut child, _addr, _log) = app.spawn_binary_with(args).await;
    let pid = child.id().expect("running");
    let mut sink = app.consumer(&app.moderation_queue).await;

    // Leaky, with the table locked: the window fills with leaks waiting on the database.
    let lock = {
        let mut tx = app.pool.begin().await.expect("begin");
        sqlx::query("LOCK TABLE messages IN EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await
            .expect("lock");
        tokio::spawn(async move {
            tokio::time::sleep(LOCKED).await;
            tx.commit().await.expect("unlock");
        })
    };
    let (ids, received) = burst(&app, &mut sink, &leaky).await;
    lock.await.expect("unlocked");
    assert_eq!(ids, moderation_ids(&leaky), "each moderated once");
    assert_eq!(received, EVENTS);
    let after_leaky = peak_rss_mib(pid);
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        EVENTS as i64,
        "every leak recovered"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries").await,
        EVENTS as i64,
        "once"
    );

    let (ids, received) = burst(&app, &mut sink, &clean).await;
    assert_eq!(ids, moderation_ids(&clean), "each moderated once");
    assert_eq!(received, EVENTS);
    let late = tokio::time::timeout(Duration::from_secs(1), sink.next()).await;
    assert!(late.is_err(), "nothing moderated twice");
    let after_clean = peak_rss_mib(pid);
    println!("peak RSS: {after_leaky:.1} MiB after the leaky burst, {after_clean:.1} MiB after the clean one");
    assert!(
        after_clean < BOUND_MIB,
        "peak RSS {after_clean:.1} MiB over the bound of {BOUND_MIB} MiB (after the leaky burst: \
         {after_leaky:.1} MiB)"
    );
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    assert_eq!(app.queue_len(&app.settings.names.queue).await, 0);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM messages WHERE role = 'assistant' AND content LIKE '{success%'"
        )
        .await,
        0,
        "none left dirty"
    );
    child.start_kill().expect("kill");
    let _ = child.wait().await;
    app.cleanup().await;
}

/// A backfill page of large rows is cut short by bytes (`candidates::PAGE_BYTES`), and the
/// walk goes on after its last row: every row is still examined, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_over_large_rows_cuts_its_pages_by_bytes_and_misses_none() {
    use toolcall_recovery::backfill::candidates::PAGE_BYTES;
    let app = TestApp::prepare().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let rows = 3 * PAGE_BYTES / CONTENT_BYTES;
    for i in 0..rows {
        app.create_message(chat, Some(agent), "assistant", Some(&large(i, true)), &[])
            .await;
    }
    let (summary, _) = crate::backfill::run(&app, &["--batch-size=500", "--no-publish"]).await;
    assert_eq!(summary.examined, rows as u64);
    assert_eq!(summary.by_outcome.get("recovered"), Some(&(rows as u64)));
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        rows as i64
    );
    app.cleanup().await;
}
