//! What several servers on one database tell each other, whatever the database: which hosts or
//! settings another server stored ([`ClusterChange`], carried as text by PostgreSQL's
//! `NOTIFY`), and what a listener hears. The handles on the database's side (the lease's
//! session, the listener) are `store.rs`'s `LeaseSession` and `ChangeListener`. SQLite serves
//! one server: it has neither, and that server always holds the lease.

use std::fmt;

use crate::domain::HostId;

/// Who wrote a change: a random number each [`super::Db`] handle draws when it opens, so that a
/// server skips what it announced itself (it applied it already).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin(pub u64);

impl Origin {
    pub fn random() -> Origin {
        let mut bytes = [0_u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            // Without the OS's randomness (no kernel source), the process id and the clock's
            // nanoseconds: two servers whose draws both failed must still differ, or each
            // would skip the other's changes as its own.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            return Origin(nanos ^ (u64::from(std::process::id()) << 32));
        }
        Origin(u64::from_le_bytes(bytes))
    }
}

/// Something one server stored that the others hold in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterChange {
    /// Reports or facts of these hosts were stored: read their guests again.
    Hosts(Vec<HostId>),
    /// A setting was saved: read it again.
    Setting(String),
    /// Nothing: a server hears its own (or another's) to know its listener is alive.
    Ping,
}

/// A change, and who made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNotice {
    pub origin: Origin,
    pub change: ClusterChange,
}

/// The notification channel (one for every kind of change: they are few and small).
pub const CHANNEL: &str = "tickscope_changes";
/// Most host ids in one notification: PostgreSQL takes payloads under 8,000 bytes, and an id
/// is at most 20 digits and a comma.
pub const HOSTS_PER_NOTICE: usize = 300;
const VERSION: &str = "v1";

impl fmt::Display for ClusterNotice {
    /// `v1 <origin, hex> hosts 1,2,3` or `v1 <origin, hex> setting <name>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{VERSION} {:016x} ", self.origin.0)?;
        match &self.change {
            ClusterChange::Hosts(hosts) => {
                f.write_str("hosts ")?;
                for (i, host) in hosts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}", host.0)?;
                }
                Ok(())
            }
            ClusterChange::Setting(name) => write!(f, "setting {name}"),
            ClusterChange::Ping => f.write_str("ping"),
        }
    }
}

impl std::str::FromStr for ClusterNotice {
    type Err = String;

    /// Reads a notification's payload strictly: anything else on the channel (another
    /// version, anyone with the role calling `pg_notify`) is an error the listener logs.
    fn from_str(payload: &str) -> Result<ClusterNotice, String> {
        let bad = || format!("not a tickscope change: {payload:?}");
        let mut parts = payload.splitn(4, ' ');
        let (Some(VERSION), Some(origin), Some(kind)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let origin = Origin(u64::from_str_radix(origin, 16).map_err(|_| bad())?);
        let change = match (kind, parts.next()) {
            ("hosts", Some(rest)) => ClusterChange::Hosts(
                rest.split(',')
                    .map(|id| id.parse().map(HostId).map_err(|_| bad()))
                    .collect::<Result<_, _>>()?,
            ),
            ("setting", Some(name)) if !name.is_empty() => ClusterChange::Setting(name.to_string()),
            ("ping", None) => ClusterChange::Ping,
            _ => return Err(bad()),
        };
        Ok(ClusterNotice { origin, change })
    }
}

/// What the listener heard.
#[derive(Debug)]
pub enum Heard {
    /// A change another server stored, or a ping (anyone's, this server's own too: the
    /// listener's connection is alive).
    Notice(ClusterNotice),
    /// The connection was lost and made again: whatever was announced meanwhile was missed.
    Reconnected,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_read_back_as_written_and_nothing_else_reads() {
        let origin = Origin(0xdead_beef_0000_0001);
        for change in [
            ClusterChange::Hosts(vec![HostId(1)]),
            ClusterChange::Hosts(vec![HostId(7), HostId(9_223_372_036_854_775_807)]),
            ClusterChange::Setting("cost_model".into()),
            ClusterChange::Ping,
        ] {
            let notice = ClusterNotice { origin, change };
            let text = notice.to_string();
            assert!(text.len() < 8000, "{text}");
            assert_eq!(text.parse::<ClusterNotice>(), Ok(notice), "{text}");
        }
        assert_eq!(
            ClusterNotice {
                origin,
                change: ClusterChange::Hosts(vec![HostId(1), HostId(2)])
            }
            .to_string(),
            "v1 deadbeef00000001 hosts 1,2"
        );
        for bad in [
            "",
            "v1",
            "v2 00000000000000ff hosts 1",
            "v1 zz hosts 1",
            "v1 ff hosts",
            "v1 ff hosts ",
            "v1 ff hosts 1,,2",
            "v1 ff hosts 1;DROP",
            "v1 ff setting ",
            "v1 ff setting",
            "v1 ff ping now",
            "v1 ff flush all",
        ] {
            assert!(bad.parse::<ClusterNotice>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_most_hosts_one_notice_carries_fit_in_a_payload() {
        let notice = ClusterNotice {
            origin: Origin(u64::MAX),
            change: ClusterChange::Hosts(vec![HostId(i64::MIN); HOSTS_PER_NOTICE]),
        };
        assert!(notice.to_string().len() < 8000);
    }
}
