//! Where a request comes from: the address of the client, which requests without a credential
//! and the connection cap are counted by.
//!
//! Directly connected, it is the connection's peer. Behind a load balancer every connection comes
//! from the balancer, so a cap per address would cap the balancer: the balancer's addresses are
//! given as trusted proxies (`serve --trusted-proxies`), and for a connection from one of them the
//! client is said either by the PROXY protocol at the start of the connection (`serve
//! --proxy-protocol`, see `super::proxy_protocol`), or per request by `X-Forwarded-For`, read from
//! the right: the first address that is not a trusted proxy is the client. An untrusted peer's
//! `X-Forwarded-For` is ignored (anyone can send one).

use std::net::IpAddr;

use axum::http::HeaderMap;

pub use crate::domain::{Network, canonical, in_any};

/// Where a connection comes from, as the listener saw it (and the PROXY protocol said): put in
/// each request's extensions. Absent for requests that did not come through the listener (the
/// tests' in-process calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectedFrom {
    /// The connection's peer (the balancer, behind one).
    pub peer: IpAddr,
    /// The client, when the PROXY protocol said it.
    pub proxied_for: Option<IpAddr>,
}

/// The client of a request that came on a connection from `from`: the PROXY protocol's word,
/// else for a trusted proxy the `X-Forwarded-For` address nearest to it that is not a trusted
/// proxy itself, else the peer.
pub fn client_address(from: ConnectedFrom, headers: &HeaderMap, trusted: &[Network]) -> IpAddr {
    if let Some(client) = from.proxied_for {
        return canonical(client);
    }
    let peer = canonical(from.peer);
    if !in_any(trusted, peer) {
        return peer;
    }
    let mut client = peer;
    // Every X-Forwarded-For header, in order, read from the right: each proxy appends the
    // address it was reached from.
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    for hop in hops.iter().rev() {
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) => {
                client = canonical(ip);
                if !in_any(trusted, client) {
                    break;
                }
            }
            // A hop that is not an address cannot be trusted further.
            Err(_) => break,
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<Network> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn the_client_is_the_first_untrusted_hop_behind_a_trusted_proxy() {
        let trusted = nets(&["10.0.0.0/8"]);
        let from = |peer: &str| ConnectedFrom {
            peer: peer.parse().unwrap(),
            proxied_for: None,
        };
        let cases: [(&str, &[&str], &str); 7] = [
            // Not behind a trusted proxy: its own word about a client is ignored.
            ("203.0.113.9", &["198.51.100.1"], "203.0.113.9"),
            ("10.0.0.5", &[], "10.0.0.5"),
            ("10.0.0.5", &["198.51.100.1"], "198.51.100.1"),
            // The client prepended a made-up hop: the balancer's own entry is the rightmost.
            ("10.0.0.5", &["1.2.3.4, 198.51.100.1"], "198.51.100.1"),
            // Two trusted proxies in a row.
            ("10.0.0.5", &["198.51.100.1, 10.0.0.6"], "198.51.100.1"),
            ("10.0.0.5", &["198.51.100.1", "10.0.0.6"], "198.51.100.1"),
            // A hop that is not an address stops the walk at the last trusted one.
            ("10.0.0.5", &["junk, 10.0.0.6"], "10.0.0.6"),
        ];
        for (peer, forwarded, expected) in cases {
            let mut headers = HeaderMap::new();
            for value in forwarded {
                headers.append("x-forwarded-for", value.parse().unwrap());
            }
            assert_eq!(
                client_address(from(peer), &headers, &trusted),
                expected.parse::<IpAddr>().unwrap(),
                "{peer} {forwarded:?}"
            );
        }
        let proxied = ConnectedFrom {
            peer: "10.0.0.5".parse().unwrap(),
            proxied_for: Some("198.51.100.7".parse().unwrap()),
        };
        assert_eq!(
            client_address(proxied, &HeaderMap::new(), &trusted),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
    }
}
