//! The `tickscope-agent` binary as a user runs it.

use std::path::Path;
use std::process::Command;

use tickscope_agent::wire::Report;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickscope-agent"))
}

#[test]
fn once_prints_one_report_as_json() {
    let proc = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qemu-tcg-nohz-off/t0");
    let out = agent()
        .args([
            "once",
            "--interval",
            "0.2",
            "--host-name",
            "cli-test",
            "--proc-root",
        ])
        .arg(&proc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.seq, 0);
    assert_eq!(report.host.name, "cli-test");
    assert!(report.interval.length_ns >= 200_000_000);
    assert_eq!(report.guests.len(), 1);
    assert_eq!(report.guests[0].name, "t2");
}

#[test]
fn bad_arguments_are_explained() {
    for (args, expected) in [
        (
            vec!["once", "--interval", "0"],
            "--interval must be between",
        ),
        (
            vec!["run", "--server", "http://127.0.0.1:9", "--token", " "],
            "--token",
        ),
        (vec!["run", "--token", "x"], "--server"),
    ] {
        let out = agent()
            .args(&args)
            .env_remove("TICKSCOPE_SERVER")
            .env_remove("TICKSCOPE_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
