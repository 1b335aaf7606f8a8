//! The admin API, served from `admin::router` on a loopback port of its own: the bearer
//! token (none configured: 404; missing or wrong: 401), the diagnosis (writes nothing),
//! and every status of the recover endpoint (200, 404, 409, 422), with the moderation
//! publish and the ledger checked.

use crate::backfill::fingerprint;
use crate::harness::*;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolcall_recovery::admin::{self, AdminState};
use toolcall_recovery::budget::Budget;
use toolcall_recovery::metrics::Metrics;
use toolcall_recovery::publish::{BrokerUrl, Exchanges, PublishTarget, Publisher};
use toolcall_recovery::settings::{AdminToken, SecretUrl};

pub const TOKEN: &str = "test-admin-token-0123456789";

/// Serves the admin router for this test's database and exchanges.
pub async fn serve(app: &TestApp, token: Option<&str>) -> SocketAddr {
    serve_with(app, token, Duration::from_secs(10)).await
}

async fn serve_with(app: &TestApp, token: Option<&str>, timeout: Duration) -> SocketAddr {
    let p = &app.settings.publish;
    let metrics = Arc::new(Metrics::new());
    let state = AdminState {
        pool: app.pool.clone(),
        policy: Arc::new(app.settings.policy()),
        token: token.map(AdminToken::new),
        publisher: Some(Arc::new(Publisher::new(
            PublishTarget {
                broker: BrokerUrl::with_defaults(SecretUrl::new(AMQP_URL)),
                connection_name: "tcr-test-admin".into(),
                exchanges: Exchanges::from_settings(p),
            },
            metrics.clone(),
        ))),
        metrics,
        timeout,
        // As the worker's: a pass takes a share of the byte budget.
        budget: Some(Budget::new(app.settings.max_in_flight_bytes)),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, admin::router(state)).await;
    });
    addr
}

/// One HTTP/1.1 request; the status and the JSON body.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
) -> (u16, Value) {
    request_with_body(addr, method, path, auth, "").await
}

async fn request_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n{auth}\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn bearer() -> Option<&'static str> {
    Some("Bearer test-admin-token-0123456789")
}

async fn diagnose(addr: SocketAddr, id: i64) -> (u16, Value) {
    request(
        addr,
        "GET",
        &format!("/v1/messages/{id}/diagnosis"),
        bearer(),
    )
    .await
}

