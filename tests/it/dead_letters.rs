//! `toolcall-recovery dead-letters` against the real broker (issue #24, item 3): `list`
//! reads what the worker dead-lettered without taking it off the queue, `show` prints one,
//! `replay` sends dead letters back to the input exchange (confirmed, counted in
//! `x-tcr-replays`), `purge` deletes after a confirmation. And a replay never loses a dead
//! letter: not when no queue takes the replay, not when the broker closes the channel, not
//! when the process is killed half way.

use crate::harness::*;
use lapin::options::{BasicGetOptions, BasicPublishOptions, ExchangeDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::BasicProperties;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use toolcall_recovery::amqp;

const T: Duration = Duration::from_secs(30);

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `toolcall-recovery dead-letters <action> <args>` on this test's names, with `stdin`.
async fn dead_letters(app: &TestApp, action: &str, args: &[&str], stdin: &str) -> Out {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(["dead-letters", action])
        .args(broker_args(app))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).await.expect("stdin");
    drop(input);
    let output = child.wait_with_output().await.expect("binary runs");
    Out {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn broker_args(app: &TestApp) -> Vec<String> {
    let n = &app.settings.names;
    vec![
        format!("--amqp-url={AMQP_URL}"),
        format!("--input-exchange={}", n.input_exchange),
        format!("--queue={}", n.queue),
        format!("--dead-letter-exchange={}", n.dead_letter_exchange),
        format!("--dead-letter-queue={}", n.dead_letter_queue),
        format!("--connection-name=tcr-test-dead-letters-{}", n.queue),
    ]
}

/// A test's names with the worker's topology, declared as the worker declares it but with
/// no worker (replays stay in the input queue, where the test reads them), and `n` dead
/// letters numbered from 1.
async fn dead_letters_without_a_worker(n: i64) -> TestApp {
    let app = TestApp::prepare().await;
    amqp::declare_topology(&app.channel, &app.settings.names, &app.settings.publish, 20)
        .await
        .expect("topology");
    for i in 1..=n {
        put_dead_letter(&app, i, "missing_message").await;
    }
    app
}

/// A dead letter as the worker writes one (`worker/dead_letter.rs`), numbered `i` in its
/// event's message id.
async fn put_dead_letter(app: &TestApp, i: i64, reason: &str) {
    let n = &app.settings.names;
    let event_id = format!("00000000-0000-4000-8000-{i:012}");
    let body = json!({"event_id": event_id, "type": "message.finalized",
                      "message": {"id": i, "chat_id": 1, "role": "assistant"}});
    let mut headers = FieldTable::default();
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.to_string()));
    headers.insert("x-tcr-reason".into(), text(reason));
    headers.insert("x-tcr-error".into(), text("test"));
    headers.insert("x-tcr-event-id".into(), text(&event_id));
    headers.insert("x-tcr-original-exchange".into(), text(&n.input_exchange));
    headers.insert(
        "x-tcr-original-routing-key".into(),
        text(&n.input_routing_key),
    );
    headers.insert(
        "x-tcr-dead-lettered-at".into(),
        text(&chrono::Utc::now().to_rfc3339()),
    );
    app.channel
        .basic_publish(
            &n.dead_letter_exchange,
            &n.dead_letter_queue,
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            body.to_string().as_bytes(),
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers),
        )
        .await
        .expect("publish")
        .await
        .expect("confirm");
}

/// Takes every message off `queue`: (message id of the body, `x-tcr-replays`).
async fn drain(app: &TestApp, queue: &str) -> Vec<(i64, Option<i64>)> {
    let mut out = Vec::new();
    while let Some(m) = app
        .channel
        .basic_get(queue, BasicGetOptions { no_ack: true })
        .await
        .expect("basic_get")
    {
        let body: Value = serde_json::from_slice(&m.delivery.data).unwrap_or(Value::Null);
        let replays = m.delivery.properties.headers().as_ref().and_then(|h| {
            match h.inner().get("x-tcr-replays") {
                Some(AMQPValue::LongLongInt(n)) => Some(*n),
                _ => None,
            }
        });
        out.push((body["message"]["id"].as_i64().unwrap_or(-1), replays));
    }
    out
}

