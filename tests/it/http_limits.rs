//! The HTTP port holds against slow and idle clients: a client that trickles its headers
//! is cut off after the header-read timeout, an idle keep-alive connection is closed after
//! the idle timeout, and at most `--http-max-connections` are open at once (the next one
//! waits until a slot frees, then is served).

use crate::harness::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the server closes the connection (or `limit` passes); returns the bytes
/// read and whether it was closed.
async fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

async fn started_with(header: u64, idle: u64, connections: usize) -> (TestApp, SocketAddr) {
    let mut app = TestApp::prepare().await;
    app.settings.http_header_timeout_secs = header;
    app.settings.http_idle_timeout_secs = idle;
    app.settings.http_max_connections = connections;
    app.start().await;
    let addr = app.http_addr.expect("started");
    (app, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_headers_is_cut_off() {
    let (app, addr) = started_with(1, 30, 64).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let t = Instant::now();
    let (got, closed) = read_until_closed(&mut s, Duration::from_secs(10)).await;
    assert!(closed, "still open after 10 s");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(!String::from_utf8_lossy(&got).contains("ok"), "not served");
    // A client that sends nothing at all is cut off the same way.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (_, closed) = read_until_closed(&mut silent, Duration::from_secs(10)).await;
    assert!(closed, "a silent connection stays open");
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let (app, addr) = started_with(30, 1, 64).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (got, closed) = read_until_closed(&mut s, Duration::from_secs(10)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(closed, "the idle keep-alive connection stays open");
    app.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_wait_for_a_free_slot() {
    let (app, addr) = started_with(2, 30, 2).await;
    // Two clients hold both slots with unfinished headers.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    // While the two hold the slots, the third is not served...
    let (early, _) = read_until_closed(&mut third, Duration::from_millis(800)).await;
    assert!(early.is_empty(), "served past the limit");
    // ... and is once the header-read timeout has freed them.
    let (late, closed) = read_until_closed(&mut third, Duration::from_secs(15)).await;
    let text = String::from_utf8_lossy(&late);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(closed);
    drop(held);
    app.cleanup().await;
}