pub async fn recover(addr: SocketAddr, id: i64) -> (u16, Value) {
    request(
        addr,
        "POST",
        &format!("/v1/messages/{id}/recover"),
        bearer(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_api_does_not_exist() {
    let app = TestApp::prepare().await;
    let addr = serve(&app, None).await;
    for (method, path) in [
        ("GET", "/v1/messages/1/diagnosis"),
        ("POST", "/v1/messages/1/recover"),
    ] {
        for auth in [None, bearer()] {
            let (status, body) = request(addr, method, path, auth).await;
            assert_eq!(status, 404, "{method} {path}");
            assert_eq!(body["error"]["code"], json!("not_found"));
        }
    }
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_401() {
    let app = TestApp::prepare().await;
    let addr = serve(&app, Some(TOKEN)).await;
    let chat = app.create_chat().await;
    let id = app
        .create_message(chat, None, "assistant", Some("Hi."), &[])
        .await;
    let path = format!("/v1/messages/{id}/diagnosis");
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer test-admin-token-012345678"),
        Some("Basic dGVzdA=="),
        Some(TOKEN),
    ] {
        let (status, body) = request(addr, "GET", &path, auth).await;
        assert_eq!(status, 401, "{auth:?}");
        assert_eq!(body["error"]["code"], json!("unauthorized"));
        assert!(body["error"]["message"].as_str().is_some());
    }
    let (status, _) = request(addr, "POST", &format!("/v1/messages/{id}/recover"), None).await;
    assert_eq!(status, 401);
    let (status, body) = diagnose(addr, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("clean"));
    let (status, body) = request(addr, "GET", "/v1/messages/abc/diagnosis", bearer()).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_id"))
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnosis_tells_what_recovery_would_do_and_writes_nothing() {
    let app = TestApp::prepare().await;
    let addr = serve(&app, Some(TOKEN)).await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Prefers tea", "preference", "Got it, tea it is.");
    let id = app
        .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
        .await;
    let before = fingerprint(&app).await;

    let (status, body) = diagnose(addr, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dry_run"], json!(true));
    assert_eq!(body["outcome"], json!("recovered"));
    assert_eq!(body["families"], json!(["result_prefix"]));
    assert_eq!(body["calls"][0]["name"], json!("save_memory"));
    assert_eq!(
        body["calls"][0]["arguments"]["content"],
        json!("Prefers tea")
    );
    assert_eq!(body["calls"][0]["outcome"], json!("recovered"));
    assert_eq!(body["content_preview"], json!("Got it, tea it is."));
    assert_eq!(body["leaks"][0]["family"], json!("result_prefix"));
    assert_eq!(body["leaks"][0]["start"], json!(0));
    assert_eq!(
        fingerprint(&app).await,
        before,
        "a diagnosis writes nothing"
    );

    let (status, body) = diagnose(addr, id + 1000).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_answers_200_404_409_and_422() {
    let app = TestApp::prepare().await;
    let addr = serve(&app, Some(TOKEN)).await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory", "web_search"]).await;
    let no_memory = app.create_agent(&["web_search"]).await;
    let msg = |agent: Option<i64>, content: String| {
        let app = &app;
        async move {
            app.create_message(chat, agent, "assistant", Some(&content), &[])
                .await
        }
    };

    // 200: recovered, published for moderation like the worker does.
    let id = msg(
        Some(agent),
        result_prefix_leak("Prefers tea", "preference", "Tea it is."),
    )
    .await;
    let (status, body) = recover(addr, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], json!("recovered"));
    assert_eq!(body["content"], json!("Tea it is."));
    assert_eq!(body["memories_created"], json!(1));
    assert_eq!(body["published"]["moderation"], json!(1));
    assert_eq!(app.count("SELECT count(*) FROM agent_memories").await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM recoveries WHERE source = 'admin'")
            .await,
        1
    );
    let (m, _) = app
        .get_one(&app.moderation_queue, Duration::from_secs(5))
        .await
        .expect("moderation message");
    assert_eq!(m["message"]["id"], json!(id));
    assert_eq!(m["message"]["content"], json!("Tea it is."));
    assert_eq!(m["recovery"]["outcome"], json!("recovered"));
    assert_eq!(m["origin"], json!("admin"));

    // 409: nothing left to recover, the second press of the button included.
    let (status, body) = recover(addr, id).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("nothing_to_recover"))
    );
    let clean = msg(Some(agent), "All good {name}.".into()).await;
    let (status, _) = recover(addr, clean).await;
    assert_eq!(status, 409);

    // 404.
    let (status, body) = recover(addr, id + 1000).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );

    // 200: a call the worker cannot run is forwarded to the app.
    let fwd = msg(
        Some(agent),
        hermes_leak(
            "web_search",
            json!({"query": "tea shops"}),
            "Searching. ",
            "",
        ),
    )
    .await;
    let (status, body) = recover(addr, fwd).await;
    assert_eq!((status, body["outcome"].clone()), (200, json!("forwarded")));
    let (call, _) = app
        .get_one(&app.tool_calls_queue, Duration::from_secs(5))
        .await
        .expect("tool call");
    assert_eq!(call["name"], json!("web_search"));
    assert_eq!(call["message_id"], json!(fwd));

    // 422: no agent; nothing written.
    let orphan_leak = result_prefix_leak("orphan", "fact", "Reply.");
    let orphan = msg(None, orphan_leak.clone()).await;
    let (status, body) = recover(addr, orphan).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (422, json!("no_agent")),
        "{body}"
    );
    assert_eq!(app.message(orphan).await.0, Some(orphan_leak));

    // 422: the tool is not enabled; the markup is removed and kept in the ledger.
    let leak = hermes_leak(
        "save_memory",
        json!({"content": "x", "memory_type": "fact"}),
        "",
        "Sure.",
    );
    let not_enabled = msg(Some(no_memory), leak).await;
    let (status, body) = recover(addr, not_enabled).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (422, json!("tool_not_enabled")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not enabled"),
        "{body}"
    );
    assert_eq!(body["recovery"]["content"], json!("Sure."));
    let removed: String = sqlx::query_scalar(
        "SELECT i.removed_text FROM recovery_items i JOIN recoveries r ON r.id = i.recovery_id \
         WHERE r.message_id = $1",
    )
    .bind(not_enabled)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(removed.starts_with("<tool_call>"), "{removed}");

    // 422: invalid arguments.
    let leak = hermes_leak(
        "save_memory",
        json!({"content": "x", "memory_type": "bogus"}),
        "",
        "Ok.",
    );
    let invalid = msg(Some(agent), leak).await;
    let (status, body) = recover(addr, invalid).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (422, json!("invalid_args")),
        "{body}"
    );
    assert_eq!(app.message(invalid).await.0.as_deref(), Some("Ok."));

    // 422: a bare result object is left for review.
    let bare = msg(
        Some(agent),
        "{success: true, memory_type: \"journal\", content: \"only\"}".into(),
    )
    .await;
    let (status, body) = recover(addr, bare).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (422, json!("needs_review")),
        "{body}"
    );
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_slow_requests_are_refused() {
    let app = TestApp::prepare().await;
    let addr = serve_with(&app, Some(TOKEN), Duration::from_millis(300)).await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let leak = result_prefix_leak("Prefers tea", "preference", "Tea it is.");
    let id = app
        .create_message(chat, Some(agent), "assistant", Some(&leak), &[])
        .await;
    let path = format!("/v1/messages/{id}/recover");

    let big = "x".repeat(admin::MAX_BODY_BYTES + 1);
    let (status, body) = request_with_body(addr, "POST", &path, bearer(), &big).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (413, json!("payload_too_large"))
    );

    // The row is locked by another transaction: the request runs out of time, and the
    // recovery it started is rolled back.
    let lock = app.lock_row(id).await;
    let (status, body) = recover(addr, id).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (503, json!("timeout")),
        "{body}"
    );
    lock.rollback().await.unwrap();
    assert_eq!(app.message(id).await.0, Some(leak));
    assert_eq!(app.count("SELECT count(*) FROM recoveries").await, 0);
    app.cleanup().await;
}

