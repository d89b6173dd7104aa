//! The server's addresses for the HTTP client, looked up once and kept for a while.
//!
//! ureq looks the server up before every request, even one that goes out on a kept-alive
//! connection, and its own resolver bounds the lookup by the request's timeout by starting a
//! thread for it: a thread born and ended every cycle, and wake-ups the agent does not need (an
//! IP address included). Here the addresses are kept for [`KEEP_ADDRESSES_FOR`]; the client
//! forgets them when a request fails to get through, so a server that moved is looked up again
//! at the next attempt. A lookup itself is still ureq's, with its timeout.
//!
//! `Resolver` is in ureq's `unversioned` module, which may change in a minor release: the
//! agent's `Cargo.toml` holds ureq to one minor version.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// How long looked-up addresses are used before the name is looked up again.
pub const KEEP_ADDRESSES_FOR: Duration = Duration::from_secs(300);

/// A resolver that keeps the last answer; clones share it, so the client can tell it to forget.
pub struct KeptResolver<R = DefaultResolver> {
    shared: Arc<Shared<R>>,
}

impl<R> Clone for KeptResolver<R> {
    fn clone(&self) -> Self {
        KeptResolver {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<R> {
    lookup: R,
    keep_for: Duration,
    kept: Mutex<Option<Kept>>,
}

struct Kept {
    /// Scheme and authority looked up (`https://tickscope.example:8443`).
    key: String,
    addresses: ResolvedSocketAddrs,
    looked_up: Instant,
}

impl KeptResolver {
    pub fn new() -> Self {
        KeptResolver::with_lookup(DefaultResolver::default(), KEEP_ADDRESSES_FOR)
    }
}

impl Default for KeptResolver {
    fn default() -> Self {
        KeptResolver::new()
    }
}

impl<R: Resolver> KeptResolver<R> {
    /// Looks names up with `lookup`, and uses an answer for `keep_for`.
    pub fn with_lookup(lookup: R, keep_for: Duration) -> Self {
        KeptResolver {
            shared: Arc::new(Shared {
                lookup,
                keep_for,
                kept: Mutex::new(None),
            }),
        }
    }

    /// The next request looks the name up again.
    pub fn forget(&self) {
        *self.kept() = None;
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        // Nothing can be left half-written by a panic here: use what is there.
        self.shared.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or_default(),
        uri.authority().map_or("", |a| a.as_str())
    )
}

impl<R: Resolver> Resolver for KeptResolver<R> {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let key = key(uri);
        let now = Instant::now();
        if let Some(kept) = self.kept().as_ref()
            && kept.key == key
            && now.duration_since(kept.looked_up) < self.shared.keep_for
        {
            return Ok(kept.addresses.clone());
        }
        // Looked up without holding the lock: the client sends one request at a time anyway.
        let addresses = self.shared.lookup.resolve(uri, config, timeout)?;
        *self.kept() = Some(Kept {
            key,
            addresses: addresses.clone(),
            looked_up: now,
        });
        Ok(addresses)
    }
}

impl<R> fmt::Debug for KeptResolver<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeptResolver")
            .field("keep_for", &self.shared.keep_for)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers every lookup with 192.0.2.<lookups so far>, and counts them.
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl Resolver for Counting {
        fn resolve(
            &self,
            _: &Uri,
            _: &Config,
            _: NextTimeout,
        ) -> Result<ResolvedSocketAddrs, ureq::Error> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            let mut addresses = self.empty();
            addresses.push(SocketAddr::from(([192, 0, 2, n as u8], 8080)));
            Ok(addresses)
        }
    }

    fn lookups(resolver: &KeptResolver<Counting>) -> usize {
        resolver.shared.lookup.0.load(Ordering::SeqCst)
    }

    fn resolve(resolver: &KeptResolver<Counting>, url: &str) -> SocketAddr {
        let uri: Uri = url.parse().unwrap();
        resolver
            .resolve(&uri, &Config::default(), NextTimeout::default())
            .unwrap()[0]
    }

    #[test]
    fn an_answer_is_used_until_it_is_forgotten_or_too_old_or_for_another_server() {
        let kept = KeptResolver::with_lookup(Counting::default(), KEEP_ADDRESSES_FOR);
        let url = "https://tickscope.example:8443/api/v1/reports";
        let first = resolve(&kept, url);
        assert_eq!(resolve(&kept, url), first);
        assert_eq!(
            resolve(&kept.clone(), url),
            first,
            "clones share the answer"
        );
        assert_eq!(lookups(&kept), 1, "one lookup for three requests");

        kept.forget();
        assert_ne!(resolve(&kept, url), first);
        assert_eq!(lookups(&kept), 2, "looked up again after a failure");

        resolve(&kept, "https://other.example:8443/api/v1/reports");
        assert_eq!(lookups(&kept), 3, "another server is looked up");

        let expired = KeptResolver::with_lookup(Counting::default(), Duration::ZERO);
        resolve(&expired, url);
        resolve(&expired, url);
        assert_eq!(
            lookups(&expired),
            2,
            "an answer older than keep_for is not used"
        );
    }
}
