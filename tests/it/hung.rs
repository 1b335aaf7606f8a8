//! A broker node that hangs instead of dying (frozen, a half-open connection): every step
//! of opening a session is bounded, a session on a node that stopped answering is given
//! up after two heartbeats, and the worker consumes again through a node that answers.
//! The node is stood in for by a TCP listener that accepts and never answers, and by a
//! proxy in front of the real RabbitMQ that can freeze its connections.

use crate::harness::*;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolcall_recovery::amqp::{self, step, Topology};
use toolcall_recovery::error::Error;
use toolcall_recovery::settings::{SecretUrl, Settings};

/// A proxy to the test broker whose connections can be frozen: a frozen connection reads
/// what either side sends and passes nothing on, as a node stopped with SIGSTOP (whose
/// kernel still takes the bytes) would. Connections made after the freeze pass (a Service
/// that routes to a healthy node), unless `new_too`.
struct Proxy {
    addr: SocketAddr,
    /// The epoch of the connections now frozen: a connection is frozen when its epoch is
    /// below this.
    frozen_below: Arc<std::sync::atomic::AtomicU64>,
    epoch: Arc<std::sync::atomic::AtomicU64>,
    new_too: Arc<AtomicBool>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let proxy = Proxy {
            addr,
            frozen_below: Arc::default(),
            epoch: Arc::default(),
            new_too: Arc::default(),
        };
        let (frozen_below, epoch, new_too) = (
            proxy.frozen_below.clone(),
            proxy.epoch.clone(),
            proxy.new_too.clone(),
        );
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mine = epoch.load(Ordering::SeqCst);
                if new_too.load(Ordering::SeqCst) {
                    // Accepted, never answered.
                    tokio::spawn(async move {
                        let mut client = client;
                        let mut sink = [0u8; 4096];
                        while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
                    });
                    continue;
                }
                let Ok(upstream) = TcpStream::connect("127.0.0.1:5672").await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (ur, uw) = upstream.into_split();
                tokio::spawn(pipe(cr, uw, mine, frozen_below.clone()));
                tokio::spawn(pipe(ur, cw, mine, frozen_below.clone()));
            }
        });
        proxy
    }

    fn url(&self) -> SecretUrl {
        SecretUrl::new(format!("amqp://guest:guest@{}/%2f", self.addr))
    }

    /// Freezes every connection open now; `new_too`: and every one made from now on.
    fn freeze(&self, new_too: bool) {
        let e = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.frozen_below.store(e, Ordering::SeqCst);
        self.new_too.store(new_too, Ordering::SeqCst);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    epoch: u64,
    frozen_below: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if epoch < frozen_below.load(Ordering::SeqCst) {
            continue; // frozen: swallowed
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The test's settings pointed at `url`, with a step timeout of `step_secs`.
fn pointed_at(app: &TestApp, url: SecretUrl, step_secs: u64) -> Settings {
    let mut s = app.settings.clone();
    s.publish.amqp_url = url;
    s.publish.broker_step_timeout_secs = step_secs;
    s
}

fn timed_out_step(r: Result<impl Sized, Error>) -> Option<&'static str> {
    match r {
        Err(Error::Timeout(step)) => Some(step),
        _ => None,
    }
}

/// Opening a session on a peer that accepts the connection and never answers (a frozen
/// node, or a Service still routing to one) gave up only after the worker's 30 s; now the
/// connect step gives up at the step timeout, says so, and cuts the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_against_a_peer_that_never_answers_gives_up_within_the_step_timeout() {
    let app = TestApp::prepare().await;
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = SecretUrl::new(format!(
        "amqp://guest:guest@{}/%2f",
        silent.local_addr().expect("addr")
    ));
    let settings = pointed_at(&app, url, 1);
    let peer = tokio::spawn(async move {
        let (mut s, _) = silent.accept().await.expect("accept");
        // Read what the client sends until it gives the socket up.
        let mut sink = [0u8; 1024];
        while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
    });
    let started = Instant::now();
    let opened = tokio::time::timeout(
        Duration::from_secs(20),
        amqp::open(&settings, 8, &Topology::default()),
    )
    .await
    .expect("the open attempt returns by itself");
    let took = started.elapsed();
    assert_eq!(timed_out_step(opened), Some(step::CONNECT));
    assert!(took < Duration::from_secs(4), "gave up after {took:?}");
    let msg = Error::Timeout(step::CONNECT).to_string();
    assert!(msg.contains("connect"), "{msg}");
    // The socket was cut: the peer sees the end of the stream.
    tokio::time::timeout(Duration::from_secs(5), peer)
        .await
        .expect("the connection was given up, not left open")
        .expect("peer");
    app.cleanup().await;
}

