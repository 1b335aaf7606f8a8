//! Several recoveries in one commit (issue #15), against the real PostgreSQL and RabbitMQ:
//! a batch commits every pass or none, a message named twice is recovered once, a row held
//! by another transaction fails the batch at once instead of holding it, the committer
//! recovers the rest without that message, and in the worker a poison message in a batch
//! fails alone while the others are recovered exactly once.

use crate::harness::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use toolcall_recovery::ids::{EventId, MessageId};
use toolcall_recovery::outbound::StandIn;
use toolcall_recovery::recover::committer::Committer;
use toolcall_recovery::recover::{self, Outcome, Request, Source};

const T: Duration = Duration::from_secs(30);

fn item<'a>(id: i64, envelope: &'a StandIn) -> Request<'a> {
    Request {
        message_id: MessageId::new(id),
        source: Source::Backfill { model: None },
        envelope: Some(envelope),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_recovers_each_message_once_and_reports_in_order() {
    let app = TestApp::prepare().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let (_, _, id) = app
            .leak(
                &["save_memory"],
                &result_prefix_leak(&format!("memory {i}"), "fact", "Noted."),
            )
            .await;
        ids.push(id);
    }
    let stand_in = StandIn::by(Source::Backfill { model: None });
    // Out of id order, and the first message named twice.
    let order = [ids[2], ids[0], ids[1], ids[0]];
    let items = order.iter().map(|&id| item(id, &stand_in)).collect();
    let reports = recover::recover_batch(&app.pool, &app.settings.policy(), items)
        .await
        .unwrap();

    assert_eq!(reports.len(), 4);
    for (report, &id) in reports.iter().zip(&order) {
        assert_eq!(report.message_id, MessageId::new(id), "in the order asked");
    }
    let outcomes: Vec<Outcome> = reports.iter().map(|r| r.outcome).collect();
    // Rows are locked in id order, so the first pass over ids[0] is the one in position 1
    // and the repeat (position 3) sees it done.
    assert_eq!(
        outcomes,
        [
            Outcome::Recovered,
            Outcome::Recovered,
            Outcome::Recovered,
            Outcome::AlreadyRecovered
        ]
    );
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 3);
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 3);
    assert_eq!(
        app.count("SELECT count(*) FROM outbox").await,
        3,
        "each recorded pass wrote what it owes"
    );
    for id in ids {
        assert_eq!(app.message(id).await.0.as_deref(), Some("Noted."));
    }
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_failing_pass_commits_nothing() {
    let app = TestApp::prepare().await;
    let leak = result_prefix_leak("Likes tea", "fact", "Noted.");
    let (_, _, id) = app.leak(&["save_memory"], &leak).await;
    let stand_in = StandIn::by(Source::Backfill { model: None });
    let items = vec![item(id, &stand_in), item(987_654_321, &stand_in)];
    let result = recover::recover_batch(&app.pool, &app.settings.policy(), items).await;

    let err = result.expect_err("a missing message fails the batch");
    assert_eq!(err.failed, Some(1), "the batch names the item that failed");
    assert_eq!(err.error.dead_letter_reason(), "missing_message");
    assert!(err.is_the_items_own());
    assert_eq!(
        app.message(id).await.0.as_deref(),
        Some(leak.as_str()),
        "the other pass was rolled back"
    );
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_held_elsewhere_fails_the_batch_at_once_naming_it() {
    let app = TestApp::prepare().await;
    let (_, _, free) = app
        .leak(&["save_memory"], &result_prefix_leak("a", "fact", "Ok."))
        .await;
    let (_, _, held) = app
        .leak(&["save_memory"], &result_prefix_leak("b", "fact", "Ok."))
        .await;
    let app_tx = app.lock_row(held).await;
    let stand_in = StandIn::by(Source::Backfill { model: None });
    let items = vec![item(free, &stand_in), item(held, &stand_in)];
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        recover::recover_batch(&app.pool, &app.settings.policy(), items),
    )
    .await
    .expect("the batch does not wait for the lock")
    .expect_err("a held row fails the batch");
    assert_eq!(err.failed, Some(1));
    assert!(err.error.has_sqlstate("55P03"), "{}", err.error);
    assert!(err.is_the_items_own());
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app_tx.rollback().await.unwrap();
    app.cleanup().await;
}

