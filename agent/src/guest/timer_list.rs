//! `/proc/timer_list` (2.6.21 and later; readable by root): the kernel's clock, the jiffies
//! counter and each CPU's dynticks state.

/// What one reading of `/proc/timer_list` tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerList {
    /// `now at N nsecs`: the monotonic clock when the file was produced.
    pub now_ns: Option<u64>,
    /// `jiffies: N` (printed once per CPU; all the same counter).
    pub jiffies: Option<u64>,
    /// Each CPU's `.nohz_mode` (0 periodic, 1 low-res dynticks, 2 high-res dynticks); newer
    /// kernels print a boolean `.nohz` instead, taken as 0 or 1.
    pub nohz_mode: Vec<u32>,
    /// CPUs with `.tick_stopped : 1`.
    pub tick_stopped_cpus: u32,
}

pub fn parse(text: &str) -> TimerList {
    let mut list = TimerList {
        now_ns: None,
        jiffies: None,
        nohz_mode: Vec::new(),
        tick_stopped_cpus: 0,
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("now at ") {
            list.now_ns = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if let Some(rest) = line.strip_prefix("jiffies:") {
            if list.jiffies.is_none() {
                list.jiffies = rest.trim().parse().ok();
            }
        } else if let Some((key, value)) = line.trim().split_once(':') {
            let value = value.trim();
            match key.trim() {
                ".nohz_mode" | ".nohz" => {
                    if let Ok(mode) = value.parse() {
                        list.nohz_mode.push(mode);
                    }
                }
                ".tick_stopped" if value == "1" => list.tick_stopped_cpus += 1,
                _ => {}
            }
        }
    }
    list
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

    #[test]
    fn hz_is_jiffies_over_the_kernels_clock() {
        let at = |now_ns, jiffies| TimerList {
            now_ns: Some(now_ns),
            jiffies: Some(jiffies),
            nohz_mode: vec![],
            tick_stopped_cpus: 0,
        };
        let hz = measured_hz(&at(1_000_000_000, 5000), &at(2_004_000_000, 5251)).unwrap();
        assert!((hz - 250.0).abs() < 0.01, "{hz}");
        assert_eq!(measured_hz(&at(5, 10), &at(5, 20)), None);
        assert_eq!(measured_hz(&at(5, 10), &parse("garbage")), None);
    }
}
