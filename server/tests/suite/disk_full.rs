//! Storage faults against the real binary: a disk that fills up and is freed again, and a
//! database that cannot be written at all.
//!
//! Ignored by `cargo test`: they mount a small tmpfs, which needs root; `scripts/test.sh` runs
//! them (as root).

use crate::common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use common::processes::{Processes, add_token, output_with_stdin, start_server};
use tickscope_server::db::Db;

const UUID: &str = "5c8f6a0e-3b1d-4e2a-9f47-1d2c3b4a5e6f";

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str, read_only: bool) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let options = format!(
            "size={size},mode=0755{}",
            if read_only { ",ro" } else { "" }
        );
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tickscope-test"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "cannot mount a tmpfs on {} (these tests need root)",
            dir.path().display()
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn remount_read_only(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

/// Fills the file system holding `dir` with a file until no byte more fits; returns the file.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 64 * 1024];
    while file.write_all(&block).is_ok() {}
    let one = [0u8; 1];
    while file.write_all(&one).is_ok() {}
    path
}

fn guest(name: &str, uuid: Option<&str>, cpu_pct: f64, wakeups_per_s: f64) -> Value {
    json!({
        "hypervisor": "qemu", "name": name, "uuid": uuid, "pid": 4000, "vcpus": 1,
        "host_cpu_seconds": cpu_pct / 100.0 * 10.0,
        "vcpu_wakeups": (wakeups_per_s * 10.0) as u64,
        "wakeups_source": "vcpu_threads", "boot_args": "console=ttyS0 nohz=off"
    })
}

/// Report `seq` of one host with 40 guests that tick while idle (a few pages of SQLite each).
fn report(seq: u64) -> Value {
    let mut guests = vec![guest("probe-guest", Some(UUID), 5.0, 650.0)];
    guests.extend((0..39).map(|i| guest(&format!("ticker-{i:02}"), None, 5.3, 650.0)));
    common::report(seq, guests)
}

/// Status, `Retry-After` and body of a POST.
fn post(url: &str, token: &str, body: &Value) -> (u16, Option<String>, String) {
    let answer = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .unwrap();
    let retry_after = answer
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let status = answer.status().as_u16();
    (
        status,
        retry_after,
        answer.into_body().read_to_string().unwrap(),
    )
}

fn ready(url: &str) -> (u16, Value) {
    let answer = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
        .get(format!("{url}/readyz"))
        .call()
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.into_body().read_json().unwrap())
}

/// `name=value` of every cookie a response sets.
fn cookies_set(answer: &ureq::http::Response<ureq::Body>) -> Vec<String> {
    answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_string))
        .collect()
}

/// Adds an admin with the command line and logs in through the login form, as a browser would;
/// the session cookie (`name=value`).
fn log_in(url: &str, db_path: &Path) -> String {
    use std::process::Stdio;
    let added = output_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_tickscope-server"))
            .args(["user", "add", "alice", "--role", "admin", "--db"])
            .arg(db_path)
            .stdout(Stdio::null()),
        b"correct horse battery\n",
    );
    assert!(added.status.success());
    let browser = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent();
    let mut page = browser.get(format!("{url}/login")).call().unwrap();
    let login_cookies = cookies_set(&page).join("; ");
    let html = page.body_mut().read_to_string().unwrap();
    let csrf = common::csrf_in(&html).expect("the login form carries a CSRF token");
    let answer = browser
        .post(format!("{url}/login"))
        .header("Cookie", &login_cookies)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(common::form(&[
            ("name", "alice"),
            ("password", "correct horse battery"),
            ("csrf", &csrf),
        ]))
        .unwrap();
    assert_eq!(answer.status().as_u16(), 303);
    cookies_set(&answer)
        .into_iter()
        .find(|c| c.starts_with("tickscope_session="))
        .expect("logging in sets the session cookie")
}

/// The status of the fleet overview for a browser with `cookie`.
fn overview(url: &str, cookie: &str) -> u16 {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .new_agent()
        .get(format!("{url}/"))
        .header("Cookie", cookie)
        .call()
        .unwrap()
        .status()
        .as_u16()
}

fn facts() -> Value {
    json!({"facts": {
        "collected_ms": chrono::Utc::now().timestamp_millis(),
        "kernel_release": "6.1.0-57-cloud-amd64",
        "cmdline": "console=ttyS0 nohz=off",
        "cpus": 1,
        "dmi_uuid": UUID
    }})
}

