//! An alert's identity as Alertmanager sees it: its label set, the fingerprint hashed from it,
//! and the group it falls in for a receiver. Pure.

use std::collections::BTreeMap;

/// Label names to values, sorted by name (as Alertmanager hashes and prints them).
pub type LabelSet = BTreeMap<String, String>;

/// Alertmanager's fingerprint of a label set (prometheus/common `model.LabelSet.Fingerprint`):
/// FNV-1a 64 over the labels sorted by name, each name then 0xff then its value then 0xff,
/// written as 16 lowercase hex digits. An empty set is the hash of nothing, the offset basis,
/// as Go's `emptyLabelSignature`.
pub fn fingerprint(labels: &LabelSet) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for (name, value) in labels {
        for part in [name.as_bytes(), &[0xff], value.as_bytes(), &[0xff]] {
            for byte in part {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(PRIME);
            }
        }
    }
    format!("{hash:016x}")
}

/// A stored JSON object of strings (labels or annotations); empty if it is not one.
pub fn parse_set(json: &str) -> LabelSet {
    serde_json::from_str(json).unwrap_or_default()
}

/// A label set (or annotations) as stored.
pub fn set_json(set: &LabelSet) -> String {
    serde_json::to_string(set).unwrap_or_else(|_| "{}".into())
}

/// The labels an alert is grouped by for a receiver: `alertname` and the receiver's own
/// `group_by` names, those the alert has.
pub fn group_labels(labels: &LabelSet, group_by: &[String]) -> LabelSet {
    labels
        .iter()
        .filter(|(name, _)| *name == "alertname" || group_by.contains(name))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// Alertmanager's `groupKey` of a group under the root route: `{}:` then the group labels as
/// Go prints a label set (`{name="value", ...}`, values quoted).
pub fn group_key(group_labels: &LabelSet) -> String {
    let pairs: Vec<String> = group_labels
        .iter()
        .map(|(n, v)| format!("{n}={}", go_quote(v)))
        .collect();
    format!("{{}}:{{{}}}", pairs.join(", "))
}

/// A string quoted as Go's `%q` does for printable text: backslash and double quote escaped,
/// control characters as escapes.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The name/value pairs every set has alike (Alertmanager's `commonLabels` and
/// `commonAnnotations`); empty for no sets.
pub fn common<'a>(sets: impl IntoIterator<Item = &'a LabelSet>) -> LabelSet {
    let mut sets = sets.into_iter();
    let Some(first) = sets.next() else {
        return LabelSet::new();
    };
    let mut common = first.clone();
    for set in sets {
        common.retain(|name, value| set.get(name) == Some(value));
    }
    common
}

/// A group_by setting as stored (comma-separated names) as names: trimmed, empty ones dropped.
pub fn parse_group_by(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `name` is a valid Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
pub fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> LabelSet {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// The expected fingerprints were computed by a real Alertmanager 0.25.0 (Debian's
    /// prometheus-alertmanager 0.25.0-1+b4): started on 127.0.0.1:19093 with a route to a
    /// receiver without configs, each label set POSTed as `[{"labels": {...}}]` to
    /// /api/v2/alerts, and the `fingerprint` of each alert read back from GET /api/v2/alerts.
    /// server/tests/suite/alertmanager.rs also compares them with a running Alertmanager's.
    #[test]
    fn fingerprints_are_alertmanagers() {
        let cases = [
            (
                set(&[
                    ("alertname", "Idle guest burning CPU"),
                    ("severity", "warning"),
                    ("guest", "web-01"),
                    ("guest_id", "7"),
                    ("host", "hv1"),
                    ("hypervisor", "qemu"),
                    ("rule_id", "1"),
                ]),
                "5f6dd0265d2946f4",
            ),
            (
                set(&[
                    ("alertname", "Agent silent"),
                    ("host", "hv1"),
                    ("severity", "critical"),
                    ("rule_id", "2"),
                ]),
                "78a024c8df20d3fd",
            ),
            (
                set(&[("alertname", "x"), ("guest", "naïve \"quoted\" é")]),
                "93ba873ee3e832b2",
            ),
            // prometheus/common's emptyLabelSignature: FNV-1a 64's offset basis.
            (set(&[]), "cbf29ce484222325"),
        ];
        for (labels, expected) in cases {
            assert_eq!(fingerprint(&labels), expected, "{labels:?}");
        }
    }

    #[test]
    fn group_keys_print_the_group_labels_as_alertmanager_does() {
        let labels = set(&[
            ("alertname", "Idle \"guest\""),
            ("host", "hv1"),
            ("guest", "a"),
        ]);
        let cases: [(&[&str], &str); 3] = [
            (&[], r#"{}:{alertname="Idle \"guest\""}"#),
            (&["host"], r#"{}:{alertname="Idle \"guest\"", host="hv1"}"#),
            (&["missing"], r#"{}:{alertname="Idle \"guest\""}"#),
        ];
        for (by, expected) in cases {
            let by: Vec<String> = by.iter().map(|s| s.to_string()).collect();
            assert_eq!(group_key(&group_labels(&labels, &by)), expected, "{by:?}");
        }
    }

    #[test]
    fn common_labels_are_those_all_sets_share() {
        let a = set(&[("alertname", "r"), ("host", "hv1"), ("guest", "a")]);
        let b = set(&[("alertname", "r"), ("host", "hv2"), ("guest", "b")]);
        let c = set(&[("alertname", "r"), ("host", "hv1")]);
        assert_eq!(common([&a, &b]), set(&[("alertname", "r")]));
        assert_eq!(
            common([&a, &c]),
            set(&[("alertname", "r"), ("host", "hv1")])
        );
        assert_eq!(common([&a]), a);
        assert_eq!(common(std::iter::empty::<&LabelSet>()), LabelSet::new());
    }

    #[test]
    fn group_by_settings_are_label_names() {
        assert_eq!(parse_group_by(" host, ,guest "), ["host", "guest"]);
        assert!(parse_group_by("").is_empty());
        for (name, valid) in [("host", true), ("_x1", true), ("1x", false), ("a-b", false)] {
            assert_eq!(valid_label_name(name), valid, "{name}");
        }
    }
}
