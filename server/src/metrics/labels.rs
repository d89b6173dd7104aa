//! The label sets of the per-guest series, and how a label value is written.
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
//! the VMs, so every value is written through [`push_value`]: what [`show_invisible`] shows,
//! with `\` and `"` escaped as the exposition formats want.
//!
//! The label sets are handed out one label at a time (`label(name, value)`) rather than
//! collected: a scrape writes 100,000 guests' labels straight into its text.

use crate::fleet::AnalysedGuest;
use crate::visible::show_invisible;

/// Where a label set goes: each label's name and value (as the guest has it, not yet escaped),
/// in the order they are written.
pub type Sink<'a> = dyn FnMut(&'static str, &str) + 'a;

/// Hands `label` the label `name` unless `value` is absent or empty.
fn push_known(label: &mut Sink, name: &'static str, value: Option<&str>) {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        label(name, value);
    }
}

/// The labels of a guest's measured series, in the order they are written.
pub fn identity(g: &AnalysedGuest, label: &mut Sink) {
    label("guest", &g.name);
    label("guest_id", itoa::Buffer::new().format(g.id.0));
    label("host", &g.host);
    label("hypervisor", &g.hypervisor);
    push_known(label, "uuid", g.uuid.as_deref());
}

/// The labels a guest's `tickscope_guest_info` series has after its [`identity`]: the verdict
/// and the facts its kernel reported.
pub fn info(g: &AnalysedGuest, label: &mut Sink) {
    let classification = &g.verdict.classification;
    label("tick_mode", classification.mode.as_str());
    label("confidence", classification.confidence.as_str());
    for (name, value) in g.about_labels() {
        push_known(label, name, Some(value));
    }
    push_known(label, "management", g.management.as_deref());
    push_known(label, "cpu_source", g.cpu_source.as_deref());
    if let Some(kernel) = &g.kernel {
        push_known(label, "kernel", kernel.kernel_release.as_deref());
        push_known(label, "distro", kernel.distro.as_deref());
        if let Some(hz) = kernel.config_hz {
            label("config_hz", itoa::Buffer::new().format(hz));
        }
        label("nohz", kernel.nohz.as_str());
        push_known(label, "clocksource", kernel.clocksource.as_deref());
    }
}

/// Adds a label value as both exposition formats quote it: what [`show_invisible`] shows, then
/// `\` and `"` escaped with a backslash. A newline, a control character, is written as `\\n`:
/// the escape `show_invisible` shows, not a line break.
pub fn push_value(out: &mut String, value: &str) {
    // Nearly every value is printable ASCII without a quote or a backslash: nothing to show or
    // escape.
    if value
        .bytes()
        .all(|b| matches!(b, b' '..=b'~') && b != b'\\' && b != b'"')
    {
        out.push_str(value);
        return;
    }
    for c in show_invisible(value).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
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

    /// What a label function hands out for `g`, collected.
    fn collect(
        labels: fn(&AnalysedGuest, &mut Sink),
        g: &AnalysedGuest,
    ) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        labels(g, &mut |name, value| out.push((name, value.to_string())));
        out
    }

    fn names(labels: &[(&'static str, String)]) -> Vec<&'static str> {
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
            let labels = collect(identity, &g);
            assert_eq!(names(&labels), want, "{uuid:?}");
            assert!(labels.iter().all(|(_, v)| !v.is_empty()), "{labels:?}");
            assert_eq!(labels[1].1, "7");
        }
        // The bidi override is shown as an escape; quotes and backslashes are escaped for the
        // format.
        let mut written = String::new();
        push_value(&mut written, &collect(identity, &guest(None, None))[0].1);
        assert_eq!(written, "web \\\"01\\\"\\\\\\\\u{202e}x");
    }

    #[test]
    fn the_info_series_holds_the_verdict_and_the_kernel_facts_it_knows() {
        let g = guest(None, None);
        let without_facts = collect(info, &g);
        assert_eq!(
            names(&without_facts),
            ["tick_mode", "confidence", "cause", "management"]
        );
        assert_eq!(without_facts[0].1, "periodic");
        assert_eq!(without_facts[2].1, "ticking_kernel");

        let facts: tickscope_wire::GuestFacts = serde_json::from_value(serde_json::json!({
            "kernel_release": "6.1.0-9-amd64",
            "distro_name": "Debian GNU/Linux 12 (bookworm)",
            "config": {"source": "boot_config", "hz": 250, "no_hz_idle": true},
            "clocksource": "kvm-clock"
        }))
        .unwrap();
        let g = guest(None, Some(KernelFacts::new(&facts, "probe_channel", 1.0)));
        let with_facts = collect(info, &g);
        let get = |name: &str| {
            with_facts
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("kernel"), Some("6.1.0-9-amd64"));
        assert_eq!(get("distro"), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(get("config_hz"), Some("250"));
        assert_eq!(get("nohz"), Some("idle"));
        assert_eq!(get("clocksource"), Some("kvm-clock"));
        assert_eq!(get("cpu_source"), None, "unknown, so left out");
    }

    #[test]
    fn values_show_what_hides_and_escape_quotes_and_backslashes() {
        let cases = [
            ("web-01", "web-01"),
            ("", ""),
            ("数据库-é-🦀", "数据库-é-🦀"),
            ("a \"b\"", "a \\\"b\\\""),
            ("C:\\vm", "C:\\\\vm"),
            // A newline is a control character: shown as the escape `\n`, whose backslash the
            // format then escapes; never a line break in the exposition.
            ("a\nb", "a\\\\nb"),
            ("exe\u{202e}txt", "exe\\\\u{202e}txt"),
            ("del\u{7f}", "del\\\\u{7f}"),
            ("zw\u{200b}", "zw\\\\u{200b}"),
            ("}\" # x", "}\\\" # x"),
        ];
        for (value, want) in cases {
            let mut out = String::from("x=");
            push_value(&mut out, value);
            assert_eq!(out, format!("x={want}"), "{value:?}");
        }
    }
}