/// `list --json`, parsed.
async fn listed(app: &TestApp, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = dead_letters(app, "list", &all, "").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn message_ids(listed: &[Value]) -> BTreeSet<i64> {
    listed
        .iter()
        .filter_map(|v| v["message_id"].as_i64())
        .collect()
}

/// Polls `f` until it gives a value, failing after `timeout`.
async fn until<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The ID `list` shows for the dead letter of message `message`.
fn id_of(list_json: &str, message: i64) -> String {
    list_json
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["message_id"] == json!(message))
        .and_then(|v| v["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("message {message} listed: {list_json}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_replay_and_purge_what_the_worker_dead_lettered() {
    let app = TestApp::spawn().await;
    let dead = app.settings.names.dead_letter_queue.clone();
    // Two real dead letters: a body that is no JSON, and a leak whose message is not there.
    app.publish_raw(b"{\"event_id\": \"never closed").await;
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let missing_id = 900_000_001;
    let mut missing = app
        .event_for(
            app.create_message(chat, Some(agent), "assistant", Some("x"), &[])
                .await,
        )
        .await;
    let leak = result_prefix_leak("Likes tea", "fact", "Noted.");
    missing["message"]["id"] = json!(missing_id);
    missing["message"]["content"] = json!(leak);
    app.publish_event(&missing).await;
    wait_for("two dead letters", T, || async {
        app.queue_len(&dead).await == 2
    })
    .await;

    // list: both, with their reasons and ids, and both still in the queue afterwards.
    let out = dead_letters(&app, "list", &[], "").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("malformed_json"), "{}", out.stdout);
    assert!(out.stdout.contains("missing_message"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&missing_id.to_string()),
        "{}",
        out.stdout
    );
    let event_id = missing["event_id"].as_str().unwrap().to_string();
    assert!(out.stdout.contains(&event_id), "{}", out.stdout);
    assert!(out.stdout.contains("2 dead letter(s)"), "{}", out.stdout);
    assert_eq!(app.queue_len(&dead).await, 2, "list took nothing off");
    let json_list = dead_letters(&app, "list", &["--json"], "").await.stdout;
    assert_eq!(json_list.lines().count(), 2, "{json_list}");
    let missing_dl = id_of(&json_list, missing_id);

    // show: what the worker wrote, headers and body; an unknown id: exit 3.
    let out = dead_letters(&app, "show", &[&missing_dl], "").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for expected in [
        "x-tcr-reason",
        "missing_message",
        "x-tcr-error",
        &event_id,
        "Likes tea",
    ] {
        assert!(out.stdout.contains(expected), "{expected}: {}", out.stdout);
    }
    let out = dead_letters(&app, "show", &["0123456789ab"], "").await;
    assert_eq!(out.code, Some(3), "{}", out.stdout);
    assert_eq!(app.queue_len(&dead).await, 2, "show took nothing off");

    // replay by reason, once the message is there: the worker recovers it.
    sqlx::query(
        "INSERT INTO messages (id, chat_id, agent_id, role, content) \
         VALUES ($1, $2, $3, 'assistant', $4)",
    )
    .bind(missing_id)
    .bind(chat)
    .bind(agent)
    .bind(&leak)
    .execute(&app.pool)
    .await
    .unwrap();
    let out = dead_letters(&app, "replay", &["--reason", "missing_message"], "").await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("replayed 1 dead letter(s)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("replay 1"), "{}", out.stdout);
    wait_for("the replayed event recovered", T, || async {
        app.count(&format!(
            "SELECT count(*) FROM recoveries WHERE message_id = {missing_id}"
        ))
        .await
            == 1
    })
    .await;
    assert_eq!(
        app.count("SELECT count(*) FROM agent_memories WHERE content = 'Likes tea'")
            .await,
        1
    );

    // replay by id: the malformed body fails again, and its new dead letter says it was
    // replayed once.
    let malformed_dl = dead_letters(&app, "list", &["--json"], "")
        .await
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["reason"] == "malformed_json")
        .and_then(|v| v["id"].as_str().map(str::to_string))
        .expect("the malformed dead letter");
    let out = dead_letters(&app, "replay", &[&malformed_dl], "").await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("replayed 1 dead letter(s)"),
        "{}",
        out.stdout
    );
    let again = until(T, "dead-lettered again", || async {
        let listed = listed(&app, &[]).await;
        (listed.len() == 1).then_some(listed)
    })
    .await;
    assert_eq!(again[0]["reason"], "malformed_json");
    assert_eq!(again[0]["replays"], 1, "{again:?}");
    let out = dead_letters(&app, "replay", &["ffffffffffff"], "").await;
    assert_eq!(out.code, Some(3), "an id not found: {}", out.stdout);
    assert!(
        out.stdout.contains("not found: ffffffffffff"),
        "{}",
        out.stdout
    );

    // purge: not without a yes; then with it.
    let out = dead_letters(&app, "purge", &["--all"], "no\n").await;
    assert_eq!(out.code, Some(3), "{}", out.stdout);
    assert!(
        out.stderr.contains("Delete 1 dead letter(s)"),
        "{}",
        out.stderr
    );
    assert_eq!(app.queue_len(&dead).await, 1);
    let out = dead_letters(&app, "purge", &["--all"], "").await;
    assert_eq!(out.code, Some(3), "no answer is no: {}", out.stdout);
    assert_eq!(app.queue_len(&dead).await, 1);
    let out = dead_letters(&app, "purge", &["--all"], "yes\n").await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("purged 1 dead letter(s)"),
        "{}",
        out.stdout
    );
    assert_eq!(app.queue_len(&dead).await, 0);
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_takes_only_what_was_selected_and_replay_by_event_id() {
    let app = dead_letters_without_a_worker(1).await;
    let names = app.settings.names.clone();
    for (i, reason) in [(2, "malformed_json"), (3, "missing_message")] {
        put_dead_letter(&app, i, reason).await;
    }
    let out = dead_letters(&app, "purge", &["0123456789ab", "--yes"], "").await;
    assert_eq!(out.code, Some(3), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("not found: 0123456789ab"),
        "{}",
        out.stdout
    );
    assert_eq!(app.queue_len(&names.dead_letter_queue).await, 3);
    let out = dead_letters(&app, "purge", &["--reason", "missing_message", "--yes"], "").await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("purged 2 dead letter(s)"),
        "{}",
        out.stdout
    );
    let left = drain(&app, &names.dead_letter_queue).await;
    assert_eq!(left, [(2, None)], "the other reason stays");

    put_dead_letter(&app, 4, "internal_error").await;
    let event_id = "00000000-0000-4000-8000-000000000004";
    let out = dead_letters(&app, "replay", &[event_id], "").await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(drain(&app, &names.queue).await, [(4, Some(1))]);
    assert_eq!(app.queue_len(&names.dead_letter_queue).await, 0);
    app.cleanup().await;
}