/// The worker serves the admin API on its own HTTP port: a token given in its settings
/// turns it on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_serves_the_admin_api_on_its_port() {
    let mut app = TestApp::prepare().await;
    app.settings.admin.admin_token = Some(AdminToken::new("worker-token"));
    app.start().await;
    let addr = app.http_addr.expect("worker HTTP address");
    let chat = app.create_chat().await;
    let id = app
        .create_message(chat, None, "assistant", Some("plain text"), &[])
        .await;
    let path = format!("/v1/messages/{id}/diagnosis");
    let (status, _) = request(addr, "GET", &path, None).await;
    assert_eq!(
        status, 401,
        "a token is configured: no header is unauthorized"
    );
    let (status, body) = request(addr, "GET", &path, Some("Bearer worker-token")).await;
    assert_eq!(status, 200, "{body}");
    app.cleanup().await;
}

/// Unknown paths and methods on the worker's port answer JSON, as every error of the API
/// does (docs/backfill-and-admin.md): 404 `not_found` for a path that is no route (with or
/// without a token), 405 `method_not_allowed` for a route asked with another method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_answer_json_on_the_worker() {
    let mut app = TestApp::prepare().await;
    app.settings.admin.admin_token = Some(AdminToken::new(TOKEN));
    app.start().await;
    let addr = app.http_addr.expect("worker HTTP address");
    for (method, path, auth) in [
        ("GET", "/v1/messages/1/nosuchthing", bearer()),
        ("GET", "/v1/nothing", None),
        ("GET", "/nope", None),
        ("POST", "/v1/messages/1/recover/extra", bearer()),
    ] {
        let (status, body) = request(addr, method, path, auth).await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (404, json!("not_found")),
            "{method} {path}: {body}"
        );
        assert!(body["error"]["message"].is_string(), "{body}");
    }
    for (method, path, auth) in [
        ("GET", "/v1/messages/1/recover", bearer()),
        ("DELETE", "/v1/messages/1/diagnosis", bearer()),
        ("POST", "/metrics", None),
        ("PUT", "/readyz", None),
    ] {
        let (status, body) = request(addr, method, path, auth).await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (405, json!("method_not_allowed")),
            "{method} {path}: {body}"
        );
    }
    app.cleanup().await;
}

/// The lines of `log` that are JSON, parsed.
fn json_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A field of a JSON log line (the formatter puts them under `fields`, or at the top).
fn field<'a>(line: &'a Value, name: &str) -> &'a Value {
    if line["fields"].is_object() {
        &line["fields"][name]
    } else {
        &line[name]
    }
}

