//! The host end of a guest probe's serial channel.
//!
//! QEMU (or libvirt) exposes the guest's serial or virtio-serial port as a UNIX socket on the
//! host, listening (`server=on,wait=off`); the agent connects, and each cycle reads whatever the
//! probe wrote since: one JSON line of facts per probe interval. Nothing here blocks: the connect
//! and the reads are non-blocking, a cycle reads at most `MAX_BYTES_PER_POLL`, and only the last
//! complete line is parsed. The guest is hostile: lines are bounded, and anything that is not a
//! facts object is skipped.

use std::io::{self, ErrorKind, Read};
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::wire::GuestFacts;

/// Longest line kept; a guest that sends more without a newline has its bytes dropped.
const MAX_LINE_BYTES: usize = 64 * 1024;
/// Most bytes read from one channel in one cycle: a guest that floods its port cannot keep the
/// agent reading.
const MAX_BYTES_PER_POLL: usize = 256 * 1024;

pub struct Channel {
    path: PathBuf,
    stream: Option<UnixStream>,
    /// The line being received.
    pending: Vec<u8>,
    /// Dropping an over-long line until its end.
    skipping: bool,
    /// The last complete line received since the last poll.
    last_line: Option<Vec<u8>>,
}

impl Channel {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Channel {
            path: path.into(),
            stream: None,
            pending: Vec::new(),
            skipping: false,
            last_line: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The newest facts the guest sent since the last call, if any.
    pub fn poll(&mut self) -> Option<GuestFacts> {
        if self.stream.is_none() {
            self.stream = connect_nonblocking(&self.path).ok();
            // A new connection starts at a line boundary of its own.
            self.pending.clear();
            self.skipping = false;
        }
        let mut chunk = [0u8; 8192];
        let mut budget = MAX_BYTES_PER_POLL;
        while budget > 0 {
            let Some(stream) = self.stream.as_mut() else {
                break;
            };
            let want = chunk.len().min(budget);
            match stream.read(&mut chunk[..want]) {
                Ok(0) => {
                    // The VM closed or restarted the port: connect again next cycle.
                    self.stream = None;
                }
                Ok(n) => {
                    budget -= n;
                    self.take(&chunk[..n]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.stream = None,
            }
        }
        parse_line(&self.last_line.take()?)
    }

    fn take(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                if !self.skipping {
                    self.last_line = Some(std::mem::take(&mut self.pending));
                }
                self.pending.clear();
                self.skipping = false;
            } else if self.skipping {
                continue;
            } else if self.pending.len() < MAX_LINE_BYTES {
                self.pending.push(byte);
            } else {
                self.pending.clear();
                self.skipping = true;
            }
        }
    }
}

/// Connects to a UNIX socket without blocking, even when its listener's backlog is full.
fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    // SAFETY: plain system calls on a descriptor we own; it is closed on every error path, and
    // handed to UnixStream, which closes it, on success.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(fd, (&raw const addr).cast(), len) != 0 {
            let error = io::Error::last_os_error();
            libc::close(fd);
            return Err(error);
        }
        Ok(UnixStream::from_raw_fd(fd))
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
    fn a_valid_line_longer_than_the_limit_is_dropped_and_the_next_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut channel = Channel::new(&path);
        channel.poll();
        let (mut guest, _) = listener.accept().unwrap();
        // Well-formed facts, but longer than a line may be.
        let long = format!("{{\"cmdline\":\"{}\"}}\n", "x".repeat(MAX_LINE_BYTES));
        let writer = std::thread::spawn(move || {
            guest.write_all(long.as_bytes()).unwrap();
            guest.write_all(b"{\"cpus\":4}\n").unwrap();
        });
        let mut seen = Vec::new();
        while !writer.is_finished() || seen.is_empty() {
            if let Some(facts) = channel.poll() {
                seen.push(facts);
            }
        }
        writer.join().unwrap();
        if let Some(facts) = channel.poll() {
            seen.push(facts);
        }
        assert!(
            seen.iter().all(|f| f.cmdline.is_none()),
            "the over-long line was taken"
        );
        assert_eq!(seen.last().unwrap().cpus, Some(4));
    }

    #[test]
    fn a_flooding_guest_does_not_keep_the_agent_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flood.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut channel = Channel::new(&path);
        channel.poll();
        let (mut guest, _) = listener.accept().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flooding = stop.clone();
        let writer = std::thread::spawn(move || {
            let line = b"{\"cpus\":1}\n".repeat(1000);
            while !flooding.load(std::sync::atomic::Ordering::Relaxed) {
                if guest.write_all(&line).is_err() {
                    break;
                }
            }
        });
        let started = std::time::Instant::now();
        for _ in 0..3 {
            channel.poll();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(channel);
        writer.join().unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_reconnect_starts_at_a_line_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut channel = Channel::new(&path);
        channel.poll();
        let (mut first, _) = listener.accept().unwrap();
        first.write_all(b"{\"cpus\":").unwrap();
        channel.poll();
        drop(first); // the VM restarts its port mid-line
        channel.poll();
        channel.poll();
        let (mut second, _) = listener.accept().unwrap();
        // The rest of the old line must not be glued to the start of the old one.
        second.write_all(b"2}\n").unwrap();
        assert_eq!(channel.poll(), None);
        second.write_all(b"{\"cpus\":8}\n").unwrap();
        assert_eq!(channel.poll().unwrap().cpus, Some(8));
    }
}