/// A replay no queue takes (the input queue unbound) is not acked: every dead letter stays,
/// and the command fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_no_queue_takes_leaves_the_dead_letter_where_it_was() {
    let app = dead_letters_without_a_worker(3).await;
    let n = app.settings.names.clone();
    app.channel
        .queue_unbind(
            &n.queue,
            &n.input_exchange,
            &n.input_routing_key,
            FieldTable::default(),
        )
        .await
        .expect("unbind");
    let out = dead_letters(&app, "replay", &["--all"], "").await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("to no queue"), "{}", out.stderr);
    assert!(
        out.stdout.contains("replayed 0 dead letter(s)"),
        "{}",
        out.stdout
    );
    let left: BTreeSet<i64> = drain(&app, &n.dead_letter_queue)
        .await
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(left, BTreeSet::from([1, 2, 3]));
    app.cleanup().await;
}

/// The broker closes the channel on the replay's publish (the input exchange is gone):
/// nothing was acked, so every dead letter is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_whose_channel_closes_loses_nothing() {
    let app = dead_letters_without_a_worker(3).await;
    let n = app.settings.names.clone();
    app.channel
        .exchange_delete(&n.input_exchange, ExchangeDeleteOptions::default())
        .await
        .expect("delete the input exchange");
    let out = dead_letters(&app, "replay", &["--all"], "").await;
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    // The broker puts back what the closed channel held unacked.
    let left = until(T, "every dead letter back in the queue", || async {
        let left = message_ids(&listed(&app, &[]).await);
        (left.len() == 3).then_some(left)
    })
    .await;
    assert_eq!(left, BTreeSet::from([1, 2, 3]));
    app.cleanup().await;
}