/// The real binary's log: a start-up line says whether the API is on (and where) or off
/// and why; every admin request gets one INFO line (method, route, message id, status,
/// outcome), never the token or the content; refused tokens get a WARN with the peer's
/// address, rate-limited; requests while the API is off are said too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_says_at_start_and_per_request_what_it_did() {
    let app = TestApp::prepare().await;
    let secret_reply = "Tea it is, said nobody-should-see-this.";
    let (_, _, id) = app
        .leak(
            &["save_memory"],
            &result_prefix_leak("Prefers tea", "preference", secret_reply),
        )
        .await;
    let mut args = app.binary_args();
    args.push(format!("--admin-token={TOKEN}"));
    let (mut child, addr, log) = app.spawn_binary_with(args).await;

    let (status, body) = recover(addr, id).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = request(
        addr,
        "POST",
        &format!("/v1/messages/{id}/revert?dry_run=true"),
        bearer(),
    )
    .await;
    assert_eq!(status, 200);
    let refused = 20;
    for _ in 0..refused {
        let (status, _) = request(
            addr,
            "POST",
            &format!("/v1/messages/{id}/recover"),
            Some("Bearer wrong-token-guess"),
        )
        .await;
        assert_eq!(status, 401);
    }
    let request_line = |route: &'static str| {
        let log = log.clone();
        move || {
            std::future::ready(
                json_lines(&log.lines())
                    .iter()
                    .any(|l| field(l, "message") == "admin request" && field(l, "route") == route),
            )
        }
    };
    wait_for(
        "the revert's request line",
        Duration::from_secs(10),
        request_line("/v1/messages/{id}/revert"),
    )
    .await;
    crate::process::signal(&child, "-TERM");
    assert!(child.wait().await.expect("wait").success());

    let lines = json_lines(&log.lines());
    let text = log.lines().join("\n");
    assert!(
        lines.iter().any(|l| l["level"] == "INFO"
            && field(l, "message")
                .as_str()
                .is_some_and(|m| m.starts_with("admin API on"))
            && field(l, "admin_api")
                .as_str()
                .is_some_and(|a| a.contains(&addr.port().to_string()))),
        "a start-up line says the API is on, and where: {text}"
    );
    let requests: Vec<&Value> = lines
        .iter()
        .filter(|l| field(l, "message") == "admin request")
        .collect();
    assert_eq!(requests.len(), 2, "one line per request: {requests:#?}");
    let recover_line = requests[0];
    assert_eq!(recover_line["level"], "INFO");
    assert_eq!(field(recover_line, "method"), "POST");
    assert_eq!(field(recover_line, "route"), "/v1/messages/{id}/recover");
    assert_eq!(field(recover_line, "message_id"), &json!(id));
    assert_eq!(field(recover_line, "status"), &json!(200));
    assert_eq!(field(recover_line, "outcome"), "recovered");
    assert_eq!(field(recover_line, "dry_run"), &json!(false));
    let revert_line = requests[1];
    assert_eq!(field(revert_line, "outcome"), "reverted");
    assert_eq!(field(revert_line, "dry_run"), &json!(true));

    let warned: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["level"] == "WARN"
                && field(l, "message")
                    .as_str()
                    .is_some_and(|m| m.starts_with("admin request refused"))
        })
        .collect();
    assert!(!warned.is_empty(), "a refused token is said: {text}");
    assert!(
        warned.len() < refused,
        "rate-limited: {} lines for {refused} refusals",
        warned.len()
    );
    assert!(
        field(warned[0], "peer")
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{:#?}",
        warned[0]
    );
    assert!(!text.contains(TOKEN), "never the token");
    assert!(
        !text.contains("wrong-token-guess"),
        "never a presented token"
    );
    assert!(!text.contains("nobody-should-see-this"), "never content");

    // Without a token: the start-up line says the API is off and why; a request to it is
    // said too.
    let (mut child, addr, log) = app.spawn_binary().await;
    let (status, body) = request(
        addr,
        "POST",
        &format!("/v1/messages/{id}/recover"),
        bearer(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    wait_for(
        "the line of a request while off",
        Duration::from_secs(10),
        || {
            std::future::ready(
                log.lines()
                    .iter()
                    .any(|l| l.contains("the admin API is off")),
            )
        },
    )
    .await;
    crate::process::signal(&child, "-TERM");
    assert!(child.wait().await.expect("wait").success());
    let text = log.lines().join("\n");
    assert!(
        json_lines(&log.lines()).iter().any(|l| field(l, "message")
            .as_str()
            .is_some_and(|m| m.starts_with("admin API off: no admin token configured"))),
        "{text}"
    );
    app.cleanup().await;
}
