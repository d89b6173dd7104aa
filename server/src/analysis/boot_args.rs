//! Reading the kernel command line the host can see (direct kernel boot).

/// The value of `key=value` on a kernel command line; `Some("")` for a bare `key`. The kernel
/// takes the last occurrence, so this does too.
pub fn param<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_ascii_whitespace()
        .filter_map(|word| match word.split_once('=') {
            Some((k, v)) if k == key => Some(v),
            None if word == key => Some(""),
            _ => None,
        })
        .next_back()
}

/// Whether the command line sets `key` to `value`.
pub fn has(cmdline: Option<&str>, key: &str, value: &str) -> bool {
    cmdline.and_then(|c| param(c, key)) == Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_found_by_key_and_the_last_one_wins() {
        let cases = [
            ("console=ttyS0 nohz=off quiet", "nohz", Some("off")),
            ("nohz=off nohz=on", "nohz", Some("on")),
            ("quiet", "quiet", Some("")),
            ("nohz_full=1-3", "nohz", None),
            ("idle=poll", "idle", Some("poll")),
            ("", "nohz", None),
        ];
        for (cmdline, key, expected) in cases {
            assert_eq!(param(cmdline, key), expected, "{cmdline:?} {key}");
        }
        assert!(has(Some("a nohz=off"), "nohz", "off"));
        assert!(!has(None, "nohz", "off"));
    }
}
