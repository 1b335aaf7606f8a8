//! `toolcall-recovery demo` (issue #24, item 2), the binary against a running worker on the
//! real services: it shows a recovery end to end, and it refuses a database the worker did
//! not create for development, and to run without a worker (issue 32, item 9: checked
//! before anything is written or published), leaving nothing behind.

use crate::harness::*;
use std::net::SocketAddr;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn demo(app: &TestApp, metrics: Option<SocketAddr>) -> Out {
    demo_with(app, metrics, &[]).await
}

async fn demo_with(app: &TestApp, metrics: Option<SocketAddr>, extra: &[String]) -> Out {
    let s = &app.settings;
    let n = &s.names;
    let metrics_url = metrics.map_or("http://127.0.0.1:9/metrics".to_string(), |a| {
        format!("http://{a}/metrics")
    });
    // The test's flags, but for those `extra` gives again.
    let flag = |a: &String| a.split('=').next().unwrap_or_default().to_string();
    let given: Vec<String> = extra.iter().map(flag).collect();
    let args: Vec<String> = [
        format!("--database-url={}", app.db_url),
        format!("--amqp-url={AMQP_URL}"),
        format!("--input-exchange={}", n.input_exchange),
        format!("--queue={}", n.queue),
        format!("--moderation-exchange={}", s.publish.moderation_exchange),
        format!("--metrics-url={metrics_url}"),
        format!("--connection-name=tcr-test-demo-{}", n.queue),
    ]
    .into_iter()
    .filter(|a| !given.contains(&flag(a)))
    .chain(extra.iter().cloned())
    .collect();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .arg("demo")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("binary runs");
    Out {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_a_recovery_end_to_end() {
    let app = TestApp::spawn().await;
    let out = demo(&app, app.http_addr).await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let cleaned = "That's a real milestone. How does it feel to have it on paper?";
    let memory = "Finished the first draft of the opening chapter.";
    // What it says happened...
    for expected in [
        "The worker recovered it",
        "outcome recovered, family result_prefix",
        &format!("now:    {cleaned}"),
        "[\"save_memory (recovered)\"]",
        &format!("journal: {memory}"),
        "tool message",
        "outcome recovered: \"That's a real milestone.",
        "toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}  0 -> 1",
        "toolcall_recovery_memories_created_total{mode=\"recover\"}  0 -> 1",
    ] {
        assert!(
            out.stdout.contains(expected),
            "{expected:?} in:\n{}",
            out.stdout
        );
    }
    // ... is what happened.
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM messages WHERE role = 'assistant' AND content = '{}'",
            cleaned.replace('\'', "''")
        ))
        .await,
        1
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM agent_memories WHERE memory_type = 'journal' AND content = '{memory}'"
        ))
        .await,
        1
    );
    assert_eq!(
        app.metric("toolcall_recovery_events_total{mode=\"recover\",outcome=\"recovered\"}")
            .await,
        1.0
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_refuses_a_database_not_created_for_development() {
    let app = TestApp::prepare().await;
    // The app's tables as the app would have them: not marked by the development setup.
    sqlx::query("COMMENT ON TABLE messages IS NULL")
        .execute(&app.pool)
        .await
        .expect("comment");
    let out = demo(&app, None).await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("only on a development database"),
        "{}",
        out.stderr
    );
    for table in ["agents", "chats", "messages"] {
        assert_eq!(
            app.count(&format!("SELECT count(*) FROM {table}")).await,
            0,
            "{table}: nothing written"
        );
    }
    app.cleanup().await;
}

/// Nothing of the demo's in the database.
async fn assert_nothing_written(app: &TestApp) {
    for table in ["agents", "chats", "messages"] {
        assert_eq!(
            app.count(&format!("SELECT count(*) FROM {table}")).await,
            0,
            "{table}: nothing written"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_worker_the_demo_says_so_and_leaves_nothing_behind() {
    // No worker has run: nothing answers at the metrics URL, nothing is bound.
    let app = TestApp::prepare().await;
    let out = demo(&app, None).await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("no worker answers"), "{}", out.stderr);
    assert!(out.stderr.contains("run --migrate"), "{}", out.stderr);
    assert_nothing_written(&app).await;
    // Nor on the broker: the input exchange it would have published to was not declared.
    let channel = app.amqp.create_channel().await.expect("channel");
    let passive = lapin::options::ExchangeDeclareOptions {
        passive: true,
        ..Default::default()
    };
    assert!(
        channel
            .exchange_declare(
                &app.settings.names.input_exchange,
                lapin::ExchangeKind::Topic,
                passive,
                lapin::types::FieldTable::default(),
            )
            .await
            .is_err(),
        "the demo declared {}",
        app.settings.names.input_exchange
    );
    app.cleanup().await;
}

/// The worker ran once and stopped: its queue is still bound, so an event would be routed
/// and wait there. The demo sees no worker at the metrics URL and writes and publishes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_gets_no_event_and_no_rows_from_the_demo() {
    let mut app = TestApp::spawn().await;
    let addr = app.http_addr;
    app.stop().await;
    let out = demo_with(&app, addr, &["--wait-secs=3".into()]).await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("no worker answers"), "{}", out.stderr);
    assert!(out.stderr.contains("Start one"), "{}", out.stderr);
    assert!(
        out.stdout.is_empty(),
        "nothing seeded, nothing told: {}",
        out.stdout
    );
    assert_nothing_written(&app).await;
    assert_eq!(
        app.queue_len(&app.settings.names.queue).await,
        0,
        "no event waits in the worker's queue"
    );
    app.cleanup().await;
}

/// A worker answers, but no queue takes events on the exchange the demo was given (the
/// worker consumes under other names): the event comes back, and the demo removes what it
/// wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unroutable_demo_event_takes_its_rows_back() {
    let app = TestApp::spawn().await;
    let elsewhere = format!("{}.elsewhere", app.settings.names.input_exchange);
    app.channel
        .exchange_declare(
            &elsewhere,
            lapin::ExchangeKind::Topic,
            lapin::options::ExchangeDeclareOptions::default(),
            lapin::types::FieldTable::default(),
        )
        .await
        .expect("exchange");
    let out = demo_with(
        &app,
        app.http_addr,
        &[format!("--input-exchange={elsewhere}")],
    )
    .await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("no queue takes events"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("were removed"), "{}", out.stderr);
    assert_nothing_written(&app).await;
    let _ = app
        .channel
        .exchange_delete(&elsewhere, lapin::options::ExchangeDeleteOptions::default())
        .await;
    app.cleanup().await;
}
