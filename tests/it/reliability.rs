//! Nothing escapes moderation and no publish is lost (issue #14, parts 1-4), against the
//! real PostgreSQL and RabbitMQ:
//!
//! - a recovery the database refuses for good still reaches moderation, once, before the
//!   event is dead-lettered; a date PostgreSQL cannot hold is no expiry;
//! - what a committed pass owes the broker is in the outbox: a broker failure between the
//!   commit and the confirm (admin API, backfill, a process that died) is sent by the relay;
//!   an unroutable publish stays pending and is counted, then sent once a queue is bound;
//! - a message that appears after its event is waited for; a database outage does not stop
//!   clean messages, nor does a leak waiting on it hold back their acks;
//! - the app writing the pre-cleaning text back does not run save_memory twice.

use crate::harness::*;
use lapin::options::QueueBindOptions;
use lapin::types::FieldTable;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use toolcall_recovery::admin::{self, AdminState};
use toolcall_recovery::ids::MessageId;
use toolcall_recovery::metrics::Metrics;
use toolcall_recovery::outbound::StandIn;
use toolcall_recovery::publish::{BrokerUrl, Exchanges, PublishTarget, Publisher};
use toolcall_recovery::recover::{self, Request, Source};
use toolcall_recovery::settings::{AdminToken, SecretUrl};

const T: Duration = Duration::from_secs(20);
/// A broker nobody listens on.
const NO_BROKER: &str = "amqp://guest:guest@127.0.0.1:1/%2f";

async fn pending_rows(app: &TestApp) -> i64 {
    app.count("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
        .await
}

/// A recovery PostgreSQL refuses (here a CHECK the app's schema has on memories) is
/// dead-lettered as `rejected_by_database`, and the message still reaches moderation,
/// once, as it is stored, with `recovery.outcome = "failed"` and the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_the_database_refuses_still_reaches_moderation_once() {
    let app = TestApp::spawn().await;
    sqlx::query(
        "ALTER TABLE agent_memories ADD CONSTRAINT app_rule CHECK (content <> 'forbidden')",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let leak = result_prefix_leak("forbidden", "fact", "Any text");
    let (_, _, id) = app.leak(&["save_memory"], &leak).await;
    let event = app.event_for(id).await;
    app.publish_event(&event).await;

    let (dead, headers) = app
        .get_one(&app.settings.names.dead_letter_queue, T)
        .await
        .expect("dead-lettered");
    assert_eq!(
        header(&headers, "x-tcr-reason").as_deref(),
        Some("rejected_by_database")
    );
    assert_eq!(dead["message"]["id"], json!(id));
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderated although recovery failed");
    assert_eq!(m["message"]["id"], json!(id));
    assert_eq!(
        m["message"]["content"],
        json!(leak),
        "the content as stored"
    );
    assert_eq!(m["recovery"]["outcome"], json!("failed"));
    assert_eq!(m["recovery"]["reason"], json!("rejected_by_database"));
    assert_eq!(m["source_event_id"], event["event_id"]);
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0, "once");
    assert_eq!(app.message(id).await.0.as_deref(), Some(leak.as_str()));
    app.cleanup().await;
}

/// `expires_around` that PostgreSQL cannot hold (`timestamp out of range`) is no expiry,
/// like any unparsable date: the memory is saved and the message cleaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_postgres_cannot_hold_is_no_expiry() {
    let app = TestApp::spawn().await;
    let leak = "{success: true, memory_type: \"fact\", content: \"x\", \
                expires_around: \"-5000-01-01\"}Any text";
    let (_, agent, id) = app.leak(&["save_memory"], leak).await;
    app.publish_event(&app.event_for(id).await).await;
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderated");
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));
    assert_eq!(m["message"]["content"], json!("Any text"));
    let expiry: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT expires_at FROM agent_memories WHERE agent_id = $1")
            .bind(agent)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(expiry, None);
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    app.cleanup().await;
}