/// Through one committer: `free` leaks and one the app holds, all queued before the
/// committer runs (a current-thread runtime runs spawned tasks only when the test yields),
/// so they make one batch. The batch fails at the held row without waiting; the free ones
/// are recovered in one commit while the app still holds its row, the held one once it
/// lets go.
async fn the_rest_goes_on_while_one_is_held(free: usize) {
    let app = TestApp::prepare().await;
    let mut ids = Vec::new();
    for i in 0..=free {
        let (_, _, id) = app
            .leak(
                &["save_memory"],
                &result_prefix_leak(&format!("m{i}"), "fact", "Ok."),
            )
            .await;
        ids.push(id);
    }
    // Held in the middle of the ids, so the batch has passes before it and after it.
    let held = ids[free / 2];
    let app_tx = app.lock_row(held).await;
    let commits = Arc::new(AtomicUsize::new(0));
    let committer: Committer<StandIn> = {
        let commits = commits.clone();
        Committer::start(
            app.pool.clone(),
            app.settings.policy(),
            1,
            16,
            Arc::new(move |_| {
                commits.fetch_add(1, Ordering::SeqCst);
            }),
        )
    };
    let asked = ids.clone();
    let all = tokio::spawn(async move {
        let committer = &committer;
        futures_util::future::join_all(asked.into_iter().map(|id| {
            committer.recover(
                MessageId::new(id),
                Source::Backfill { model: None },
                Some(StandIn::by(Source::Backfill { model: None })),
            )
        }))
        .await
    });
    wait_for("the free messages recovered", T, || async {
        app.count("SELECT count(*) FROM recoveries").await == free as i64
    })
    .await;
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM recoveries WHERE message_id = {held}"
        ))
        .await,
        0,
        "the held message waits"
    );
    assert_eq!(
        commits.load(Ordering::SeqCst),
        1,
        "the free ones in one commit"
    );
    app_tx.rollback().await.unwrap();
    let reports = all.await.unwrap();
    for (report, &id) in reports.into_iter().zip(&ids) {
        let report = report.unwrap();
        assert_eq!(report.message_id, MessageId::new(id));
        assert_eq!(report.outcome, Outcome::Recovered);
    }
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        free as i64 + 1
    );
    assert_eq!(commits.load(Ordering::SeqCst), 2, "then the held one alone");
    app.cleanup().await;
}

#[tokio::test]
async fn the_committer_recovers_the_rest_of_a_batch_while_one_message_is_held() {
    the_rest_goes_on_while_one_is_held(4).await;
}

/// The rest of the batch is a single recovery: it runs before the held one, which waits.
#[tokio::test]
async fn the_committer_runs_the_one_left_before_the_held_one() {
    the_rest_goes_on_while_one_is_held(1).await;
}

/// One committer and a queue full of leaks, one of them for a message that does not exist:
/// the leaks are committed in batches, the poison one fails alone and is dead-lettered,
/// and every other message is recovered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_worker_a_poison_message_fails_alone_and_the_batch_is_recovered() {
    let mut app = TestApp::prepare().await;
    app.settings.concurrency = 1;
    app.settings.recoveries_per_commit = 16;
    app.settings.missing_message_retry_secs = 0;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let mut events = Vec::new();
    for i in 0..20 {
        let content = result_prefix_leak(&format!("memory {i}"), "journal", "Okay.");
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(&content), &[])
            .await;
        events.push(app.event_for(id).await);
    }
    let mut missing = events[0].clone();
    missing["event_id"] = json!(EventId::new(uuid::Uuid::new_v4()).to_string());
    missing["message"]["id"] = json!(987_654_321);
    events.insert(2, missing);
    // Everything is queued before the worker starts, so the deliveries arrive together
    // and wait for the one committer.
    toolcall_recovery::amqp::declare_topology(
        &app.channel,
        &app.settings.names,
        &app.settings.publish,
        app.settings.delivery_limit,
    )
    .await
    .expect("topology");
    for event in &events {
        app.publish_event(event).await;
    }
    app.start().await;

    let mut sink = app.consumer(&app.moderation_queue).await;
    let mut seen = std::collections::HashSet::new();
    app.wait_moderation_ids(&mut sink, &mut seen, 20, T).await;
    let (dead, headers) = app
        .get_one(&app.settings.names.dead_letter_queue.clone(), T)
        .await
        .expect("the poison event is dead-lettered");
    assert_eq!(dead["message"]["id"], json!(987_654_321));
    assert_eq!(
        header(&headers, "x-tcr-reason").as_deref(),
        Some("missing_message")
    );
    // The failed one is moderated too (as stored), so 20 moderation ids do not yet mean
    // 20 recoveries.
    wait_for("20 memories", T, || async {
        app.count("SELECT count(*) FROM agent_memories").await >= 20
    })
    .await;
    app.assert_exactly_once(20).await;
    wait_for("every commit counted", T, || async {
        app.metric("toolcall_recovery_recoveries_per_commit_sum")
            .await
            >= 20.0
    })
    .await;
    let metrics = app.metrics().await;
    let commits = metric_value(&metrics, "toolcall_recovery_recoveries_per_commit_count");
    let recovered = metric_value(&metrics, "toolcall_recovery_recoveries_per_commit_sum");
    assert_eq!(recovered, 20.0, "every recovery committed once");
    assert!(
        commits < recovered,
        "some commit held several recoveries: {commits} commits for {recovered}"
    );
    // The ledger agrees: rows of one transaction share its `now()`.
    let transactions = app
        .count("SELECT count(DISTINCT created_at) FROM recoveries")
        .await;
    assert_eq!(transactions as f64, commits);
    app.cleanup().await;
}
