//! Reading a hypervisor's command line: flags, indexes in names, file stems.

/// The value of `--flag value` or `--flag=value` (also single-dash `-flag value`).
pub(crate) fn flag_value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    let mut args = argv.iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == flag {
            return args.next().map(String::as_str);
        }
        if let Some(value) = arg.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            return Some(value);
        }
    }
    None
}

/// Every value of a flag that may repeat (`-chardev a -chardev b`).
pub(crate) fn flag_values<'a>(argv: &'a [String], flag: &'a str) -> impl Iterator<Item = &'a str> {
    argv.windows(2)
        .filter(move |pair| pair[0] == flag)
        .map(|pair| pair[1].as_str())
}

/// Splits a QEMU option string on commas; a doubled comma is a literal comma in a value.
pub(crate) fn split_options(value: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' {
            if chars.peek() == Some(&',') {
                chars.next();
                parts.last_mut().unwrap().push(',');
            } else {
                parts.push(String::new());
            }
        } else {
            parts.last_mut().unwrap().push(c);
        }
    }
    parts
}

/// Parses a trailing number from a thread name after a fixed prefix: `prefix` + digits.
pub(crate) fn index_after(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// The file name of a path without its extension, for names taken from sockets and configs.
pub(crate) fn file_stem(path: &str) -> Option<&str> {
    let file = path.rsplit('/').next()?;
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    (!stem.is_empty()).then_some(stem)
}

#[cfg(test)]
pub(crate) fn argv(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_in_both_spellings_are_found() {
        let a = argv("fc --id vm1 --api-sock=/run/fc.sock");
        assert_eq!(flag_value(&a, "--id"), Some("vm1"));
        assert_eq!(flag_value(&a, "--api-sock"), Some("/run/fc.sock"));
        assert_eq!(flag_value(&a, "--missing"), None);
        // A flag at the very end has no value.
        assert_eq!(flag_value(&argv("fc --id"), "--id"), None);
    }
}
