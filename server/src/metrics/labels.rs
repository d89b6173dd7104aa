//! The label sets of the per-guest series.
//!
//! Measured series (CPU, waste, wake-ups, vCPUs, the counters) carry only what identifies a
//! guest and does not change while it runs: `guest`, `guest_id`, `host`, `hypervisor`, and
//! `uuid` when the agent knows it. What the analysis or the guest says about itself (the tick
//! mode, the kernel, CONFIG_HZ, ...) goes on one `tickscope_guest_info` series with the same
//! identity labels, so a changed verdict ends and starts that one series instead of every
//! measured one; a query joins it back (`* on (guest_id) group_left (tick_mode) ...`).
//!
//! A label whose value is unknown is left out, never sent empty: Prometheus treats an empty
//! label as an absent one, and a `uuid=""` on most guests only looks like data. Names come from
//! the VMs, so every value passes through [`show_invisible`]; the encoder escapes `\`, `"` and
//! newlines.

use std::borrow::Cow;

use crate::fleet::AnalysedGuest;
use crate::visible::show_invisible;

/// A series' labels, in the order they are written. Values borrow from the guest unless they
/// had something to escape (the id is written out), rather than copy four or five strings of
/// each guest at each scrape.
pub type Labels<'a> = Vec<(&'static str, Cow<'a, str>)>;

/// Adds `name` unless `value` is absent or empty.
fn push_known<'a>(labels: &mut Labels<'a>, name: &'static str, value: Option<&'a str>) {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        labels.push((name, show_invisible(value)));
    }
}

/// The labels of a guest's measured series.
pub fn identity(g: &AnalysedGuest) -> Labels<'_> {
    // Room for the uuid too: a scrape holds every guest's identity while it writes.
    let mut labels = Vec::with_capacity(5);
    labels.extend([
        ("guest", show_invisible(&g.name)),
        ("guest_id", Cow::Owned(g.id.to_string())),
        ("host", show_invisible(&g.host)),
        ("hypervisor", show_invisible(&g.hypervisor)),
    ]);
    push_known(&mut labels, "uuid", g.uuid.as_deref());
    labels
}

/// The labels of a guest's `tickscope_guest_info` series: its `identity` ([`identity`]), the
/// verdict and the facts its kernel reported.
pub fn info<'a>(identity: Labels<'a>, g: &'a AnalysedGuest) -> Labels<'a> {
    let mut labels = identity;
    let classification = &g.verdict.classification;
    labels.push(("tick_mode", classification.mode.as_str().into()));
    labels.push(("confidence", classification.confidence.as_str().into()));
    for (name, value) in g.about_labels() {
        push_known(&mut labels, name, Some(value));
    }
    push_known(&mut labels, "management", g.management.as_deref());
    push_known(&mut labels, "cpu_source", g.cpu_source.as_deref());
    if let Some(kernel) = &g.kernel {
        push_known(&mut labels, "kernel", kernel.kernel_release.as_deref());
        push_known(&mut labels, "distro", kernel.distro.as_deref());
        if let Some(hz) = kernel.config_hz {
            labels.push(("config_hz", hz.to_string().into()));
        }
        labels.push(("nohz", kernel.nohz.as_str().into()));
        push_known(&mut labels, "clocksource", kernel.clocksource.as_deref());
    }
    labels
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::analysis::kernel::KernelFacts;
    use crate::analysis::test_window;

    fn guest(uuid: Option<&str>, kernel: Option<KernelFacts>) -> Arc<AnalysedGuest> {
        let window = test_window(1, 5.3, 650.0, None);
        Arc::new(AnalysedGuest {
            name: "web \"01\"\\\u{202e}x".into(),
            uuid: uuid.map(Into::into),
            host: "hv-1".into(),
            management: Some("libvirt".into()),
            pid: 1000,
            kernel,
            ..AnalysedGuest::example(7, &window)
        })
    }

    fn names(labels: &Labels) -> Vec<&'static str> {
        labels.iter().map(|(name, _)| *name).collect()
    }

    #[test]
    fn measured_series_carry_identity_only_and_no_empty_label() {
        let cases = [
            (None, vec!["guest", "guest_id", "host", "hypervisor"]),
            (Some(""), vec!["guest", "guest_id", "host", "hypervisor"]),
            (
                Some("0b6f3c8e-0000-4000-8000-000000000007"),
                vec!["guest", "guest_id", "host", "hypervisor", "uuid"],
            ),
        ];
        for (uuid, want) in cases {
            let g = guest(uuid, None);
            let labels = identity(&g);
            assert_eq!(names(&labels), want, "{uuid:?}");
            assert!(labels.iter().all(|(_, v)| !v.is_empty()), "{labels:?}");
        }
        // The bidi override is shown as an escape; quotes and backslashes are left to the
        // encoder, which escapes them.
        assert_eq!(identity(&guest(None, None))[0].1, "web \"01\"\\\\u{202e}x");
    }

    #[test]
    fn the_info_series_holds_the_verdict_and_the_kernel_facts_it_knows() {
        let g = guest(None, None);
        let without_facts = info(identity(&g), &g);
        assert_eq!(
            names(&without_facts),
            [
                "guest",
                "guest_id",
                "host",
                "hypervisor",
                "tick_mode",
                "confidence",
                "cause",
                "management"
            ]
        );
        assert_eq!(without_facts[4].1, "periodic");
        assert_eq!(without_facts[6].1, "ticking_kernel");

        let facts: tickscope_wire::GuestFacts = serde_json::from_value(serde_json::json!({
            "kernel_release": "6.1.0-9-amd64",
            "distro_name": "Debian GNU/Linux 12 (bookworm)",
            "config": {"source": "boot_config", "hz": 250, "no_hz_idle": true},
            "clocksource": "kvm-clock"
        }))
        .unwrap();
        let g = guest(None, Some(KernelFacts::new(&facts, "probe_channel", 1.0)));
        let with_facts = info(identity(&g), &g);
        let get = |name: &str| {
            with_facts
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_ref())
        };
        assert_eq!(get("kernel"), Some("6.1.0-9-amd64"));
        assert_eq!(get("distro"), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(get("config_hz"), Some("250"));
        assert_eq!(get("nohz"), Some("idle"));
        assert_eq!(get("clocksource"), Some("kvm-clock"));
        assert_eq!(get("cpu_source"), None, "unknown, so left out");
    }
}
