//! qemu-guest-agent over its virtio-serial socket, or through libvirt's guest-info API (`virsh
//! guestinfo --os`) for the VMs libvirt manages, since libvirt holds their agent's socket.
//!
//! Never `virsh qemu-agent-command`: libvirt marks every domain it is used on as tainted
//! (`custom-ga-command`), and admins and vendors treat tainted domains as unsupported.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::wire::GuestFacts;

/// How long a guest agent gets to answer.
pub const TIMEOUT: Duration = Duration::from_secs(1);
/// Longest answer line read, in bytes: the guest is hostile.
const MAX_REPLY_BYTES: u64 = 64 * 1024;

/// Asks the agent behind a QGA socket for its OS information, giving it `TIMEOUT` in all.
pub fn osinfo_from_socket(path: &Path, sync_id: u64) -> Option<GuestFacts> {
    let stream = UnixStream::connect(path).ok()?;
    let mut agent = Conversation {
        stream,
        buffer: Vec::new(),
        received: 0,
        deadline: Instant::now() + TIMEOUT,
    };
    // guest-sync first: answers left over from an earlier client are skipped until ours.
    let sync = json!({"execute": "guest-sync", "arguments": {"id": sync_id}});
    agent.send(&format!("{sync}\n"))?;
    while agent.reply()?.get("return") != Some(&json!(sync_id)) {}
    agent.send("{\"execute\": \"guest-get-osinfo\"}\n")?;
    osinfo_facts(&agent.reply()?)
}

/// Asks through libvirt, for a domain libvirt manages: `virsh -c URI guestinfo --os DOMAIN`,
/// which answers from the same `guest-get-osinfo` and taints nothing. `domain` is the UUID
/// where there is one (a numeric name would be read as a domain id).
pub fn osinfo_from_libvirt(uri: &str, domain: &str) -> Option<GuestFacts> {
    let mut command = Command::new("virsh");
    command
        .args([
            "--quiet",
            "-c",
            uri,
            "guestinfo",
            "--os",
            "--domain",
            domain,
        ])
        .env("LC_ALL", "C");
    let stdout = super::command::run_with_timeout(command, TIMEOUT * 3)?;
    guestinfo_facts(std::str::from_utf8(&stdout).ok()?)
}

/// The facts in `virsh guestinfo --os` output: `os.kernel-release : 6.1.0-28-cloud-amd64`
/// lines, the same keys as `guest-get-osinfo` under `os.`.
pub fn guestinfo_facts(text: &str) -> Option<GuestFacts> {
    let info: serde_json::Map<String, Value> = text
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            let key = key.trim().strip_prefix("os.")?;
            Some((key.to_string(), Value::String(value.trim().to_string())))
        })
        .collect();
    if info.is_empty() {
        return None;
    }
    osinfo_facts(&json!({ "return": info }))
}

/// One exchange with a guest agent, under one deadline for all of it: an agent that answers a
/// byte at a time cannot hold the host agent longer than a silent one.
struct Conversation {
    stream: UnixStream,
    buffer: Vec<u8>,
    received: u64,
    deadline: Instant,
}

