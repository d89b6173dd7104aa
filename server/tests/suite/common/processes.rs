//! The real binaries as child processes, for the end-to-end tests (real guests, the browser).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Kills the processes it holds by PID when dropped, whether the test passed or not, and the
/// process groups of those started with [`in_own_group`] (chromedriver's browsers).
#[derive(Default)]
pub struct Processes(Vec<(String, Child)>, Vec<u32>);

/// Makes a command the leader of a new process group, so that what it starts can be killed
/// with it.
pub fn in_own_group(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    command.process_group(0)
}

impl Processes {
    pub fn add(&mut self, what: &str, child: Child) -> u32 {
        let pid = child.id();
        self.0.push((what.to_string(), child));
        pid
    }

    /// Like [`Processes::add`], for a child started [`in_own_group`]: its whole group is killed.
    pub fn add_group(&mut self, what: &str, child: Child) -> u32 {
        let pid = self.add(what, child);
        self.1.push(pid);
        pid
    }

    /// Kills the process added as `what` now, as pulling a VM's plug would.
    pub fn kill(&mut self, what: &str) {
        let at = self.0.iter().position(|(w, _)| w == what).unwrap();
        let (_, mut child) = self.0.remove(at);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for group in &self.1 {
            // `kill -KILL -- -PGID`: the browsers chromedriver started, which outlive it.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{group}")])
                .status();
        }
        for (what, child) in &mut self.0 {
            if let Err(e) = child.kill() {
                eprintln!("could not kill {what} (pid {}): {e}", child.id());
            }
            let _ = child.wait();
        }
    }
}

/// The address an attacker's connections come from in the tests, apart from everyone else's
/// (127.0.0.1): the server's budgets per client address tell them apart.
pub const ATTACKER: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

/// A connection to the server at `url` (`http://host:port`) from `source`.
pub fn connect_from(source: std::net::IpAddr, url: &str) -> std::io::Result<std::net::TcpStream> {
    let server: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::new(source, 0))?;
        socket.connect(server).await
    })?;
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    Ok(stream)
}

/// A loopback port nobody listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The agent binary, built beside the server's in the same target directory.
pub fn agent_binary() -> PathBuf {
    let server = PathBuf::from(env!("CARGO_BIN_EXE_tickscope-server"));
    let agent = server.with_file_name("tickscope-agent");
    assert!(
        agent.is_file(),
        "{} is missing: build it first with `cargo build --workspace --bins`",
        agent.display()
    );
    agent
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Starts the server on a free port with `args` after `serve`, and returns its base URL.
pub fn start_server(db: impl AsRef<OsStr>, args: &[&str], processes: &mut Processes) -> String {
    start_server_with_log(db, args, &[("TICKSCOPE_LOG", "info")], processes).0
}

/// The server's log as it is written: each line's raw bytes, its final newline included.
pub type ServerLog = std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

/// Starts the server like [`start_server`], with `env` set, and also returns its log, which
/// fills as the server writes it.
pub fn start_server_with_log(
    db: impl AsRef<OsStr>,
    args: &[&str],
    env: &[(&str, &str)],
    processes: &mut Processes,
) -> (String, ServerLog) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    processes.add("tickscope-server", child);
    let log = ServerLog::default();
    let mut reader = BufReader::new(stderr);
    // Raw lines: `lines()` would drop a `\r` before the newline, which the log tests look for.
    let mut next_line = move || {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    };
    let url = loop {
        let line = next_line().expect("the server exited before listening");
        log.lock().unwrap().push(line.clone());
        let line = String::from_utf8_lossy(&line);
        if let Some(at) = line
            .find("listening on http://")
            .or_else(|| line.find("listening on https://"))
        {
            break line[at + "listening on ".len()..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || ":/.".contains(c)))
                .next()
                .unwrap()
                .to_string();
        }
    };
    // Keep draining the server's log so it never blocks on a full pipe.
    let kept = log.clone();
    std::thread::spawn(move || {
        while let Some(line) = next_line() {
            kept.lock().unwrap().push(line);
        }
    });
    (url, log)
}

/// `tickscope-server token add ARGS --db DB`, which must succeed; what it printed.
fn token_add(db: impl AsRef<OsStr>, args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["token", "add"])
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Makes `count` agent tokens named `name-0001` on, as `token add --count` prints them (one
/// `name token` line each, what `tickscope-agent simulate --tokens-file` reads), into `file`.
pub fn agent_tokens_file(db: impl AsRef<OsStr>, name: &str, count: usize, file: &Path) {
    let count = count.to_string();
    let printed = token_add(db, &[name, "--role", "agent", "--count", &count]);
    std::fs::write(file, printed).unwrap();
}

pub fn add_token(db: impl AsRef<OsStr>, role: &str) -> String {
    let name = format!("real-guests-{role}");
    String::from_utf8(token_add(db, &[&name, "--role", role]))
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string()
}

/// Polls `count` until it reaches `at_least`, and returns what it counted then. Fails, saying
/// what it waited for and how far it got, after `within`: generous, so that a loaded machine
/// is slower but never wrong, and a test never decides its outcome by sleeping a fixed time.
pub fn wait_for_count(
    what: &str,
    at_least: usize,
    within: std::time::Duration,
    mut count: impl FnMut() -> usize,
) -> usize {
    let deadline = std::time::Instant::now() + within;
    loop {
        let counted = count();
        if counted >= at_least {
            return counted;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited {within:?} for {at_least} {what}; there were {counted}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Runs `command` to its end with `stdin` written to it, and returns what it said (on the
/// stdout and stderr the caller piped). If the input cannot be written the program is killed
/// before the test fails, so that it is not left waiting for the rest.
pub fn output_with_stdin(command: &mut Command, stdin: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = command.stdin(Stdio::piped()).spawn().unwrap();
    let written = child.stdin.take().unwrap().write_all(stdin);
    if let Err(e) = written {
        let _ = child.kill();
        let _ = child.wait();
        panic!("could not write to {command:?}: {e}");
    }
    child.wait_with_output().unwrap()
}

/// Tests that boot guests (real_guests, libvirt) take turns across the whole test binary: two
/// TCG guests at once on a small machine disturb each other's idle figures and slow each
/// other's boots past any sensible timeout.
static ONE_GUEST_TEST_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for this test's turn to boot guests; the turn ends when the guard is dropped. A test
/// that failed during its turn does not stop the next one from taking it.
pub fn guest_turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_GUEST_TEST_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}