/// The admin API with a publisher whose broker is unreachable: the recovery commits, the
/// answer says the publishes are pending, and the worker's relay sends them.
async fn serve_admin_without_broker(app: &TestApp) -> SocketAddr {
    let metrics = Arc::new(Metrics::new());
    let state = AdminState {
        pool: app.pool.clone(),
        policy: Arc::new(app.settings.policy()),
        token: Some(AdminToken::new(crate::admin::TOKEN)),
        publisher: Some(Arc::new(Publisher::new(
            PublishTarget {
                broker: BrokerUrl::with_defaults(SecretUrl::new(NO_BROKER)),
                connection_name: "tcr-test-admin-nobroker".into(),
                exchanges: Exchanges::from_settings(&app.settings.publish),
            },
            metrics.clone(),
        ))),
        metrics,
        timeout: Duration::from_secs(10),
        budget: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, admin::router(state)).await;
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_recovery_whose_publish_failed_is_relayed_not_lost() {
    let mut app = TestApp::prepare().await;
    let leak = hermes_leak("web_search", json!({"q": "tea"}), "Let me look. ", " Done.");
    let (_, _, id) = app.leak(&["save_memory", "web_search"], &leak).await;
    let addr = serve_admin_without_broker(&app).await;
    let (status, body) = crate::admin::recover(addr, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("forwarded"));
    assert_eq!(body["published"]["pending"], json!(2), "{body}");
    assert_eq!(pending_rows(&app).await, 2);
    // Asking again: the work is done (409), and nothing is owed twice.
    let (status, _) = crate::admin::recover(addr, id).await;
    assert_eq!(status, 409);
    assert_eq!(pending_rows(&app).await, 2);

    app.start().await;
    let (call, _) = app
        .get_one(&app.tool_calls_queue, T)
        .await
        .expect("the forwarded call, relayed");
    assert_eq!(call["name"], json!("web_search"));
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("the cleaned message, relayed");
    assert_eq!(m["message"]["content"], json!("Let me look. Done."));
    assert_eq!(m["origin"], json!("admin"));
    wait_for("rows marked sent", T, || async {
        pending_rows(&app).await == 0
    })
    .await;
    app.cleanup().await;
}

/// A pass of the backfill (or any caller) that committed and died before sending: the
/// rows it wrote in its transaction are sent by a worker's relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_committed_pass_owes_is_sent_even_if_its_process_died() {
    let mut app = TestApp::prepare().await;
    let (_, _, id) = app
        .leak(
            &["save_memory"],
            &result_prefix_leak("Likes tea", "fact", "Noted."),
        )
        .await;
    let report = recover::recover(
        &app.pool,
        &app.settings.policy(),
        Request::new(MessageId::new(id), Source::Backfill { model: None })
            .owing(Some(&StandIn::by(Source::Backfill { model: None }))),
    )
    .await
    .unwrap();
    assert_eq!(report.outbox.len(), 1);
    // ... and the process is gone: nothing sent. A rerun finds the message clean and owes
    // nothing more.
    let again = recover::recover(
        &app.pool,
        &app.settings.policy(),
        Request::new(MessageId::new(id), Source::Backfill { model: None })
            .owing(Some(&StandIn::by(Source::Backfill { model: None }))),
    )
    .await
    .unwrap();
    assert!(again.outbox.is_empty());
    assert_eq!(pending_rows(&app).await, 1);

    app.start().await;
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("relayed");
    assert_eq!(m["message"]["content"], json!("Noted."));
    assert_eq!(m["origin"], json!("backfill"));
    wait_for("row marked sent", T, || async {
        pending_rows(&app).await == 0
    })
    .await;
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0, "once");
    app.cleanup().await;
}

/// No queue bound to the moderation exchange: a clean message's publish and a recovered
/// one's come back unroutable; they are counted and kept in the outbox (not dropped), shown
/// as unroutable, not as pending (`toolcall_recovery_outbox_pending` is what an alert
/// watches for a broker that does not confirm), and sent once a queue is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unroutable_publish_stays_pending_until_a_queue_is_bound() {
    let app = TestApp::spawn().await;
    let exchange = app.settings.publish.moderation_exchange.clone();
    app.channel
        .queue_unbind(
            &app.moderation_queue,
            &exchange,
            "message.ready",
            FieldTable::default(),
        )
        .await
        .unwrap();
    let chat = app.create_chat().await;
    let id = app
        .create_message(chat, None, "assistant", Some("Plain prose."), &[])
        .await;
    app.publish_event(&app.event_for(id).await).await;
    let (_, _, recovered) = app
        .leak(
            &["save_memory"],
            &result_prefix_leak("Likes tea", "fact", "Noted."),
        )
        .await;
    app.publish_event(&app.event_for(recovered).await).await;
    wait_for("unroutable counted", T, || async {
        metric_value(
            &app.metrics().await,
            &format!("toolcall_recovery_messages_unroutable_total{{exchange=\"{exchange}\"}}"),
        ) >= 2.0
    })
    .await;
    wait_for("parked", T, || async { pending_rows(&app).await == 2 }).await;
    wait_for("shown as unroutable by the relay", T, || async {
        metric_value(&app.metrics().await, "toolcall_recovery_outbox_unroutable") == 2.0
    })
    .await;
    assert_eq!(
        metric_value(&app.metrics().await, "toolcall_recovery_outbox_pending"),
        0.0,
        "unroutable rows are not unconfirmed ones"
    );
    wait_for("event acked", T, || async {
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_events_total{mode=\"recover\",outcome=\"clean\"}",
        ) >= 1.0
    })
    .await;
    assert_eq!(app.queue_len(&app.moderation_queue).await, 0);

    app.channel
        .queue_bind(
            &app.moderation_queue,
            &exchange,
            "message.ready",
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut sent = Vec::new();
    for _ in 0..2 {
        let (m, _) = app
            .get_one(&app.moderation_queue, Duration::from_secs(40))
            .await
            .expect("sent once a queue is bound");
        sent.push(m["message"]["id"].as_i64().expect("an id"));
    }
    sent.sort_unstable();
    assert_eq!(sent, vec![id, recovered]);
    wait_for("rows marked sent", T, || async {
        pending_rows(&app).await == 0
    })
    .await;
    wait_for("the gauge follows", T, || async {
        metric_value(&app.metrics().await, "toolcall_recovery_outbox_unroutable") == 0.0
    })
    .await;
    assert!(
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_outbox_relayed_total{result=\"sent\"}"
        ) >= 1.0
    );
    app.cleanup().await;
}