/// `replay --all` killed (SIGKILL) while it runs: every dead letter is afterwards in the
/// dead-letter queue or in the input queue, none lost; one may be in both (replayed, not yet
/// acked), which the worker's idempotence makes harmless. A second replay finishes the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_killed_half_way_loses_nothing() {
    const N: i64 = 500;
    let app = dead_letters_without_a_worker(N).await;
    let n = app.settings.names.clone();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolcall-recovery"))
        .args(["dead-letters", "replay", "--all"])
        .args(broker_args(&app))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    wait_for("the replay under way", T, || async {
        app.queue_len(&n.queue).await > 0
    })
    .await;
    child.kill().await.expect("SIGKILL");

    child.wait().await.expect("killed");

    // The broker puts back what the killed connection held unacked once it sees it closed;
    // `list` reads the dead-letter queue without taking anything off it.
    let all: BTreeSet<i64> = (1..=N).collect();
    let mut replayed = Vec::new();
    let deadline = std::time::Instant::now() + T;
    let still_dead = loop {
        replayed.extend(drain(&app, &n.queue).await);
        let dead = message_ids(&listed(&app, &["--limit", "100000"]).await);
        let seen: BTreeSet<i64> = replayed
            .iter()
            .map(|(i, _)| *i)
            .chain(dead.clone())
            .collect();
        if seen == all {
            break dead;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lost: {:?}",
            all.difference(&seen)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        replayed.iter().all(|(_, replays)| *replays == Some(1)),
        "each replay counted once"
    );
    // What the kill interrupted is replayed by running it again.
    let out = dead_letters(&app, "replay", &["--all"], "").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let mut second = BTreeSet::new();
    let deadline = std::time::Instant::now() + T;
    while second != still_dead {
        assert!(
            std::time::Instant::now() < deadline,
            "the rest was not replayed"
        );
        second.extend(drain(&app, &n.queue).await.into_iter().map(|(i, _)| i));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let both: BTreeSet<i64> = replayed.iter().map(|(i, _)| *i).chain(second).collect();
    assert_eq!(both, all, "every dead letter replayed at least once");
    assert_eq!(app.queue_len(&n.dead_letter_queue).await, 0);
    app.cleanup().await;
}

/// Issue 32, item 10: a body the worker could not decode but that named its message is
/// dead-lettered with that message's id (`x-tcr-message-id`), and `list` shows it, not
/// `-`; `show` prints the body as it came, not parsed and written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_the_message_the_worker_knew_and_show_the_body_as_received() {
    let app = TestApp::spawn().await;
    let dead = app.settings.names.dead_letter_queue.clone();
    let chat = app.create_chat().await;
    let agent = app.create_agent(&["save_memory"]).await;
    let id = app
        .create_message(chat, Some(agent), "assistant", Some("Hello."), &[])
        .await;
    // Cut short: not JSON, but its message id is readable (a string, as some producers
    // write it).
    let body = format!(
        "{{\"type\": \"message.finalized\",  \"message\": {{\"id\": \"{id}\", \"content\": \"Hel"
    );
    app.publish_raw(body.as_bytes()).await;
    wait_for("the dead letter", T, || async {
        app.queue_len(&dead).await == 1
    })
    .await;

    let listed = listed(&app, &[]).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["message_id"], json!(id), "{listed:?}");
    let out = dead_letters(&app, "list", &[], "").await;
    let row = out.stdout.lines().nth(1).expect("a row");
    assert!(row.contains(&format!("  {id}  ")), "{}", out.stdout);

    let dl = listed[0]["id"].as_str().expect("an id").to_string();
    let out = dead_letters(&app, "show", &[&dl], "").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.ends_with(&format!(
            "body ({} bytes, as received):\n{body}\n",
            body.len()
        )),
        "{}",
        out.stdout
    );
    let (_, headers) = app.get_one(&dead, T).await.expect("the dead letter");
    assert_eq!(
        headers.inner().get("x-tcr-message-id"),
        Some(&AMQPValue::LongLongInt(id)),
        "{headers:?}"
    );
    app.cleanup().await;
}

