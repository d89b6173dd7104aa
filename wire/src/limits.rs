//! What the server accepts of a string or a count from a VM, and how the agent makes a string
//! fit before it sends it.

/// Longest VM name, host name or kernel release the server accepts, in characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Most vCPUs one VM may report (KVM's own limit is 4096 on x86).
pub const MAX_VCPUS: u32 = 4096;
/// The oldest report an agent's spool may keep, in seconds (the most `--spool-max-hours` allows):
/// the server takes no report that ended longer ago than this, as it cannot be a replay.
pub const MAX_SPOOL_AGE_S: u64 = 30 * 86_400;
/// Longest short label (a VM's management layer) the server accepts, in characters.
pub const MAX_LABEL_CHARS: usize = 64;
/// Longest guest kernel command line the server accepts, in characters.
pub const MAX_BOOT_ARGS_CHARS: usize = 4096;

/// Lower-cases a UUID and checks its 8-4-4-4-12 hex shape; anything else is not a UUID.
pub fn normalise_uuid(text: &str) -> Option<String> {
    let uuid = text.trim().to_ascii_lowercase();
    let groups: Vec<&str> = uuid.split('-').collect();
    let shape_ok = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()));
    shape_ok.then_some(uuid)
}

/// Makes a string read from a VM or host acceptable on the wire: control characters (which the
/// server refuses, since they can forge log lines or terminal output) become U+FFFD and the text
/// is cut to `max_chars`. A VM must not be able to get its host's reports refused by its name.
pub fn clean_text(text: &str, max_chars: usize) -> String {
    text.chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .take(max_chars)
        .collect()
}
