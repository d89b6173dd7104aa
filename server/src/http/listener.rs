//! Accepting connections: a cap on how many are open, and timeouts that close the ones a client
//! leaves unfinished, so that no client can hold what others need.
//!
//! `axum::serve` has neither: a connection that never finishes its request headers, or sits idle
//! between requests, stays open forever, and enough of them exhaust the process's open files,
//! after which `accept` fails for everyone. Here each connection takes a slot (the listener stops
//! accepting while all are taken, so the kernel's backlog holds newcomers instead of `accept`
//! failing), and hyper closes a connection whose request headers do not arrive in time, counted
//! from when it opened or from its previous response (so it is the idle keep-alive timeout too),
//! and a connection whose client stops reading what it is sent is closed once writing to it has
//! made no progress for a while.
//! Bodies are the admission middleware's concern (`super::admission`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;

/// What one listener allows each client.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// A request's headers must arrive within this long of the connection opening or of the
    /// previous response; otherwise the connection is closed.
    pub header_read_timeout: Duration,
    /// A TLS client must finish its handshake within this long.
    pub tls_handshake_timeout: Duration,
    /// A connection is closed when writing to it makes no progress for this long: a client that
    /// stops reading (or pipelines requests and never reads the answers) cannot hold its slot.
    pub write_stall_timeout: Duration,
}

/// Request headers larger than this are answered 431: far above any browser's or agent's, and
/// it bounds what each open connection may make the server hold.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// In-flight requests get this long to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown` resolves, then lets the
/// requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut accept_failures = AcceptFailures::default();
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of file descriptors or memory, or a connection reset before it was
                    // accepted: wait a little rather than spin, and keep serving.
                    accept_failures.log(&e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_stall_timeout));
        let stream = Box::pin(stream);
        let watcher = graceful.watcher();
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                None => serve_connection(stream, app, limits, watcher).await,
                Some(acceptor) => {
                    let handshake = acceptor.accept(stream);
                    match tokio::time::timeout(limits.tls_handshake_timeout, handshake).await {
                        Ok(Ok(stream)) => serve_connection(stream, app, limits, watcher).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still in flight {} s after the shutdown signal were cut off",
            SHUTDOWN_GRACE.as_secs()
        );
    }
}

async fn serve_connection<S>(
    stream: S,
    app: Router,
    limits: ConnectionLimits,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    if let Err(e) = watcher.watch(connection).await {
        // A client that went away or timed out: its own business, not worth more than debug.
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Logs failed `accept`s at most once a minute: when file descriptors run out they fail
/// thousands of times a second.
#[derive(Default)]
struct AcceptFailures {
    last_logged: Option<std::time::Instant>,
    since_logged: u64,
}

impl AcceptFailures {
    fn log(&mut self, e: &std::io::Error) {
        self.since_logged += 1;
        let now = std::time::Instant::now();
        if self
            .last_logged
            .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(60))
        {
            tracing::warn!(error = %e, failures = self.since_logged, "cannot accept connections");
            self.last_logged = Some(now);
            self.since_logged = 0;
        }
    }
}