/// The app publishes before its commit is visible: the message appears a moment after the
/// event, and is recovered, not dead-lettered as `missing_message`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_appears_after_its_event_is_waited_for() {
    let mut app = TestApp::prepare().await;
    app.settings.missing_message_retry_secs = 20;
    app.start().await;
    let pending = app.pending_leak().await;
    let (id, leak, mut event) = (pending.id, pending.leak.clone(), pending.event.clone());
    app.publish_event(&event).await;
    wait_for("retried", T, || async {
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_transient_errors_total{dependency=\"missing_message\"}",
        ) >= 1.0
    })
    .await;
    pending.commit(&app).await;
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderated");
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));
    assert_eq!(app.message(id).await.0.as_deref(), Some("Noted."));
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    // Past the window, a message that never appears is dead-lettered (and moderated as the
    // event carried it).
    event["event_id"] = json!(uuid::Uuid::new_v4().to_string());
    event["message"]["id"] = json!(id + 1_000_000);
    app.stop().await;
    app.settings.missing_message_retry_secs = 1;
    app.start().await;
    app.publish_event(&event).await;
    let (_, headers) = app
        .get_one(&app.settings.names.dead_letter_queue, T)
        .await
        .expect("dead-lettered after the window");
    assert_eq!(
        header(&headers, "x-tcr-reason").as_deref(),
        Some("missing_message")
    );
    let (m, _) = app
        .get_one(&app.moderation_queue, T)
        .await
        .expect("moderated");
    assert_eq!(m["recovery"]["outcome"], json!("failed"));
    assert_eq!(m["message"]["content"], json!(leak));
    app.cleanup().await;
}

/// The database is down and leaks keep waiting on it, more of them than the worker runs
/// recoveries at once: clean messages, which need no database, are still moderated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_does_not_stop_clean_messages() {
    let mut app = TestApp::prepare().await;
    app.settings.concurrency = 2;
    app.start().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let mut leaks = Vec::new();
    for n in 0..6 {
        let leak = result_prefix_leak(&format!("fact {n}"), "fact", "Noted.");
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
            .await;
        leaks.push(app.event_for(id).await);
    }
    let mut clean = Vec::new();
    for n in 0..10 {
        let id = app
            .create_message(
                chat,
                Some(agent),
                "assistant",
                Some(&format!("Reply {n}.")),
                &[],
            )
            .await;
        clean.push(app.event_for(id).await);
    }
    app.database_down().await;
    for e in &leaks {
        app.publish_event(e).await;
    }
    wait_for("leaks waiting on the database", T, || async {
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_transient_errors_total{dependency=\"database\"}",
        ) >= 2.0
    })
    .await;
    for e in &clean {
        app.publish_event(e).await;
    }
    let mut sink = app.consumer(&app.moderation_queue).await;
    let got = collect(&mut sink, clean.len(), T).await;
    let ids: HashSet<Value> = got.iter().map(|m| m["message"]["id"].clone()).collect();
    for e in &clean {
        assert!(
            ids.contains(&e["message"]["id"]),
            "{} moderated",
            e["message"]["id"]
        );
    }
    app.database_up().await;
    let rest = collect(&mut sink, leaks.len(), Duration::from_secs(60)).await;
    assert_eq!(
        rest.len(),
        leaks.len(),
        "the leaks once the database is back"
    );
    assert!(rest
        .iter()
        .all(|m| m["recovery"]["outcome"] == json!("recovered")));
    drop(sink);
    app.cleanup().await;
}

