//! CPU time and timer interrupts, read twice to make rates: `/proc/stat` and `/proc/interrupts`.

/// Idle (idle + iowait) and total CPU time of the `cpu` line of `/proc/stat`, in USER_HZ ticks.
/// Guest time is left out of the total: it is already counted in user time.
pub fn cpu_idle_and_total(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 4 {
        return None;
    }
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    Some((idle, fields.iter().sum()))
}

/// Local timer interrupts (`LOC`) summed over CPUs, and the number of CPU columns.
pub fn local_timer_interrupts(interrupts: &str) -> Option<(u64, u32)> {
    let mut lines = interrupts.lines();
    let cpus = lines
        .next()?
        .split_whitespace()
        .filter(|c| c.starts_with("CPU"))
        .count();
    let loc = lines.find(|l| l.trim_start().starts_with("LOC:"))?;
    let total = loc
        .trim_start()
        .trim_start_matches("LOC:")
        .split_whitespace()
        .take(cpus)
        .map(|n| n.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some((total, u32::try_from(cpus).ok().filter(|&n| n > 0)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_6_1: &str =
        include_str!("../../tests/fixtures/guest/debian12-6.1-tickless/proc/stat");
    const INTERRUPTS_6_1: &str =
        include_str!("../../tests/fixtures/guest/debian12-6.1-nohz-off/proc/interrupts");

    #[test]
    fn cpu_line_of_6_1_and_of_2_6_18() {
        // 2.6.18 has eight fields (no guest, guest_nice).
        assert_eq!(
            cpu_idle_and_total("cpu  100 5 50 800 40 3 2 0\ncpu0 1 2 3 4\n"),
            Some((840, 1000))
        );
        // 2.6.9 had only seven (no steal).
        assert_eq!(
            cpu_idle_and_total("cpu  10 0 10 70 10 0 0\n"),
            Some((80, 100))
        );
        let (idle, total) = cpu_idle_and_total(STAT_6_1).unwrap();
        assert!(idle > 0 && idle < total);
        assert_eq!(cpu_idle_and_total("intr 5\n"), None);
        assert_eq!(cpu_idle_and_total("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn loc_line_sums_the_cpu_columns() {
        assert_eq!(local_timer_interrupts(INTERRUPTS_6_1), Some((973 + 917, 2)));
        // 2.6.18 layout: one CPU, LOC without a description.
        let old = "           CPU0       \n  0:    1000000    IO-APIC-edge  timer\nLOC:    2500123 \nERR:          0\n";
        assert_eq!(local_timer_interrupts(old), Some((2_500_123, 1)));
        // Xen PV guests have no LOC line: unknown, not zero.
        let xen = "           CPU0\n 16:  1234  xen-percpu-virq  timer0\n";
        assert_eq!(local_timer_interrupts(xen), None);
    }
}
