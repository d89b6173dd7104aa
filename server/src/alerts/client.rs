//! The HTTP client notifications are posted with: ureq (blocking; called from
//! `spawn_blocking`) over rustls, with a timeout and, for a receiver with its own CA, that CA
//! instead of the built-in roots.
//!
//! A receiver's address is typed by an admin on the settings page, and whoever holds an admin
//! session could point it at what only the server can reach: its own loopback services, the
//! cloud's metadata service (169.254.169.254), link-local devices. So the addresses a name
//! resolves to are checked as the connection is made (not only as the form is saved: a name can
//! resolve elsewhere later), those [`Reach::refuses`] are never connected to unless an admin
//! allowed their network (`serve --allow-receiver-networks`), and redirects are not followed
//! (a receiver on an allowed address could send the client anywhere).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::tls::{Certificate, RootCerts, TlsConfig};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::domain::{Network, canonical, in_any};

/// Which addresses notifications may be sent to: any but the server's own and its link's
/// ([`Reach::refuses`]), and those in the networks an admin allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    pub allowed: Vec<Network>,
}

impl Reach {
    /// Why `ip` is not reached, if it is not: loopback, unspecified, link-local (the cloud
    /// metadata service among them), multicast and broadcast addresses, unless allowed.
    pub fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = canonical(ip);
        if in_any(&self.allowed, ip) {
            return None;
        }
        match ip {
            IpAddr::V4(v4) => internal_v4(v4),
            IpAddr::V6(v6) => internal_v6(v6),
        }
    }

    /// Checks a receiver's URL as it is saved: an address written into it must be reachable
    /// (a name is checked when it is resolved, at each notification).
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let uri: Uri = url
            .parse()
            .map_err(|_| format!("{url:?} is not an address"))?;
        let host = uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match host.parse::<IpAddr>() {
            Ok(ip) => match self.refuses(ip) {
                Some(why) => Err(refusal(ip, why)),
                None => Ok(()),
            },
            Err(_) if host.eq_ignore_ascii_case("localhost") => Err(refusal(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                "a loopback address",
            )),
            Err(_) => Ok(()),
        }
    }
}

fn refusal(ip: IpAddr, why: &str) -> String {
    format!(
        "{ip} is {why}, which notifications are not sent to unless an admin allows its network \
         (serve --allow-receiver-networks)"
    )
}

fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("the unspecified address")
    } else if ip.is_link_local() {
        Some("a link-local address (the cloud metadata service is one)")
    } else if ip.is_multicast() || ip.is_broadcast() {
        Some("a multicast or broadcast address")
    } else {
        None
    }
}

fn internal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    // AWS's metadata service over IPv6.
    const METADATA: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("the unspecified address")
    } else if ip.is_unicast_link_local() {
        Some("a link-local address")
    } else if ip == METADATA {
        Some("the cloud metadata service's address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else {
        None
    }
}

/// Resolves as ureq does, then keeps only the addresses [`Reach`] allows.
#[derive(Debug)]
struct Guarded {
    reach: Reach,
}

impl Resolver for Guarded {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut kept = self.empty();
        let mut refused = None;
        for addr in resolved.iter().copied() {
            match self.reach.refuses(addr.ip()) {
                None => kept.push(addr),
                Some(why) => refused = Some(refusal(addr.ip(), why)),
            }
        }
        match refused {
            Some(why) if kept.is_empty() => Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                why,
            ))),
            _ => Ok(kept),
        }
    }
}

/// How long one POST may take, connecting included, before it counts as failed.
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a POST failed, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostError {
    /// A network error, a timeout, a 5xx, 408 or 429: tried again later.
    Retry(String),
    /// Any other 4xx: the receiver refuses this request, and would refuse it again.
    Refused(String),
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostError::Retry(e) | PostError::Refused(e) => f.write_str(e),
        }
    }
}

