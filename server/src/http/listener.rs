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
//! One client address holds at most its share of the connections (`serve
//! --max-connections-per-address`): the ones over it are closed at once, not queued, so one
//! client cannot take the connections everyone else needs. Behind a load balancer (`serve
//! --trusted-proxies`), its connections are not counted as one client's: the PROXY protocol
//! names the client of each (`serve --proxy-protocol`), or `X-Forwarded-For` does per request
//! (`super::client`).
//! Bodies are the admission middleware's concern (`super::admission`).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
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

use super::client::{ConnectedFrom, Network, canonical, in_any};
use super::proxy_protocol::{self, Prefixed, Said};
use crate::metrics::Metrics;

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
    /// Connections one client address may have open at once.
    pub per_address: usize,
    /// Connections one client address may open per second (in bursts of twice that).
    pub new_per_address_per_second: u32,
}

/// Who connects through whom: the load balancers trusted to say who their clients are, and
/// whether they say it with the PROXY protocol.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Proxies {
    /// Load balancers and reverse proxies trusted to say who their clients are (addresses or
    /// blocks, comma-separated: 10.0.0.5,192.0.2.0/24): their connections are not counted as
    /// one client's, and each request's client is read from the PROXY protocol
    /// (--proxy-protocol) or else from X-Forwarded-For. See docs/reverse-proxy.md.
    #[arg(
        long = "trusted-proxies",
        env = "TICKSCOPE_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_name = "ADDRESS[/PREFIX]"
    )]
    pub trusted: Vec<Network>,
    /// Connections from --trusted-proxies start with a PROXY protocol header (v1 or v2, as
    /// HAProxy's `send-proxy`), which names the client; required from them, never read from
    /// anyone else.
    #[arg(long = "proxy-protocol", env = "TICKSCOPE_PROXY_PROTOCOL")]
    pub proxy_protocol: bool,
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
    proxies: Proxies,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let per_address = Arc::new(AddressSlots::new(
        limits.per_address,
        limits.new_per_address_per_second,
    ));
    let proxies = Arc::new(proxies);
    let graceful = GracefulShutdown::new();
    let mut accept_failures = AcceptFailures::default();
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, canonical(peer.ip())),
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
        let behind_proxy = in_any(&proxies.trusted, peer);
        // A direct client over its share is closed at once, before anything is read from it.
        let address_slot = if behind_proxy {
            None
        } else {
            match per_address.take(peer) {
                Some(slot) => Some(slot),
                None => {
                    metrics.connection_refused();
                    continue;
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_stall_timeout));
        let mut stream = Box::pin(stream);
        let watcher = graceful.watcher();
        let app = app.clone();
        let tls = tls.clone();
        let (per_address, proxies, metrics) =
            (per_address.clone(), proxies.clone(), metrics.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let mut from = ConnectedFrom {
                peer,
                proxied_for: None,
            };
            let mut prefix = Vec::new();
            let mut _address_slot = address_slot;
            if behind_proxy && proxies.proxy_protocol {
                let header = proxy_protocol::read_header(&mut stream);
                match tokio::time::timeout(limits.header_read_timeout, header).await {
                    Ok(Ok((Said::Client(client), rest))) => {
                        let client = canonical(client);
                        match per_address.take(client) {
                            Some(slot) => _address_slot = Some(slot),
                            None => {
                                metrics.connection_refused();
                                return;
                            }
                        }
                        from.proxied_for = Some(client);
                        prefix = rest;
                    }
                    Ok(Ok((Said::Itself, rest))) => prefix = rest,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, proxy = %peer, "no PROXY header");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(proxy = %peer, "no PROXY header in time");
                        return;
                    }
                }
            }
            let stream = Prefixed::new(prefix, stream);
            match tls {
                None => serve_connection(stream, app, from, limits, watcher).await,
                Some(acceptor) => {
                    let handshake = acceptor.accept(stream);
                    match tokio::time::timeout(limits.tls_handshake_timeout, handshake).await {
                        Ok(Ok(stream)) => {
                            serve_connection(stream, app, from, limits, watcher).await
                        }
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

/// Connections open per client address, and how fast each opens new ones.
struct AddressSlots {
    open: Mutex<HashMap<IpAddr, usize>>,
    cap: usize,
    opened: governor::DefaultKeyedRateLimiter<IpAddr>,
    /// Connections taken since the rate limiter last forgot the addresses it no longer needs.
    since_pruned: std::sync::atomic::AtomicUsize,
}

/// How many connections are taken between two prunings of the rate limiter's addresses.
const PRUNE_EVERY: usize = 10_000;

impl AddressSlots {
    fn new(cap: usize, per_second: u32) -> AddressSlots {
        let per_second = std::num::NonZeroU32::new(per_second).unwrap_or(std::num::NonZeroU32::MIN);
        let burst = per_second.saturating_mul(std::num::NonZeroU32::new(2).unwrap_or(per_second));
        AddressSlots {
            open: Mutex::new(HashMap::new()),
            cap,
            opened: governor::RateLimiter::keyed(
                governor::Quota::per_second(per_second).allow_burst(burst),
            ),
            since_pruned: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// One more connection from `address`, if it opens fewer than its rate and has fewer than
    /// the cap open.
    fn take(self: &Arc<Self>, address: IpAddr) -> Option<AddressSlot> {
        use std::sync::atomic::Ordering;
        if self.since_pruned.fetch_add(1, Ordering::Relaxed) >= PRUNE_EVERY {
            self.since_pruned.store(0, Ordering::Relaxed);
            self.opened.retain_recent();
        }
        self.opened.check_key(&address).ok()?;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(address).or_default();
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            slots: self.clone(),
            address,
        })
    }
}

/// One open connection of a client address, given back when it closes.
struct AddressSlot {
    slots: Arc<AddressSlots>,
    address: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

async fn serve_connection<S>(
    stream: S,
    app: Router,
    from: ConnectedFrom,
    limits: ConnectionLimits,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Each request says where its connection came from, for the admission's budgets.
    let app = tower::util::MapRequest::new(
        app,
        move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(from);
            request
        },
    );
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
