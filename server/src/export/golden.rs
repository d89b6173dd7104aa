//! The exports' exact bytes on a fixed fleet, against files written by the exports as they were
//! before they were streamed (issue 18): streaming them row by row must not change one byte. A
//! deliberate change rewrites them (`TICKSCOPE_WRITE_GOLDEN=1`), the diff checked by hand: in
//! issue 29, columns added at the end and group keys that start with the cause.

use std::collections::HashMap;
use std::sync::Arc;

use crate::analysis::cost::CostModel;
use crate::analysis::history::Accumulated;
use crate::analysis::kernel::{KernelFacts, NohzBuilt};
use crate::analysis::{analyse_host, test_window};
use crate::domain::{GuestId, HostId};
use crate::fleet::{self, AnalysedGuest, WasteSoFar};

use super::cells::Context;
use super::guests::guests_csv;
use super::plan::{plan_csv, plan_guests_csv};

/// A guest with names a spreadsheet would misread, and kernel facts for some.
fn guest(
    id: i64,
    name: &str,
    cpu_pct: f64,
    wakeups: f64,
    kernel: Option<(&str, &str, u32)>,
) -> AnalysedGuest {
    let window = test_window(
        1 + (id % 3) as u32,
        cpu_pct,
        wakeups,
        Some("console=ttyS0 nohz=off"),
    );
    let verdict = analyse_host(std::slice::from_ref(&window)).remove(0);
    AnalysedGuest {
        id: GuestId(id),
        name: name.into(),
        uuid: (id % 2 == 0).then(|| format!("00000000-0000-4000-8000-{id:012}")),
        host: format!("hv-{}", id % 2),
        host_id: HostId(1 + id % 2),
        hypervisor: "qemu".into(),
        management: (id % 3 == 0).then(|| "libvirt".to_string()),
        vcpus: window.vcpus,
        pid: 1000 + id,
        boot_args: Some("console=ttyS0 nohz=off".into()),
        uses_kvm: Some(true),
        setup: Default::default(),
        platform: None,
        cpu_source: Some("cgroup".into()),
        last_seen_ms: 1_796_300_000_000 + id * 1000,
        intervals: 6,
        window_s: 60.0,
        analysed_ms: 1_796_300_100_000,
        kernel: kernel.map(|(release, distro, hz)| KernelFacts {
            source: "probe_channel".into(),
            age_s: 12.5,
            kernel_release: Some(release.into()),
            distro: Some(distro.into()),
            config_hz: Some(hz),
            nohz: NohzBuilt::None,
            measured_hz: Some(f64::from(hz) * 0.99),
            dynticks_active: Some(false),
            cmdline: Some("console=ttyS0".into()),
            idle_fraction: Some(0.97),
            clocksource: Some("kvm-clock".into()),
            available_clocksources: vec!["kvm-clock".into()],
            cpuidle_driver: None,
            os_id: None,
            tick_device: None,
        }),
        verdict,
        process_totals: None,
    }
}

fn fixed_fleet() -> Vec<Arc<AnalysedGuest>> {
    let mut guests = vec![
        guest(1, "web-01", 0.3, 20.0, None),
        guest(
            2,
            "=cmd|' /C calc'!A0",
            4.1,
            2935.0,
            Some(("2.6.18-398.el5", "CentOS 5", 1000)),
        ),
        guest(
            3,
            "quote\"d, 'and' comma",
            5.3,
            650.0,
            Some(("2.6.32-754.el6", "CentOS 6", 1000)),
        ),
        guest(
            4,
            "evil\u{202e}gpj.exe",
            8.6,
            572.0,
            Some(("2.6.32-754.el6", "CentOS 6", 1000)),
        ),
        guest(5, "@SUM(A1)", 78.0, 300.0, None),
        guest(
            6,
            "ünïcödé ☃",
            2.0,
            250.0,
            Some(("3.10.0-1160.el7", "+CentOS 7", 250)),
        ),
        guest(
            7,
            "-2+3",
            6.0,
            1000.0,
            Some(("2.6.18-398.el5", "CentOS 5", 1000)),
        ),
    ]
    .into_iter()
    .map(Arc::new)
    .collect::<Vec<_>>();
    fleet::rank(&mut guests);
    guests
}

fn so_far() -> HashMap<GuestId, WasteSoFar> {
    let spans = |wasted: f64, measured: f64| WasteSoFar {
        last_24h: Accumulated {
            wasted_core_hours: wasted,
            measured_hours: measured,
            idle_hours: measured * 0.9,
        },
        last_7d: Accumulated {
            wasted_core_hours: wasted * 6.5,
            measured_hours: measured * 7.0,
            idle_hours: measured * 6.0,
        },
    };
    HashMap::from([
        (GuestId(2), spans(0.92, 24.0)),
        (GuestId(4), spans(1.5, 12.25)),
        (GuestId(6), spans(0.0, 0.0)),
    ])
}

fn context(model: &CostModel, demo: bool) -> Context {
    Context {
        model: model.clone(),
        now_ms: 1_796_300_200_000,
        demo,
    }
}

#[test]
fn the_exports_are_byte_for_byte_what_they_were() {
    let guests = fixed_fleet();
    let plan = fleet::plan(&guests);
    let model = CostModel::default();
    let cases = [
        (
            "guests.csv",
            guests_csv(guests.clone(), so_far(), context(&model, false))
                .text()
                .unwrap(),
            include_str!("testdata/guests.csv"),
        ),
        (
            "guests-demo.csv",
            guests_csv(guests.clone(), HashMap::new(), context(&model, true))
                .text()
                .unwrap(),
            include_str!("testdata/guests-demo.csv"),
        ),
        (
            "plan.csv",
            plan_csv(plan.clone(), &guests, context(&model, false))
                .text()
                .unwrap(),
            include_str!("testdata/plan.csv"),
        ),
        (
            "plan-guests.csv",
            plan_guests_csv(plan, &guests, context(&model, false))
                .text()
                .unwrap(),
            include_str!("testdata/plan-guests.csv"),
        ),
    ];
    if std::env::var_os("TICKSCOPE_WRITE_GOLDEN").is_some() {
        for (name, written, _) in &cases {
            std::fs::write(format!("src/export/testdata/{name}"), written).unwrap();
        }
    }
    for (name, written, recorded) in cases {
        assert_eq!(written, recorded, "{name}");
    }
}