/// A leak waiting on the database holds back none of the acks of the clean messages after
/// it: with a window of 4 deliveries, twelve clean messages behind one waiting leak are all
/// moderated, which they could not be if their acks waited for the leak's (the broker sends
/// no more than 4 unacked deliveries), and the leak is recovered once the database is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leak_waiting_on_the_database_holds_back_no_ack_after_it() {
    let mut app = TestApp::prepare().await;
    app.settings.prefetch = 4;
    app.start().await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("waits", "fact", "Noted.");
    let id = app
        .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
        .await;
    let leak = app.event_for(id).await;
    let mut clean = Vec::new();
    for n in 0..12 {
        let text = format!("Reply {n}.");
        let id = app
            .create_message(chat, Some(agent), "assistant", Some(&text), &[])
            .await;
        clean.push(app.event_for(id).await);
    }
    app.database_down().await;
    app.publish_event(&leak).await;
    wait_for("the leak waiting on the database", T, || async {
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_transient_errors_total{dependency=\"database\"}",
        ) >= 1.0
    })
    .await;
    for e in &clean {
        app.publish_event(e).await;
    }
    let mut sink = app.consumer(&app.moderation_queue).await;
    let got = collect(&mut sink, clean.len(), T).await;
    let ids: HashSet<Value> = got.iter().map(|m| m["message"]["id"].clone()).collect();
    assert_eq!(
        ids.len(),
        clean.len(),
        "every clean message moderated: {ids:?}"
    );
    for e in &clean {
        assert!(ids.contains(&e["message"]["id"]));
    }
    app.database_up().await;
    let rest = collect(&mut sink, 1, Duration::from_secs(60)).await;
    assert_eq!(rest.len(), 1, "the leak once the database is back");
    assert_eq!(rest[0]["recovery"]["outcome"], json!("recovered"));
    drop(sink);
    app.cleanup().await;
}

/// The app saves the pre-cleaning text back (a lost update from a full-row save): the next
/// pass strips the markup again but does not run save_memory a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_writing_the_old_text_back_does_not_save_the_memory_twice() {
    let app = TestApp::spawn().await;
    let leak = result_prefix_leak("Likes tea", "fact", "Noted.");
    let (_, _, id) = app.leak(&["save_memory"], &leak).await;
    app.publish_event(&app.event_for(id).await).await;
    let (m, _) = app.get_one(&app.moderation_queue, T).await.expect("first");
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));

    // The app's full-row save writes back what it had: the leak and the old tools_used.
    sqlx::query("UPDATE messages SET content = $2, tools_used = '[]' WHERE id = $1")
        .bind(id)
        .bind(&leak)
        .execute(&app.pool)
        .await
        .unwrap();
    app.publish_event(&app.event_for(id).await).await;
    let (m, _) = app.get_one(&app.moderation_queue, T).await.expect("second");
    assert_eq!(m["message"]["content"], json!("Noted."));
    assert_eq!(m["recovery"]["outcome"], json!("stripped_only"));
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories").await,
        1,
        "one memory"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM messages WHERE role = 'tool'")
            .await,
        1,
        "one tool message"
    );
    // The removed text is kept again, with what it refers to.
    let removed: Vec<String> =
        sqlx::query_scalar("SELECT i.removed_text FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id WHERE r.message_id = $1 ORDER BY i.id")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(removed.len(), 2);
    assert_eq!(removed[0], removed[1]);
    app.cleanup().await;
}

