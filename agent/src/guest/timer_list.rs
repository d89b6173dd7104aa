//! `/proc/timer_list` (2.6.21 and later; readable by root): the kernel's clock, the jiffies
//! counter and each CPU's dynticks state.

/// What one reading of `/proc/timer_list` tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerList {
    /// `now at N nsecs`: the monotonic clock when the file was produced.
    pub now_ns: Option<u64>,
    /// `jiffies: N` (printed once per CPU; all the same counter).
    pub jiffies: Option<u64>,
    /// Each CPU's `.nohz_mode` (0 periodic, 1 low-res dynticks, 2 high-res dynticks); from 6.9
    /// kernels print `.nohz` and `.highres` flags instead, read as the same three modes.
    pub nohz_mode: Vec<u32>,
    /// CPUs with `.tick_stopped : 1`.
    pub tick_stopped_cpus: u32,
    /// The clock event device of CPU 0's tick (`Per CPU device: 0`, then `Clock Event Device:
    /// lapic-deadline`): `pit` or `hpet` when the local APIC timer is not used.
    pub tick_device: Option<String>,
}

pub fn parse(text: &str) -> TimerList {
    let mut list = TimerList {
        now_ns: None,
        jiffies: None,
        nohz_mode: Vec::new(),
        tick_stopped_cpus: 0,
        tick_device: None,
    };
    // The tick device section being read: which CPU's, if a per-CPU one.
    let mut tick_device_cpu: Option<u32> = None;
    // Per-CPU fields, gathered until the next `cpu:` line (or the tick devices that follow).
    let mut cpu: Option<CpuTick> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("now at ") {
            list.now_ns = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if line.starts_with("cpu:") || line.starts_with("Tick Device:") {
            if let Some(mode) = cpu.take().and_then(|c| c.mode()) {
                list.nohz_mode.push(mode);
            }
            if line.starts_with("cpu:") {
                cpu = Some(CpuTick::default());
            }
            tick_device_cpu = None;
        } else if let Some(n) = line.strip_prefix("Per CPU device:") {
            tick_device_cpu = n.trim().parse().ok();
        } else if let Some(name) = line.strip_prefix("Clock Event Device:") {
            if tick_device_cpu == Some(0) && list.tick_device.is_none() {
                list.tick_device = Some(name.trim().to_string()).filter(|n| !n.is_empty());
            }
        } else if let Some(rest) = line.strip_prefix("jiffies:") {
            if list.jiffies.is_none() {
                list.jiffies = rest.trim().parse().ok();
            }
        } else if let (Some(c), Some((key, value))) = (cpu.as_mut(), line.trim().split_once(':')) {
            let value = value.trim();
            let flag = value.parse::<u32>().ok();
            match key.trim() {
                ".nohz_mode" => c.nohz_mode = flag,
                ".nohz" => c.nohz = flag.map(|f| f > 0),
                ".highres" | ".hres_active" => c.highres = flag.map(|f| f > 0),
                ".tick_stopped" if value == "1" => list.tick_stopped_cpus += 1,
                _ => {}
            }
        }
    }
    if let Some(mode) = cpu.and_then(|c| c.mode()) {
        list.nohz_mode.push(mode);
    }
    list
}

/// One CPU's tick fields: `.nohz_mode` before 6.9, `.nohz` and `.highres` flags after.
#[derive(Default)]
struct CpuTick {
    nohz_mode: Option<u32>,
    nohz: Option<bool>,
    highres: Option<bool>,
}

impl CpuTick {
    fn mode(&self) -> Option<u32> {
        self.nohz_mode.or_else(|| {
            self.nohz.map(|on| match (on, self.highres) {
                (false, _) => 0,
                (true, Some(true)) => 2,
                (true, _) => 1,
            })
        })
    }
}

