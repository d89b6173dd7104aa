//! Closing the loop: what a guest's host CPU did across a change of its kernel or command line,
//! measured, so an admin sees whether a suggestion worked.

use serde::Serialize;

use super::window::Span;

/// Idle time needed on each side of a change before it is judged, in seconds.
pub const MIN_SPAN_S: f64 = 10.0;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Change {
    /// When the new facts were first received, Unix ms.
    pub at_ms: i64,
    /// Host CPU while idle before and after, in % of one core (busy intervals, the reboot among
    /// them, are left out of both sides).
    pub cpu_before_pct: f64,
    pub cpu_after_pct: f64,
    /// vCPU wake-ups per vCPU per second before and after.
    pub wakeups_before: f64,
    pub wakeups_after: f64,
    /// Share of the time since the change the guest idled, 0 to 1.
    pub idle_share_after: f64,
    /// Host CPU the change saves, in % of one core averaged over all time as waste is (the
    /// difference while idle × the share of time it idles now); negative: it costs more now.
    pub saved_cpu_pct: f64,
}

/// Compares the idle spans before and after a change; `None` until each side has `MIN_SPAN_S`.
/// `idle_share_after` is the share of the time since the change that was idle.
pub fn measure(at_ms: i64, before: &Span, after: &Span, idle_share_after: f64) -> Option<Change> {
    let rates = |s: &Span| {
        (s.length_s >= MIN_SPAN_S && s.vcpu_s > 0.0).then(|| {
            (
                100.0 * s.host_cpu_s / s.length_s,
                s.wakeups as f64 / s.vcpu_s,
            )
        })
    };
    let (cpu_before_pct, wakeups_before) = rates(before)?;
    let (cpu_after_pct, wakeups_after) = rates(after)?;
    Some(Change {
        at_ms,
        cpu_before_pct,
        cpu_after_pct,
        wakeups_before,
        wakeups_after,
        idle_share_after,
        saved_cpu_pct: (cpu_before_pct - cpu_after_pct) * idle_share_after,
    })
}

#[cfg(test)]
impl Change {
    /// A change for tests: made at `at_ms`, saving `saved_cpu_pct` of a guest at 5 % and 250
    /// wake-ups a second that then idles wholly.
    pub(crate) fn example(at_ms: i64, saved_cpu_pct: f64) -> Change {
        Change {
            at_ms,
            cpu_before_pct: 5.0,
            cpu_after_pct: 5.0 - saved_cpu_pct,
            wakeups_before: 250.0,
            wakeups_after: 30.0,
            idle_share_after: 1.0,
            saved_cpu_pct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(cpu_pct: f64, wakeups_per_s: f64, length_s: f64) -> Span {
        Span {
            host_cpu_s: cpu_pct / 100.0 * length_s,
            length_s,
            vcpu_s: length_s,
            wakeups: (wakeups_per_s * length_s) as u64,
            parts: Default::default(),
            halt_poll_length_s: 0.0,
            halt_poll_s: 0.0,
        }
    }

    #[test]
    fn before_and_after_a_change() {
        // (before, after, saved % of a core)
        let cases = [
            (span(5.3, 650.0, 600.0), span(0.3, 38.0, 600.0), Some(5.0)),
            (span(0.3, 38.0, 600.0), span(5.3, 650.0, 60.0), Some(-5.0)),
            (span(5.3, 650.0, 600.0), span(0.3, 38.0, 5.0), None),
            (Span::default(), span(0.3, 38.0, 60.0), None),
        ];
        for (before, after, saved) in cases {
            let change = measure(1, &before, &after, 1.0);
            match (change, saved) {
                (Some(c), Some(s)) => assert!((c.saved_cpu_pct - s).abs() < 1e-9, "{c:?}"),
                (None, None) => {}
                other => panic!("{other:?}"),
            }
        }
        // A guest idle half the time since saves half as much, averaged as waste is.
        let c = measure(7, &span(5.3, 650.0, 600.0), &span(0.3, 38.0, 600.0), 0.5).unwrap();
        assert!((c.saved_cpu_pct - 2.5).abs() < 1e-9, "{c:?}");
        assert_eq!(c.at_ms, 7);
        assert!((c.wakeups_before - 650.0).abs() < 0.01 && (c.wakeups_after - 38.0).abs() < 0.01);
    }
}
