//! The host end of a guest probe's serial channel.
//!
//! QEMU (or libvirt) exposes the guest's serial or virtio-serial port as a UNIX socket on the
//! host, listening (`server=on,wait=off`); the agent connects, and each cycle reads whatever the
//! probe wrote since: one JSON line of facts per probe interval. Reads never block. The guest is
//! hostile: lines are bounded, and anything that is not a facts object is skipped.

use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use crate::wire::GuestFacts;

/// Longest line kept; a guest that sends more without a newline has its bytes dropped.
const MAX_LINE_BYTES: usize = 64 * 1024;

pub struct Channel {
    path: PathBuf,
    stream: Option<UnixStream>,
    pending: Vec<u8>,
    /// Dropping an over-long line until its end.
    skipping: bool,
}

impl Channel {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Channel {
            path: path.into(),
            stream: None,
            pending: Vec::new(),
            skipping: false,
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The newest facts the guest sent since the last call, if any.
    pub fn poll(&mut self) -> Option<GuestFacts> {
        if self.stream.is_none() {
            let stream = UnixStream::connect(&self.path).ok()?;
            stream.set_nonblocking(true).ok()?;
            self.stream = Some(stream);
        }
        let mut newest = None;
        let mut chunk = [0u8; 8192];
        loop {
            let read = match self.stream.as_mut()?.read(&mut chunk) {
                Ok(0) => {
                    // The VM closed or restarted the port: connect again next cycle.
                    self.stream = None;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.stream = None;
                    break;
                }
            };
            for &byte in &chunk[..read] {
                if byte == b'\n' {
                    if !self.skipping {
                        newest = parse_line(&self.pending).or(newest);
                    }
                    self.pending.clear();
                    self.skipping = false;
                } else if self.pending.len() < MAX_LINE_BYTES {
                    self.pending.push(byte);
                } else {
                    self.pending.clear();
                    self.skipping = true;
                }
            }
        }
        newest
    }
}

fn parse_line(line: &[u8]) -> Option<GuestFacts> {
    let text = std::str::from_utf8(line).ok()?.trim();
    if !text.starts_with('{') {
        return None; // console noise, a login prompt, ...
    }
    serde_json::from_str::<GuestFacts>(text)
        .ok()
        .map(GuestFacts::cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixListener;

    #[test]
    fn facts_lines_are_read_without_blocking_and_noise_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickscope-vm.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut channel = Channel::new(&path);
        assert!(
            channel.poll().is_none(),
            "nothing written yet, and no blocking"
        );
        let (mut guest, _) = listener.accept().unwrap();
        guest
            .write_all(b"login: \r\n{\"kernel_release\":\"6.1.0\"}\r\n{\"kernel_release\":\"6.1.1\"}\r\n{\"kernel_rel")
            .unwrap();
        let facts = channel.poll().unwrap();
        assert_eq!(
            facts.kernel_release.as_deref(),
            Some("6.1.1"),
            "the newest line wins"
        );
        guest.write_all(b"ease\":\"6.2.0\"}\n").unwrap();
        assert_eq!(
            channel.poll().unwrap().kernel_release.as_deref(),
            Some("6.2.0")
        );
        assert!(channel.poll().is_none());
    }

    #[test]
    fn an_endless_line_is_dropped_and_the_next_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut channel = Channel::new(&path);
        channel.poll();
        let (mut guest, _) = listener.accept().unwrap();
        guest.set_nonblocking(true).unwrap();
        let flood = vec![b'{'; MAX_LINE_BYTES + 10];
        let mut sent = 0;
        while sent < flood.len() {
            match guest.write(&flood[sent..]) {
                Ok(n) => sent += n,
                Err(_) => {
                    assert!(channel.poll().is_none());
                }
            }
        }
        guest.set_nonblocking(false).unwrap();
        guest.write_all(b"\n{\"cpus\":4}\n").unwrap();
        assert_eq!(channel.poll().unwrap().cpus, Some(4));
    }
}
