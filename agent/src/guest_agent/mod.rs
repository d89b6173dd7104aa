//! Asking a VM's own guest agent what kernel it runs: qemu-guest-agent (`guest-get-osinfo`) and
//! VirtualBox guest properties. They know less than the guest probe (release and distribution,
//! not the timer setup) but are often already installed.
//!
//! These calls can block (a guest agent that is not running never answers), so the sampler makes
//! them after it has read every VM's counters, with a short timeout, and rarely.

pub mod qga;
pub mod virtualbox;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command and returns its standard output if it succeeds within `timeout`; a command
/// still running then is killed. Guest agent tools can hang on a guest that does not answer.
pub(crate) fn run_with_timeout(mut command: Command, timeout: Duration) -> Option<Vec<u8>> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take()?, &mut stdout).ok()?;
    Some(stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hanging_command_is_killed_at_its_timeout() {
        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let started = Instant::now();
        assert_eq!(run_with_timeout(sleep, Duration::from_millis(300)), None);
        assert!(started.elapsed() < Duration::from_secs(5));
        let mut echo = Command::new("echo");
        echo.arg("hi");
        assert_eq!(
            run_with_timeout(echo, Duration::from_secs(5)).as_deref(),
            Some(&b"hi\n"[..])
        );
    }
}
