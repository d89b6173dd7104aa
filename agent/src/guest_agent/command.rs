//! Running a guest agent's tool with a deadline: these tools hang on a guest that does not
//! answer.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command and returns its standard output if it succeeds within `timeout`; a command
/// still running then is killed. Guest agent tools can hang on a guest that does not answer.
pub(crate) fn run_with_timeout(command: Command, timeout: Duration) -> Option<Vec<u8>> {
    run_capturing(command, timeout).ok()
}

/// Runs a command within `timeout`: its standard output if it succeeded, else why not (the
/// last line of its standard error, or what kept it from running or finishing).
pub(crate) fn run_capturing(mut command: Command, timeout: Duration) -> Result<Vec<u8>, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let deadline = Instant::now() + timeout;
    // The outputs these tools give fit a pipe's buffer: read them once the command ended.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} did not finish within {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{program}: {e}")),
        }
    };
    let mut stdout = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = std::io::Read::read_to_end(&mut out, &mut stdout);
    }
    if status.success() {
        return Ok(stdout);
    }
    let mut stderr = Vec::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = std::io::Read::by_ref(&mut err)
            .take(64 * 1024)
            .read_to_end(&mut stderr);
    }
    let text = String::from_utf8_lossy(&stderr);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(if last.is_empty() {
        format!("{program} failed ({status})")
    } else {
        last.trim().trim_start_matches("error: ").to_string()
    })
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