#[tokio::test]
#[ignore = "mounts a tmpfs: needs root (scripts/test.sh)"]
async fn after_the_disk_fills_everything_works_again_once_space_is_freed() {
    if crate::common::database::sqlite_only("a full disk under the SQLite file") {
        return;
    }
    let disk = SmallDisk::mount("24m", false);
    let db_path = disk.path().join("t.db");
    let agent_token = add_token(&db_path, "agent");
    let guest_token = add_token(&db_path, "guest");
    {
        // The guest rule fires at once, so the alert evaluation has something to write.
        let db = Db::open(&db_path).await.unwrap();
        common::set_guest_rule(&db, 0, true).await;
        db.close().await;
    }
    let mut processes = Processes::default();
    let url = start_server(&db_path, &["--alert-interval", "1"], &mut processes);
    let reports = format!("{url}/api/v1/reports");
    let mut acknowledged = BTreeSet::new();
    let mut refused = BTreeSet::new();

    // Before: stored.
    let mut seq = 1;
    let (status, _, body) = post(&reports, &agent_token, &report(seq));
    assert_eq!(status, 200, "{body}");
    acknowledged.insert(seq);
    assert_eq!(ready(&url).0, 200);
    let session = log_in(&url, &db_path);
    assert_eq!(overview(&url, &session), 200);

    // The disk fills: reports are refused "retry later", none half-stored.
    let filler = fill(disk.path());
    let mut full_answers = 0;
    while full_answers < 20 {
        seq += 1;
        assert!(seq < 500, "the server never said its disk is full");
        let (status, retry_after, body) = post(&reports, &agent_token, &report(seq));
        match status {
            200 => {
                acknowledged.insert(seq);
            }
            507 => {
                let error: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(error["error"]["code"], "storage_full", "{body}");
                assert!(
                    error["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("disk is full"),
                    "{body}"
                );
                assert!(retry_after.is_some(), "507 without Retry-After");
                refused.insert(seq);
                full_answers += 1;
            }
            other => panic!("report {seq}: {other} {body}"),
        }
    }
    // /readyz reuses its probe for a second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, readiness) = ready(&url);
    assert_eq!(status, 503, "{readiness}");
    assert_eq!(readiness["database"], "cannot write", "{readiness}");
    // The dashboard still shows the fleet (its session's expiry cannot be moved on meanwhile).
    assert_eq!(
        overview(&url, &session),
        200,
        "the overview while the disk is full"
    );
    let (status, _, body) = post(&format!("{url}/api/v1/guest-facts"), &guest_token, &facts());
    // A small write may still fit in the write-ahead log's free pages: it is stored, or refused
    // "retry later", never a server error.
    assert!(
        matches!(status, 200 | 503 | 507),
        "guest facts while full: {status} {body}"
    );

    // Space comes back: the same server takes everything again, without a restart.
    std::fs::remove_file(filler).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    for &seq in &refused {
        // What the agents kept in their spool arrives again.
        let (status, _, body) = post(&reports, &agent_token, &report(seq));
        assert_eq!(status, 200, "report {seq} after space was freed: {body}");
    }
    seq += 1;
    let (status, _, body) = post(&reports, &agent_token, &report(seq));
    assert_eq!(status, 200, "{body}");
    acknowledged.extend(refused.iter().copied());
    acknowledged.insert(seq);
    let (status, _, body) = post(&format!("{url}/api/v1/guest-facts"), &guest_token, &facts());
    assert_eq!(status, 200, "guest facts after space was freed: {body}");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, readiness) = ready(&url);
    assert_eq!(status, 200, "{readiness}");

    // The alert evaluation writes again: the guest rule's alerts appear.
    let db = Db::open(&db_path).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.open_alerts().await.unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the alert evaluation wrote nothing after space was freed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }

    // Every acknowledged report is stored, once, with all its guests; nothing else is.
    processes.kill("tickscope-server");
    let (stored_reports, stored_samples) = db.count_reports_and_samples().await.unwrap();
    assert_eq!(stored_reports, acknowledged.len() as i64);
    assert_eq!(stored_samples, 40 * acknowledged.len() as i64);
    db.close().await;
}

/// Starts `serve` on `db_path` (as `user`, `uid:gid`, if given) and returns how it ended.
fn serve_and_fail(db_path: &Path, user: Option<&str>) -> String {
    let server = env!("CARGO_BIN_EXE_tickscope-server");
    let mut command = match user {
        Some(ids) => {
            let (uid, gid) = ids.split_once(':').unwrap();
            let mut c = Command::new("setpriv");
            c.args(["--reuid", uid, "--regid", gid, "--clear-groups", server]);
            c
        }
        None => Command::new(server),
    };
    let out = command
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db_path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
    assert!(stderr.contains(&db_path.display().to_string()), "{stderr}");
    stderr
}

#[tokio::test]
#[ignore = "mounts a tmpfs and changes user: needs root (scripts/test.sh)"]
async fn a_database_that_cannot_be_written_refuses_to_start_saying_why() {
    if crate::common::database::sqlite_only("a read-only SQLite file") {
        return;
    }
    // The common mistake: `token add` run as root made the file, the service runs as its own
    // user. SQLite opens a file it may not write read-only, without a word.
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("t.db");
    add_token(&db_path, "agent");
    let nobody = "65534:65534";
    Command::new("chown")
        .args([nobody, &dir.path().display().to_string()])
        .status()
        .unwrap();
    let stderr = serve_and_fail(&db_path, Some(nobody));
    assert!(stderr.contains("cannot write the database"), "{stderr}");
    assert!(stderr.contains("readonly database"), "{stderr}");
    assert!(stderr.contains("permissions"), "{stderr}");

    // A read-only mount: nothing can be written beside the file either.
    let disk = SmallDisk::mount("16m", false);
    let db_path = disk.path().join("t.db");
    add_token(&db_path, "agent");
    disk.remount_read_only();
    let stderr = serve_and_fail(&db_path, None);
    assert!(
        stderr.contains("cannot write the database") || stderr.contains("cannot open the database"),
        "{stderr}"
    );
}