/// `GET .../diagnosis` reads: with the app holding the message row locked it still answers
/// at once (a pass would wait for the lock), and it draws no id and fires no trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diagnosis_locks_nothing_and_writes_nothing() {
    let app = TestApp::prepare().await;
    sqlx::raw_sql(
        "CREATE SEQUENCE app_trigger_calls; \
         CREATE FUNCTION app_audit() RETURNS trigger LANGUAGE plpgsql AS \
           $$ BEGIN PERFORM nextval('app_trigger_calls'); RETURN NEW; END $$; \
         CREATE TRIGGER app_audit_messages BEFORE INSERT OR UPDATE ON messages \
           FOR EACH ROW EXECUTE FUNCTION app_audit(); \
         CREATE TRIGGER app_audit_memories BEFORE INSERT ON agent_memories \
           FOR EACH ROW EXECUTE FUNCTION app_audit();",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let (_, _, id) = app
        .leak(
            &["save_memory"],
            &result_prefix_leak("Likes tea", "fact", "Noted."),
        )
        .await;
    let calls = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT coalesce(last_value * (is_called::int), 0) FROM app_trigger_calls",
        )
        .fetch_one(&app.pool)
        .await
        .unwrap()
    };
    let triggered_before = calls().await;
    let addr = crate::admin::serve(&app, Some(crate::admin::TOKEN)).await;

    // The app holds the row (a long transaction of its own).
    let mut app_tx = app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM messages WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(&mut *app_tx)
        .await
        .unwrap();
    let answered = tokio::time::timeout(
        Duration::from_secs(3),
        crate::admin::request(
            addr,
            "GET",
            &format!("/v1/messages/{id}/diagnosis"),
            Some("Bearer test-admin-token-0123456789"),
        ),
    )
    .await
    .expect("answered while the app holds the row");
    app_tx.rollback().await.unwrap();
    let (status, body) = answered;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("recovered"));
    assert_eq!(body["memories_created"], json!(1));
    assert_eq!(body["calls"][0]["memory_id"], Value::Null);
    assert_eq!(calls().await, triggered_before, "no trigger fired");
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.cleanup().await;
}

/// A failover leaves the worker on a read-only server for a while (25006): the event is
/// retried, not dead-lettered, and recovered once the server takes writes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_after_a_failover_is_waited_out() {
    let app = TestApp::spawn().await;
    let (_, _, id) = app
        .leak(
            &["save_memory"],
            &result_prefix_leak("Likes tea", "fact", "Noted."),
        )
        .await;
    let terminate = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' \
         AND application_name LIKE 'toolcall-recovery%'",
        app.db_name
    );
    on_postgres(&format!(
        "ALTER DATABASE \"{}\" SET default_transaction_read_only = on",
        app.db_name
    ))
    .await;
    on_postgres(&terminate).await;
    app.publish_event(&app.event_for(id).await).await;
    wait_for("retried on the read-only server", T, || async {
        metric_value(
            &app.metrics().await,
            "toolcall_recovery_transient_errors_total{dependency=\"database\"}",
        ) >= 2.0
    })
    .await;
    assert_eq!(
        app.queue_len(&app.settings.names.dead_letter_queue).await,
        0
    );
    on_postgres(&format!(
        "ALTER DATABASE \"{}\" RESET default_transaction_read_only",
        app.db_name
    ))
    .await;
    on_postgres(&terminate).await;
    let (m, _) = app
        .get_one(&app.moderation_queue, Duration::from_secs(40))
        .await
        .expect("recovered after the failover");
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 1);
    app.cleanup().await;
}

/// Without a token the admin API does not exist, whatever the method (a 405 would show it
/// is there); with one, a wrong method is a 405 and an unknown query parameter a 400, so
/// `POST .../recover?dry_run=true` never recovers for real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_hides_without_a_token_and_refuses_unknown_parameters() {
    let app = TestApp::prepare().await;
    let leak = result_prefix_leak("Likes tea", "fact", "Noted.");
    let (_, _, id) = app.leak(&["save_memory"], &leak).await;
    let bearer = Some("Bearer test-admin-token-0123456789");
    let hidden = crate::admin::serve(&app, None).await;
    for (method, action) in [
        ("GET", "recover"),
        ("DELETE", "recover"),
        ("POST", "diagnosis"),
        ("PUT", "ledger"),
        ("GET", "revert"),
    ] {
        for auth in [None, bearer] {
            let path = format!("/v1/messages/{id}/{action}");
            let (status, body) = crate::admin::request(hidden, method, &path, auth).await;
            assert_eq!(status, 404, "{method} {path}: {body}");
            assert_eq!(body["error"]["code"], json!("not_found"));
        }
    }
    let open = crate::admin::serve(&app, Some(crate::admin::TOKEN)).await;
    let path = format!("/v1/messages/{id}/recover");
    let (status, body) = crate::admin::request(open, "GET", &path, bearer).await;
    assert_eq!(status, 405, "{body}");
    let (status, _) = crate::admin::request(open, "GET", &path, None).await;
    assert_eq!(status, 401, "the token is checked before the method");
    for query in ["?dry_run=true", "?x=1"] {
        let (status, body) =
            crate::admin::request(open, "POST", &format!("{path}{query}"), bearer).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], json!("invalid_query"));
    }
    let (status, body) = crate::admin::request(
        open,
        "GET",
        &format!("/v1/messages/{id}/diagnosis?verbose=1"),
        bearer,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        app.message(id).await.0.as_deref(),
        Some(leak.as_str()),
        "untouched"
    );
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.cleanup().await;
}