/// An agent that trusts `ca_pem` (every certificate in it) if given, else the built-in roots,
/// connects only to what `reach` allows, and follows no redirect.
pub fn agent(
    ca_pem: Option<&[u8]>,
    timeout: Duration,
    reach: &Reach,
) -> Result<ureq::Agent, String> {
    let mut tls = TlsConfig::builder();
    if let Some(pem) = ca_pem {
        let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the CA certificate cannot be read: {e}"))?;
        if certs.is_empty() {
            return Err("the CA file holds no PEM certificate".into());
        }
        tls = tls.root_certs(RootCerts::new_with_certs(&certs));
    }
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        // A redirect is answered as it is (3xx: a failure, retried), never followed.
        .max_redirects(0)
        .user_agent(concat!("tickscope-server/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls.build())
        .build();
    Ok(ureq::Agent::with_parts(
        config,
        DefaultConnector::default(),
        Guarded {
            reach: reach.clone(),
        },
    ))
}

/// One JSON POST, with `authorization` as the Authorization header if given.
pub fn post_json(
    agent: &ureq::Agent,
    url: &str,
    authorization: Option<&str>,
    body: &str,
) -> Result<(), PostError> {
    let mut request = agent.post(url).header("Content-Type", "application/json");
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    let response = request
        .send(body)
        .map_err(|e| PostError::Retry(e.to_string()))?;
    let status = response.status().as_u16();
    match status {
        200..=299 => Ok(()),
        s if retryable(s) => Err(PostError::Retry(format!("HTTP {s}"))),
        s => Err(PostError::Refused(format!("HTTP {s}"))),
    }
}

/// Whether a failed answer with this status may succeed if sent again (as Alertmanager's
/// webhook notifier and Prometheus's notifier decide): not a 4xx, except 408 and 429.
pub fn retryable(status: u16) -> bool {
    !(400..500).contains(&status) || status == 408 || status == 429
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_some_failures_are_retried() {
        let cases = [
            (400, false),
            (401, false),
            (404, false),
            (408, true),
            (413, false),
            (429, true),
            (500, true),
            (503, true),
            (302, true),
        ];
        for (status, expected) in cases {
            assert_eq!(retryable(status), expected, "{status}");
        }
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        assert!(agent(Some(b"not a pem"), POST_TIMEOUT, &Reach::default()).is_err());
        assert!(agent(None, POST_TIMEOUT, &Reach::default()).is_ok());
    }

    #[test]
    fn the_servers_own_and_its_links_addresses_are_not_reached_unless_allowed() {
        let none = Reach::default();
        let loopback = Reach {
            allowed: vec!["127.0.0.0/8".parse().unwrap()],
        };
        // (address, refused by default, refused with loopback allowed)
        let cases = [
            ("127.0.0.1", true, false),
            ("127.1.2.3", true, false),
            ("::1", true, true),
            ("::ffff:127.0.0.1", true, false),
            ("0.0.0.0", true, true),
            ("169.254.169.254", true, true),
            ("fe80::1", true, true),
            ("fd00:ec2::254", true, true),
            ("224.0.0.1", true, true),
            ("255.255.255.255", true, true),
            ("10.1.2.3", false, false),
            ("192.168.1.5", false, false),
            ("203.0.113.9", false, false),
            ("2001:db8::5", false, false),
        ];
        for (ip, by_default, with_loopback) in cases {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(none.refuses(ip).is_some(), by_default, "{ip}");
            assert_eq!(
                loopback.refuses(ip).is_some(),
                with_loopback,
                "{ip} (loopback allowed)"
            );
        }
        for (url, ok) in [
            ("http://127.0.0.1:9093/", false),
            ("http://localhost:9093/", false),
            ("http://[::1]:9093/", false),
            ("http://169.254.169.254/latest/meta-data/", false),
            ("https://alerts.example.com/hook", true),
            ("http://10.0.0.7:9093", true),
        ] {
            assert_eq!(none.check_url(url).is_ok(), ok, "{url}");
        }
        assert!(loopback.check_url("http://127.0.0.1:9093/").is_ok());
    }
}