impl Conversation {
    fn remaining(&self) -> Option<Duration> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }

    fn send(&mut self, text: &str) -> Option<()> {
        self.stream
            .set_write_timeout(Some(self.remaining()?))
            .ok()?;
        self.stream.write_all(text.as_bytes()).ok()
    }

    /// The next JSON reply. The agent may send a raw 0xFF sentinel (guest-sync-delimited) or
    /// blank lines between replies.
    fn reply(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).filter(|&b| b != 0xFF).collect();
                let text = std::str::from_utf8(&line).ok()?.trim();
                if text.is_empty() {
                    continue;
                }
                return serde_json::from_str(text).ok();
            }
            if self.received > MAX_REPLY_BYTES {
                return None;
            }
            self.stream.set_read_timeout(Some(self.remaining()?)).ok()?;
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            self.received += n as u64;
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The facts in a `guest-get-osinfo` reply (`{"return": {"kernel-release": ...}}`).
pub fn osinfo_facts(reply: &Value) -> Option<GuestFacts> {
    let info = reply.get("return")?.as_object()?;
    let text = |key: &str| info.get(key)?.as_str().map(str::to_string);
    let facts = GuestFacts {
        kernel_release: text("kernel-release"),
        kernel_version: text("kernel-version"),
        distro_id: text("id"),
        distro_version_id: text("version-id"),
        distro_name: text("pretty-name").or_else(|| text("name")),
        ..GuestFacts::default()
    };
    Some(facts.cleaned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    /// A stand-in for qemu-guest-agent speaking its JSON protocol: a stale reply left by an
    /// earlier client, then the answers to guest-sync and guest-get-osinfo.
    fn fake_qga(listener: UnixListener, osinfo: Value) -> std::thread::JoinHandle<Vec<String>> {
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            let mut seen = Vec::new();
            writer.write_all(b"{\"return\": {}}\n").unwrap();
            for _ in 0..2 {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let request: Value = serde_json::from_str(&line).unwrap();
                let command = request["execute"].as_str().unwrap().to_string();
                let reply = match command.as_str() {
                    "guest-sync" => json!({"return": request["arguments"]["id"]}),
                    "guest-get-osinfo" => osinfo.clone(),
                    _ => json!({"error": {"class": "CommandNotFound", "desc": "no"}}),
                };
                writer.write_all(&[0xFF]).unwrap();
                writer.write_all(format!("{reply}\n").as_bytes()).unwrap();
                seen.push(command);
            }
            seen
        })
    }

    #[test]
    fn osinfo_comes_back_as_facts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qga.sock");
        let server = fake_qga(
            UnixListener::bind(&path).unwrap(),
            json!({"return": {
                "kernel-release": "3.10.0-1160.el7.x86_64",
                "kernel-version": "#1 SMP Mon Oct 19 16:18:59 UTC 2020",
                "machine": "x86_64", "id": "centos", "name": "CentOS Linux",
                "pretty-name": "CentOS Linux 7 (Core)", "version": "7 (Core)", "version-id": "7"
            }}),
        );
        let facts = osinfo_from_socket(&path, 4242).unwrap();
        assert_eq!(server.join().unwrap(), ["guest-sync", "guest-get-osinfo"]);
        assert_eq!(
            facts.kernel_release.as_deref(),
            Some("3.10.0-1160.el7.x86_64")
        );
        assert_eq!(facts.distro_id.as_deref(), Some("centos"));
        assert_eq!(facts.distro_version_id.as_deref(), Some("7"));
        assert_eq!(facts.distro_name.as_deref(), Some("CentOS Linux 7 (Core)"));
        assert_eq!(
            facts.config.hz, None,
            "a guest agent does not know CONFIG_HZ"
        );
    }

    #[test]
    fn libvirt_guestinfo_output_comes_back_as_the_same_facts() {
        // `virsh guestinfo --os` of a Debian 12 guest running qemu-ga 7.2.
        let text = "os.id               : debian\n\
                    os.name             : Debian GNU/Linux\n\
                    os.pretty-name      : Debian GNU/Linux 12 (bookworm)\n\
                    os.version          : 12 (bookworm)\n\
                    os.version-id       : 12\n\
                    os.machine          : x86_64\n\
                    os.kernel-release   : 6.1.0-28-cloud-amd64\n\
                    os.kernel-version   : #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)\n\n";
        let facts = guestinfo_facts(text).unwrap();
        assert_eq!(
            facts.kernel_release.as_deref(),
            Some("6.1.0-28-cloud-amd64")
        );
        assert_eq!(
            facts.kernel_version.as_deref(),
            Some("#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"),
            "a value may itself hold colons"
        );
        assert_eq!(facts.distro_id.as_deref(), Some("debian"));
        assert_eq!(
            facts.distro_name.as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(guestinfo_facts(""), None);
        assert_eq!(
            guestinfo_facts("error: Guest agent is not responding\n"),
            None
        );
    }

    #[test]
    fn an_agent_that_refuses_or_never_answers_gives_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qga.sock");
        let server = fake_qga(
            UnixListener::bind(&path).unwrap(),
            json!({"error": {"class": "CommandDisabled", "desc": "guest-get-osinfo has been disabled"}}),
        );
        assert_eq!(osinfo_from_socket(&path, 1), None);
        server.join().unwrap();
        // A socket nobody serves: the listener exists, but no agent answers within the timeout.
        let silent = dir.path().join("silent.sock");
        let _listener = UnixListener::bind(&silent).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(osinfo_from_socket(&silent, 1), None);
        assert!(started.elapsed() < TIMEOUT * 3);
        assert_eq!(
            osinfo_from_socket(&dir.path().join("missing.sock"), 1),
            None
        );
    }

    #[test]
    fn an_agent_that_answers_a_byte_at_a_time_gets_one_timeout_in_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drip.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let dripper = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            for byte in b"{\"return\": 1}".iter().cycle().take(60) {
                if stream.write_all(&[*byte]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let started = Instant::now();
        assert_eq!(osinfo_from_socket(&path, 7), None);
        assert!(
            started.elapsed() < TIMEOUT + Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        dripper.join().unwrap();
    }
}
