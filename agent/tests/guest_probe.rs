//! The guest probe on files captured from real guests (Debian 12, kernel 6.1, booted under
//! QEMU with and without `nohz=off`), and on a guest that lets it read nothing.

use std::path::Path;
use std::time::Duration;

use tickscope_agent::guest::Probe;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/guest")
        .join(name)
}

#[test]
fn a_nohz_off_guest_reports_its_kernel_config_and_dynticks_state() {
    let f = Probe::new(fixture("debian12-6.1-nohz-off")).collect(Duration::from_millis(5));
    assert_eq!(f.kernel_release.as_deref(), Some("6.1.0-57-cloud-amd64"));
    assert_eq!(f.distro_id.as_deref(), Some("debian"));
    assert_eq!(f.distro_version_id.as_deref(), Some("12"));
    assert_eq!(f.config.source, "boot_config");
    assert_eq!(f.config.hz, Some(250));
    assert_eq!(f.config.no_hz_full, Some(true));
    assert_eq!(f.config.hz_periodic, Some(false));
    assert_eq!(f.dynticks.as_ref().unwrap().nohz_mode, [0, 0]);
    assert_eq!(f.cmdline.as_deref(), Some("console=ttyS0 quiet nohz=off"));
    assert_eq!(f.clocksource.as_deref(), Some("hpet"));
    assert_eq!(f.cpuidle_driver.as_deref(), Some("none"));
    assert_eq!(f.cpus, Some(2));
    assert_eq!(
        f.dmi_uuid.as_deref(),
        Some("12345678-9abc-4def-8123-456789abcdef")
    );
    // The files did not change during the measurement: no rate can be told, so none is made up.
    assert_eq!(f.measured_hz, None);
    assert_eq!(f.idle_fraction, None);
}

#[test]
fn a_tickless_guest_shows_high_resolution_dynticks() {
    let f = Probe::new(fixture("debian12-6.1-tickless")).collect(Duration::from_millis(5));
    assert_eq!(f.dynticks.unwrap().nohz_mode, [2, 2]);
    assert_eq!(f.cmdline.as_deref(), Some("console=ttyS0 quiet"));
}

#[test]
fn a_guest_that_shows_nothing_gives_unknowns() {
    let empty = tempfile::tempdir().unwrap();
    let f = Probe::new(empty.path()).collect(Duration::from_millis(5));
    assert_eq!(f.config.source, "unknown");
    assert_eq!(f.config.hz, None);
    assert_eq!(f.kernel_release, None);
    assert_eq!(f.dynticks, None);
    assert_eq!(f.dmi_uuid, None);
    assert!(f.collected_ms.is_some());
}

#[test]
fn idle_time_is_measured_since_the_previous_collection() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("proc")).unwrap();
    let stat = root.path().join("proc/stat");
    std::fs::write(&stat, "cpu  100 0 0 900 0 0 0 0 0 0\n").unwrap();
    let mut probe = Probe::new(root.path());
    assert_eq!(probe.collect(Duration::from_millis(1)).idle_fraction, None);
    // A minute later: 590 of 600 more ticks idle, although the last second was all busy.
    std::fs::write(&stat, "cpu  110 0 0 1490 0 0 0 0 0 0\n").unwrap();
    let idle = probe
        .collect(Duration::from_millis(1))
        .idle_fraction
        .unwrap();
    assert!((idle - 590.0 / 600.0).abs() < 1e-9, "{idle}");
    // The reading says how long it covers: from the first collection's end, across the pause.
    std::thread::sleep(Duration::from_millis(30));
    std::fs::write(
        &stat,
        "cpu  120 0 0 2080 0 0 0 0 0 0
",
    )
    .unwrap();
    let facts = probe.collect(Duration::from_millis(1));
    let measured_s = facts.idle_measured_s.unwrap();
    assert!((0.03..5.0).contains(&measured_s), "{measured_s}");
}