/// The tick rate between two readings: jiffies counted over the kernel's own clock, in Hz.
pub fn measured_hz(before: &TimerList, after: &TimerList) -> Option<f64> {
    let jiffies = after.jiffies?.checked_sub(before.jiffies?)?;
    let elapsed_ns = after.now_ns?.checked_sub(before.now_ns?)?;
    (elapsed_ns > 0).then(|| jiffies as f64 * 1e9 / elapsed_ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_6_1_NOHZ_OFF: &str =
        include_str!("../../tests/fixtures/guest/debian12-6.1-nohz-off/proc/timer_list");
    const DEBIAN_6_1_TICKLESS: &str =
        include_str!("../../tests/fixtures/guest/debian12-6.1-tickless/proc/timer_list");

    /// The layout of 2.6.32-4.x kernels (version v0.6-v0.8), cut to one CPU's fields.
    const LAYOUT_V0_7: &str = "Timer List Version: v0.7\nHRTIMER_MAX_CLOCK_BASES: 4\nnow at 4247480622153 nsecs\n\ncpu: 0\n clock 0:\n  .base:       0000000000000000\n  .index:      0\n  .resolution: 1 nsecs\n  .get_time:   ktime_get\n  .offset:     0 nsecs\nactive timers:\n  .expires_next   : 4247488930657 nsecs\n  .hres_active    : 1\n  .nr_events      : 1073456\n  .nohz_mode      : 2\n  .last_tick      : 4247472000000 nsecs\n  .tick_stopped   : 1\n  .idle_jiffies   : 4295998163\n  .idle_calls     : 2109745\n  .idle_sleeps    : 1711064\n  .last_jiffies   : 4295998165\n  .next_jiffies   : 4295998167\njiffies: 4295998165\n";

    #[test]
    fn real_6_1_readings_give_clock_jiffies_and_dynticks() {
        let off = parse(DEBIAN_6_1_NOHZ_OFF);
        assert_eq!(off.now_ns, Some(4_364_449_560));
        assert_eq!(off.jiffies, Some(4_294_893_388));
        assert_eq!(off.nohz_mode, [0, 0], "nohz=off: both CPUs periodic");
        assert_eq!(
            off.tick_device.as_deref(),
            Some("lapic"),
            "CPU 0's device, not the broadcast hpet listed before it"
        );
        let tickless = parse(DEBIAN_6_1_TICKLESS);
        assert_eq!(tickless.nohz_mode, [2, 2]);
    }

    #[test]
    fn older_layout_is_read_the_same_way() {
        let t = parse(LAYOUT_V0_7);
        assert_eq!(t.now_ns, Some(4_247_480_622_153));
        assert_eq!(t.jiffies, Some(4_295_998_165));
        assert_eq!(t.nohz_mode, [2]);
        assert_eq!(t.tick_stopped_cpus, 1);
    }

    /// The 6.9+ layout (v0.10): flags instead of `.nohz_mode`.
    #[test]
    fn newer_flag_layout_gives_the_same_modes() {
        let text = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 5000000000 nsecs\n\n\
                    cpu: 0\n clock 0:\n  .index:      0\nactive timers:\n  .expires_next   : 5004000000 nsecs\n  .hres_active    : 1\n  .nr_events      : 900\n  .nohz           : 1\n  .highres        : 1\n  .tick_stopped   : 1\njiffies: 4294893388\n\n\
                    cpu: 1\n clock 0:\n  .index:      0\nactive timers:\n  .hres_active    : 1\n  .nohz           : 0\n  .highres        : 1\n  .tick_stopped   : 0\njiffies: 4294893388\n\n\
                    Tick Device: mode:     1\nBroadcast device\nClock Event Device: hpet\n";
        let t = parse(text);
        assert_eq!(t.nohz_mode, [2, 0]);
        assert_eq!(t.tick_stopped_cpus, 1);
        assert_eq!(t.tick_device, None, "only a broadcast device is listed");
        assert_eq!(t.jiffies, Some(4_294_893_388));
    }

    #[test]
    fn hz_is_jiffies_over_the_kernels_clock() {
        let at = |now_ns, jiffies| TimerList {
            now_ns: Some(now_ns),
            jiffies: Some(jiffies),
            nohz_mode: vec![],
            tick_stopped_cpus: 0,
            tick_device: None,
        };
        let hz = measured_hz(&at(1_000_000_000, 5000), &at(2_004_000_000, 5251)).unwrap();
        assert!((hz - 250.0).abs() < 0.01, "{hz}");
        assert_eq!(measured_hz(&at(5, 10), &at(5, 20)), None);
        assert_eq!(measured_hz(&at(5, 10), &parse("garbage")), None);
    }
}
