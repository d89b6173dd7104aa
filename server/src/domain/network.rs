//! Address blocks (`10.0.0.0/8`, `2001:db8::/32`): the load balancers trusted to say who their
//! clients are, and the addresses notifications may be sent to.

use std::net::IpAddr;
use std::str::FromStr;

/// An address block, `10.0.0.0/8` or `2001:db8::/32` (a bare address is a block of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.address, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Network, String> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let written: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an address or address/prefix"))?;
        let most: u8 = if written.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => most,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= most)
                .ok_or_else(|| format!("{text:?}: the prefix must be 0 to {most}"))?,
        };
        let address = canonical(written);
        // A block of IPv4 addresses written mapped into IPv6 is that IPv4 block.
        let prefix = if address.is_ipv4() && written.is_ipv6() {
            prefix.checked_sub(96).ok_or_else(|| {
                format!("{text:?}: an IPv4-mapped block needs a prefix of 96 or more")
            })?
        } else {
            prefix
        };
        Ok(Network { address, prefix })
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

/// An IPv4 address mapped into IPv6 (`::ffff:10.0.0.1`, as a dual-stack socket reports it) is
/// the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `ip` is in any of `networks`.
pub fn in_any(networks: &[Network], ip: IpAddr) -> bool {
    networks.iter().any(|n| n.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_hold_their_addresses() {
        let cases = [
            ("10.0.0.0/8", "10.255.1.2", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1", "127.0.0.2", false),
            ("0.0.0.0/0", "8.8.8.8", true),
            ("2001:db8::/32", "2001:db8:1::5", true),
            ("2001:db8::/32", "2001:db9::5", false),
            ("::/0", "10.0.0.1", false),
            // A mapped IPv4 address is the IPv4 address, on either side.
            ("10.0.0.0/8", "::ffff:10.1.2.3", true),
            ("::ffff:10.0.0.0/104", "10.1.2.3", true),
        ];
        for (net, ip, expected) in cases {
            let net: Network = net.parse().unwrap();
            assert_eq!(net.contains(ip.parse().unwrap()), expected, "{net} {ip}");
        }
        for bad in [
            "",
            "10.0.0.0/33",
            "fe80::/129",
            "host.example",
            "10.0.0.0/x",
        ] {
            assert!(bad.parse::<Network>().is_err(), "{bad:?}");
        }
    }
}
