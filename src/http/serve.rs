//! Serving a router on a listener with the limits a port open to a cluster needs, which
//! `axum::serve` does not set: a client must send its request headers within
//! [`HttpLimits::header_read`] of connecting (slowloris), a keep-alive connection with no bytes
//! either way for [`HttpLimits::idle`] is closed, and at most [`HttpLimits::connections`] are open
//! at once (further ones wait in the listen backlog until one closes). HTTP/1.1 only: the
//! clients are Prometheus, probes and the app's backend.
//!
//! May depend on: `settings` (the limits), `shutdown`, `axum`, `hyper`, `hyper-util`, `tokio`.

use crate::settings::HttpLimits;
use crate::shutdown::Shutdown;
use axum::extract::ConnectInfo;
use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long stopping waits for requests being answered.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app` until `shutdown`, then stops accepting and lets open connections finish
/// their request (for a few seconds at most).
pub async fn serve(listener: TcpListener, app: Router, limits: HttpLimits, mut shutdown: Shutdown) {
    let permits = Arc::new(Semaphore::new(limits.connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = shutdown.wait() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.wait() => break,
        };
        while connections.try_join_next().is_some() {}
        let app = app.clone();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            // The peer's address, for the handlers that log it (a refused admin token).
            let app = app.layer(Extension(ConnectInfo(peer)));
            serve_connection(stream, app, limits, shutdown).await;
            drop(permit);
        });
    }
    // Idle connections closed at once on shutdown; a request being answered (an admin
    // recovery, at most its own time limit) gets a little while.
    let _ = tokio::time::timeout(limits.idle.min(DRAIN), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}

async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: HttpLimits,
    mut shutdown: Shutdown,
) {
    let started = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Watched {
        inner: stream,
        started,
        last: last.clone(),
    });
    let service = TowerToHyperService::new(app);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        let idle_until =
            started + Duration::from_millis(last.load(Ordering::Relaxed)) + limits.idle;
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(idle_until), if !closing => {
                let quiet = started.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                if quiet >= limits.idle {
                    // Closes at once when idle; after the response when one is being made.
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
            () = shutdown.wait(), if !closing => {
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// A stream that records when bytes last moved, in milliseconds since `started`.
struct Watched {
    inner: TcpStream,
    started: Instant,
    last: Arc<AtomicU64>,
}

impl Watched {
    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