/// Issue 32, item 4: the note about RabbitMQ 4.0-4.2 dropping messages returned 20 times
/// is written only on those versions, read from the broker itself (`connection.start`);
/// here, on a 3.x broker, a dead letter given back 12 times brings no note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rabbitmq_4_note_only_on_the_versions_it_is_about() {
    use clap::Parser;
    use toolcall_recovery::cmd::dead_letters::{self as dl, DeadLettersArgs};
    let app = dead_letters_without_a_worker(0).await;
    let n = &app.settings.names;
    let mut headers = FieldTable::default();
    headers.insert(
        "x-tcr-reason".into(),
        AMQPValue::LongString(LongString::from("missing_message")),
    );
    app.channel
        .basic_publish(
            &n.dead_letter_exchange,
            &n.dead_letter_queue,
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            b"{}",
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers),
        )
        .await
        .expect("publish")
        .await
        .expect("confirm");
    // Handed out and given back 10 times, as often reading the queue does.
    for _ in 0..10 {
        let taken = until(T, "the dead letter back in its queue", || async {
            app.channel
                .basic_get(&n.dead_letter_queue, BasicGetOptions { no_ack: false })
                .await
                .expect("basic_get")
        })
        .await;
        taken
            .delivery
            .acker
            .nack(lapin::options::BasicNackOptions {
                multiple: false,
                requeue: true,
            })
            .await
            .expect("nack");
    }
    until(T, "the dead letter back in its queue", || async {
        (app.queue_len(&n.dead_letter_queue).await == 1).then_some(())
    })
    .await;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: DeadLettersArgs,
    }
    let mut line = vec!["dead-letters".to_string(), "list".to_string()];
    line.extend(broker_args(&app));
    let args = P::try_parse_from(line).expect("flags").a;
    let dl::Action::List(list) = &args.action else {
        panic!("list")
    };
    let version = dl::broker_version(&list.broker)
        .await
        .expect("broker")
        .expect("the broker says its version");
    let applies = dl::drops_returned_messages(&version).expect("a version this reads");

    let out = dead_letters(&app, "list", &[], "").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.stderr.contains("RabbitMQ 4.0 to 4.2"),
        applies,
        "RabbitMQ {version}: {}",
        out.stderr
    );
    // The note's condition held: `list` saw the dead letter given back 10 times (and gave
    // it back once more).
    let (_, headers) = app
        .get_one(&n.dead_letter_queue, T)
        .await
        .expect("the dead letter");
    let returns = match headers.inner().get("x-delivery-count") {
        Some(AMQPValue::LongLongInt(n)) => *n,
        Some(AMQPValue::LongInt(n)) => i64::from(*n),
        other => panic!("x-delivery-count: {other:?}"),
    };
    assert!(returns >= 11, "{returns}");
    app.cleanup().await;
}