/// A node that freezes after the connection was opened: the next step (here the qos of a
/// new consumer, as a window change does) times out, names the step and breaks the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_on_a_connection_that_stopped_answering_times_out_and_says_which() {
    let app = TestApp::prepare().await;
    let proxy = Proxy::start().await;
    let settings = pointed_at(&app, proxy.url(), 1);
    let (session, _consumer) = amqp::open(&settings, 8, &Topology::default())
        .await
        .expect("opens through the proxy");
    assert!(session.is_open());
    proxy.freeze(true);
    let started = Instant::now();
    let consumed = tokio::time::timeout(Duration::from_secs(20), session.consume(16))
        .await
        .expect("the step returns by itself");
    assert_eq!(timed_out_step(consumed), Some(step::QOS));
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(!session.is_open(), "a timed-out step breaks the session");
    // A reopen against the frozen node gives up at its first step.
    let reopened = amqp::open(&settings, 8, &Topology::default()).await;
    assert_eq!(timed_out_step(reopened), Some(step::CONNECT));
    drop(session);
    app.cleanup().await;
}

/// A reopen only checks the topology the first session declared (passive declarations:
/// no locks a frozen node could hold). When the check finds the queue gone, the next
/// attempt declares it all again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_checks_the_topology_and_declares_it_again_when_it_is_gone() {
    let app = TestApp::prepare().await;
    let topology = Topology::default();
    let (first, consumer) = amqp::open(&app.settings, 8, &topology)
        .await
        .expect("the first session declares");
    drop(consumer);
    first.close().await;
    let queue = app.settings.names.queue.clone();
    app.channel
        .queue_delete(&queue, lapin::options::QueueDeleteOptions::default())
        .await
        .expect("delete");
    // The check finds the queue gone: 404, and no queue was created by it.
    match amqp::open(&app.settings, 8, &topology).await {
        Err(Error::Broker(lapin::Error::ProtocolError(e))) => assert_eq!(e.get_id(), 404),
        Err(e) => panic!("expected NOT_FOUND, got {e}"),
        Ok(_) => panic!("a passive check created or found the deleted queue"),
    }
    // The next attempt declares again and consumes.
    let (again, _consumer) = amqp::open(&app.settings, 8, &topology)
        .await
        .expect("declared again");
    assert!(again.is_open());
    assert_eq!(app.queue_len(&queue).await, 0);
    again.close().await;
    drop(again);
    app.cleanup().await;
}

/// The worker's node freezes under it: the heartbeat gives the session up, the reopen goes
/// to a node that answers, and every event is moderated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_is_given_up_and_the_worker_consumes_again_through_another() {
    let mut app = TestApp::prepare().await;
    let proxy = Proxy::start().await;
    app.settings.publish.amqp_url = proxy.url();
    app.settings.publish.amqp_heartbeat_secs = 1;
    app.settings.publish.broker_step_timeout_secs = 1;
    app.start().await;
    let mut moderation = app.consumer(&app.moderation_queue).await;
    let (events, memories) = app.mixed_events(20).await;
    let mut seen = HashSet::new();
    for e in &events[..10] {
        app.publish_event(e).await;
    }
    app.wait_moderation_ids(&mut moderation, &mut seen, 10, Duration::from_secs(30))
        .await;
    // Frozen: what the worker holds open now gets no answer; new connections pass.
    proxy.freeze(false);
    for e in &events[10..] {
        app.publish_event(e).await;
    }
    app.wait_moderation_ids(&mut moderation, &mut seen, 20, Duration::from_secs(60))
        .await;
    assert!(
        app.metric("toolcall_recovery_connection_recoveries_total{dependency=\"broker\"}")
            .await
            >= 1.0
    );
    app.assert_exactly_once(memories).await;
    app.cleanup().await;
}
