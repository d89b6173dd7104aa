//! End to end on real guests: boots idle Linux guests under `qemu-system-x86_64 -accel tcg`, runs
//! the real server and agent binaries, and checks the ranking the API returns.
//!
//! Needs qemu-system-x86, and a kernel plus initramfs from `scripts/guest-assets.sh` (the test
//! command `scripts/test.sh` installs and prepares both). Ignored by a plain `cargo test` because
//! it takes about a minute; run it with `cargo test -p tickscope-server --test real_guests --
//! --ignored`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const AGENT_INTERVAL_S: u64 = 5;
const REPORTS_TO_WAIT_FOR: u64 = 3;
const BOOT_TIMEOUT: Duration = Duration::from_secs(180);

/// Kills the processes it holds by PID when dropped, whether the test passed or not.
#[derive(Default)]
struct Processes(Vec<(String, Child)>);

impl Processes {
    fn add(&mut self, what: &str, child: Child) -> u32 {
        let pid = child.id();
        self.0.push((what.to_string(), child));
        pid
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (what, child) in &mut self.0 {
            if let Err(e) = child.kill() {
                eprintln!("could not kill {what} (pid {}): {e}", child.id());
            }
            let _ = child.wait();
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn guest_assets() -> PathBuf {
    let dir = std::env::var_os("TICKSCOPE_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/guest"));
    for file in ["vmlinuz", "initramfs.gz"] {
        assert!(
            dir.join(file).is_file(),
            "{} is missing: run scripts/guest-assets.sh (scripts/test.sh does)",
            dir.join(file).display()
        );
    }
    dir
}

/// The agent binary, built beside the server's in the same target directory.
fn agent_binary() -> PathBuf {
    let server = PathBuf::from(env!("CARGO_BIN_EXE_tickscope-server"));
    let agent = server.with_file_name("tickscope-agent");
    assert!(
        agent.is_file(),
        "{} is missing: build it first with `cargo build --workspace --bins`",
        agent.display()
    );
    agent
}

struct Guest {
    name: &'static str,
    vcpus: u32,
    append: &'static str,
}

fn boot(guest: &Guest, assets: &Path, work: &Path, processes: &mut Processes) -> PathBuf {
    let serial = work.join(format!("{}.serial", guest.name));
    let child = Command::new("qemu-system-x86_64")
        .args([
            "-accel",
            "tcg",
            "-m",
            "256",
            "-smp",
            &guest.vcpus.to_string(),
        ])
        .args(["-name", &format!("guest={},debug-threads=on", guest.name)])
        .args([
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-nodefaults",
        ])
        .arg("-kernel")
        .arg(assets.join("vmlinuz"))
        .arg("-initrd")
        .arg(assets.join("initramfs.gz"))
        .args([
            "-append",
            &format!("console=ttyS0 quiet panic=-1 {}", guest.append),
        ])
        .arg("-serial")
        .arg(format!("file:{}", serial.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot start qemu-system-x86_64 (apt-get install qemu-system-x86)");
    processes.add(guest.name, child);
    serial
}

fn wait_for_boot(serial: &Path, started: Instant) {
    loop {
        let log = std::fs::read_to_string(serial).unwrap_or_default();
        if log.contains("tickscope-guest: booted") {
            return;
        }
        assert!(
            started.elapsed() < BOOT_TIMEOUT,
            "{} did not finish booting in {BOOT_TIMEOUT:?}; its console said:\n{log}",
            serial.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Starts the server on a free port and returns its base URL.
fn start_server(db: &Path, processes: &mut Processes) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("TICKSCOPE_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    processes.add("tickscope-server", child);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .unwrap();
        if let Some(at) = line.find("listening on http://") {
            break line[at + "listening on ".len()..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || ":/.".contains(c)))
                .next()
                .unwrap()
                .to_string();
        }
    };
    // Keep draining the server's log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    url
}

fn add_token(db: &Path, role: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
        .args([
            "token",
            "add",
            &format!("real-guests-{role}"),
            "--role",
            role,
            "--db",
        ])
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string()
}

fn ranked_guests(url: &str, viewer_token: &str) -> Vec<Value> {
    let body: Value = ureq::get(&format!("{url}/api/v1/guests"))
        .header("Authorization", &format!("Bearer {viewer_token}"))
        .call()
        .unwrap()
        .into_body()
        .read_json()
        .unwrap();
    body["guests"].as_array().unwrap().clone()
}

#[test]
#[ignore = "boots real TCG guests for about a minute; run by scripts/test.sh"]
fn idle_ticking_guests_rank_above_a_tickless_one() {
    let assets = guest_assets();
    let agent = agent_binary();
    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();

    let guests = [
        Guest {
            name: "tickless-1cpu",
            vcpus: 1,
            append: "",
        },
        Guest {
            name: "nohz-off-1cpu",
            vcpus: 1,
            append: "nohz=off",
        },
        Guest {
            name: "nohz-off-2cpu",
            vcpus: 2,
            append: "nohz=off",
        },
    ];
    let started = Instant::now();
    let serials: Vec<PathBuf> = guests
        .iter()
        .map(|g| boot(g, &assets, work.path(), &mut processes))
        .collect();
    for serial in &serials {
        wait_for_boot(serial, started);
    }
    eprintln!("guests booted in {:?}", started.elapsed());
    // Let the last boot work (and the TCG translation cache) settle before measuring idle.
    std::thread::sleep(Duration::from_secs(3));

    let db = work.path().join("tickscope.db");
    let agent_token = add_token(&db, "agent");
    let viewer_token = add_token(&db, "viewer");
    let url = start_server(&db, &mut processes);
    let agent_child = Command::new(&agent)
        .args([
            "run",
            "--interval",
            &AGENT_INTERVAL_S.to_string(),
            "--host-name",
            "real-guests-host",
        ])
        .env("TICKSCOPE_SERVER", &url)
        .env("TICKSCOPE_TOKEN", &agent_token)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    processes.add("tickscope-agent", agent_child);

    // The first cycle only sets the starting point; then one report per interval.
    std::thread::sleep(Duration::from_secs(
        AGENT_INTERVAL_S * (REPORTS_TO_WAIT_FOR + 1) + 2,
    ));
    let ranked = ranked_guests(&url, &viewer_token);
    for g in &ranked {
        eprintln!(
            "{:>14}: {} vCPU, host CPU {:.2} %, {:.0} wake-ups/vCPU/s, {} ({}), wasted {:.2} %, {} interval(s)",
            g["name"].as_str().unwrap(),
            g["vcpus"],
            g["host_cpu_pct"].as_f64().unwrap_or(f64::NAN),
            g["wakeups_per_vcpu"].as_f64().unwrap_or(f64::NAN),
            g["tick_mode"].as_str().unwrap(),
            g["tick_mode_confidence"].as_str().unwrap(),
            g["wasted_cpu_pct"].as_f64().unwrap(),
            g["intervals"],
        );
    }

    let find = |name: &str| -> (usize, &Value) {
        ranked
            .iter()
            .enumerate()
            .find(|(_, g)| g["name"] == name)
            .unwrap_or_else(|| panic!("{name} was not discovered; ranking: {ranked:#?}"))
    };
    let (tickless_rank, tickless) = find("tickless-1cpu");
    let (one_rank, one) = find("nohz-off-1cpu");
    let (two_rank, two) = find("nohz-off-2cpu");

    assert_eq!(tickless["tick_mode"], "tickless", "{tickless:#?}");
    assert!(
        tickless["wasted_cpu_pct"].as_f64().unwrap() < 1.0,
        "{tickless:#?}"
    );
    for (rank, g) in [(one_rank, one), (two_rank, two)] {
        assert_eq!(g["tick_mode"], "periodic", "{g:#?}");
        assert!(
            rank < tickless_rank,
            "{} ranks below the tickless guest",
            g["name"]
        );
        assert!(!g["suggestions"].as_array().unwrap().is_empty(), "{g:#?}");
        assert!(g["intervals"].as_i64().unwrap() >= 2, "{g:#?}");
    }
    assert_eq!(one["vcpus"], 1);
    assert_eq!(two["vcpus"], 2);
    assert!(
        two["wasted_cpu_pct"].as_f64().unwrap() > one["wasted_cpu_pct"].as_f64().unwrap(),
        "the 2-vCPU guest should waste more: {two:#?} vs {one:#?}"
    );
}
