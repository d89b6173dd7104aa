//! The boot-parameter playbook of `contrib/ansible` against a Debian guest's root filesystem
//! (debootstrap's, reached with Ansible's chroot connection): the real server plans the guest
//! from its host's reports, the playbook asks it first, edits /etc/default/grub, and records the
//! change. A chroot cannot run update-grub (no boot disk) nor reboot, so both are turned off and
//! the test reads /etc/default/grub after; a guest booted from it is the real-guest test's part.
//!
//! Needs root, Debian's ansible (community.general's chroot connection) and the root filesystem
//! of `scripts/ansible-root.sh`, which `scripts/test.sh` prepares. Ignored by a plain
//! `cargo test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::ansible::ChangeRun;
use crate::common::processes::{Processes, add_token, repo_root, start_server};
use crate::common::{fleet_report, guest, report};

const GRUB: &str = "# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT=\"nohz=off quiet nohz=off\"
GRUB_CMDLINE_LINUX=\"console=tty0 console=ttyS0,115200 nohz=off\"
";

fn debian_root() -> PathBuf {
    let out = Command::new(repo_root().join("scripts/ansible-root.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/ansible-root.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn post(url: &str, path: &str, token: &str, body: &Value) {
    ureq::post(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
}

fn get(url: &str, path: &str, token: &str) -> ureq::http::Response<ureq::Body> {
    ureq::get(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn changes(url: &str, viewer: &str) -> Vec<Value> {
    get(url, "/api/v1/changes", viewer)
        .into_body()
        .read_json::<Value>()
        .unwrap()["changes"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
#[ignore = "runs Ansible against a Debian root filesystem (root, debootstrap); run by scripts/test.sh"]
fn the_boot_parameter_playbook_edits_grub_in_a_debian_root_asks_first_and_records_it() {
    let root = debian_root();
    let grub = root.join("etc/default/grub");
    std::fs::create_dir_all(grub.parent().unwrap()).unwrap();
    std::fs::write(&grub, GRUB).unwrap();

    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let mut processes = Processes::default();
    let db = w.join("tickscope.db");
    let agent = add_token(&db, "agent");
    let viewer = add_token(&db, "viewer");
    let url = start_server(&db, &[], &mut processes);
    // The host's agent reports ticker-1, its command line (nohz=off) seen from the host.
    for seq in 1..=7 {
        post(&url, "/api/v1/reports", &agent, &fleet_report(seq));
    }
    let plan = get(&url, "/api/v1/plan-inventory.yml", &viewer)
        .into_body()
        .read_to_string()
        .unwrap();
    let own = format!(
        "all:\n  vars:\n    ansible_become: false\n  hosts:\n    ticker-1:\n      ansible_connection: community.general.chroot\n      ansible_host: {}\n      ansible_python_interpreter: /usr/bin/python3\n",
        root.display()
    );
    let vars = json!({
        "tickscope_server_url": url,
        "tickscope_viewer_token": viewer,
        "tickscope_agent_tokens": {"hv1": agent},
        "tickscope_update_grub": false,
        "tickscope_reboot": false,
    });
    let change = ChangeRun::prepare(w, &plan, &own, &vars, "ticker-1");
    let run = |extra: &[&str]| change.run("boot_parameters", extra);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();

    // --check: nothing written, nothing recorded.
    let (ok, out) = run(&["--check"]);
    assert!(ok, "{out}");
    assert_eq!(read(&grub), GRUB, "{out}");
    assert!(changes(&url, &viewer).is_empty(), "{out}");

    // -v prints each task's arguments and results: where a token would show if it leaked.
    let (ok, out) = run(&["-v"]);
    assert!(ok, "{out}");
    let edited = read(&grub);
    assert!(
        edited.contains("GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n")
            && edited.contains("GRUB_CMDLINE_LINUX=\"console=tty0 console=ttyS0,115200\"\n"),
        "{edited}\n{out}"
    );
    let others = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("GRUB_CMDLINE_LINUX"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(others(&edited), others(GRUB), "other lines changed");
    let recorded = changes(&url, &viewer);
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    assert_eq!(recorded[0]["rule"], "remove_nohz_off");
    assert!(
        !out.contains(&agent) && !out.contains(&viewer),
        "a token in the output: {out}"
    );

    // Again: nothing left to change, so nothing more is recorded.
    let (ok, out) = run(&[]);
    assert!(ok, "{out}");
    assert_eq!(read(&grub), edited);
    assert_eq!(changes(&url, &viewer).len(), 1, "{out}");

    // A file of /etc/default/grub.d that sets it again, which the role does not edit: refused
    // after the edit, nothing recorded.
    let extra = root.join("etc/default/grub.d/50-extra.cfg");
    std::fs::create_dir_all(extra.parent().unwrap()).unwrap();
    std::fs::write(
        &extra,
        "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT nohz=off\"\n",
    )
    .unwrap();
    let (ok, out) = run(&[]);
    std::fs::remove_file(&extra).unwrap();
    assert!(!ok, "a parameter left in grub.d was not reported: {out}");
    assert!(
        out.contains("is still set in") && out.contains("50-extra.cfg"),
        "{out}"
    );
    assert_eq!(changes(&url, &viewer).len(), 1, "{out}");

    // The guest rebooted without nohz=off; someone put it back in the file since. The plan the
    // admin still holds names it, but the server no longer does: refused, the file untouched.
    post(
        &url,
        "/api/v1/reports",
        &agent,
        &report(
            8,
            vec![
                guest("quiet", 1, 0.3, 38.0, None),
                guest("ticker-1", 1, 0.3, 38.0, Some("console=ttyS0")),
                guest("ticker-2", 2, 8.6, 572.0, Some("console=ttyS0 nohz=off")),
            ],
        ),
    );
    std::fs::write(&grub, GRUB).unwrap();
    let (ok, out) = run(&[]);
    assert!(!ok, "a guest no longer planned was changed: {out}");
    assert!(out.contains("no longer needs remove_nohz_off"), "{out}");
    assert_eq!(read(&grub), GRUB);
    assert_eq!(changes(&url, &viewer).len(), 1);
}
