//! `toolcall-recovery demo` (issue #24, item 2), the binary against a running worker on the
//! real services: it shows a recovery end to end, and it refuses a database the worker did
//! not create for development, and a broker where no worker listens, leaving nothing behind.

use crate::harness::*;
use std::net::SocketAddr;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn demo(app: &TestApp, metrics: Option<SocketAddr>) -> Out {
    let s = &app.settings;
    let n = &s.names;
    let metrics_url = metrics.map_or("http://127.0.0.1:9/metrics".to_string(), |a| {
        format!("http://{a}/metrics")
    });
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .arg("demo")
        .args([
            format!("--database-url={}", app.db_url),
            format!("--amqp-url={AMQP_URL}"),
            format!("--input-exchange={}", n.input_exchange),
            format!("--queue={}", n.queue),
            format!("--moderation-exchange={}", s.publish.moderation_exchange),
            format!("--metrics-url={metrics_url}"),
            format!("--connection-name=tcr-test-demo-{}", n.queue),
        ])
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_worker_the_demo_says_so_and_leaves_nothing_behind() {
    // No worker has run: nothing is bound to the input exchange.
    let app = TestApp::prepare().await;
    let out = demo(&app, None).await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("is the worker running?"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("run --migrate"), "{}", out.stderr);
    for table in ["agents", "chats", "messages"] {
        assert_eq!(
            app.count(&format!("SELECT count(*) FROM {table}")).await,
            0,
            "{table}: its rows removed"
        );
    }
    app.cleanup().await;
}
