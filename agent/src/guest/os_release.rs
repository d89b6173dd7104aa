//! `/etc/os-release`: which distribution the guest runs.

/// ID, VERSION_ID and PRETTY_NAME, with shell quoting removed.
pub fn parse(text: &str) -> (Option<String>, Option<String>, Option<String>) {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let v = line.strip_prefix(key)?.strip_prefix('=')?.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (!v.is_empty()).then(|| v.to_string())
        })
    };
    (value("ID"), value("VERSION_ID"), value("PRETTY_NAME"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_and_rhel_files() {
        let debian =
            include_str!("../../tests/fixtures/guest/debian12-6.1-tickless/etc/os-release");
        let (id, version, name) = parse(debian);
        assert_eq!(id.as_deref(), Some("debian"));
        assert_eq!(version.as_deref(), Some("12"));
        assert!(name.unwrap().starts_with("Debian GNU/Linux 12"));
        let rhel = "NAME='Red Hat Enterprise Linux'\nID=rhel\nVERSION_ID=\"7.9\"\nPRETTY_NAME=\"Red Hat Enterprise Linux Server 7.9 (Maipo)\"\n";
        assert_eq!(
            parse(rhel),
            (
                Some("rhel".into()),
                Some("7.9".into()),
                Some("Red Hat Enterprise Linux Server 7.9 (Maipo)".into())
            )
        );
        assert_eq!(parse(""), (None, None, None));
    }
}
