//! Reading the few `/proc` files the agent needs, cheaply.
//!
//! The root is a parameter so that discovery and sampling can run on recorded fixtures in tests.
//! Parsing is in pure functions; `ProcFs` only does the I/O, reusing one buffer for every read
//! because the agent reads a few hundred small files per cycle and must stay cheap.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The fields of `/proc/<pid>/stat` the agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// Command name, at most 15 bytes (the kernel truncates it).
    pub comm: String,
    /// User plus system CPU time of all threads of the process, in clock ticks (`CLK_TCK`).
    pub cpu_ticks: u64,
    /// When the process started, in clock ticks after boot: with the pid, a unique identity.
    pub start_ticks: u64,
}

/// Parses `/proc/<pid>/stat`. The command name may itself contain spaces and parentheses, so it
/// is everything between the first `(` and the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // Fields after the comm, numbered from 3 (state) as in proc(5).
    let rest: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let field = |n: usize| -> Option<u64> { rest.get(n - 3)?.parse().ok() };
    Some(ProcStat {
        comm,
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
    })
}

/// Sums `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` from a `status` file.
pub fn parse_context_switches(status: &str) -> Option<u64> {
    let mut voluntary = None;
    let mut involuntary = None;
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
            voluntary = v.trim().parse::<u64>().ok();
        } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
            involuntary = v.trim().parse::<u64>().ok();
        }
    }
    voluntary?.checked_add(involuntary?)
}

/// Splits `/proc/<pid>/cmdline` (NUL-separated, possibly NUL-terminated) into arguments.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// A `/proc` tree (the real one, or a fixture).
pub struct ProcFs {
    root: PathBuf,
    buf: Vec<u8>,
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs {
            root: root.into(),
            buf: Vec::with_capacity(4096),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Process ids present now.
    pub fn pids(&self) -> std::io::Result<Vec<u32>> {
        numeric_entries(&self.root)
    }

    /// Thread ids of a process.
    pub fn tids(&self, pid: u32) -> std::io::Result<Vec<u32>> {
        numeric_entries(&self.root.join(pid.to_string()).join("task"))
    }

    pub fn stat(&mut self, pid: u32) -> Option<ProcStat> {
        let path = self.root.join(format!("{pid}/stat"));
        parse_stat(self.read_text(&path)?)
    }

    pub fn cmdline(&mut self, pid: u32) -> Vec<String> {
        let path = self.root.join(format!("{pid}/cmdline"));
        match self.read(&path) {
            Some(bytes) => parse_cmdline(bytes),
            None => Vec::new(),
        }
    }

    /// A thread's name (`/proc/<pid>/task/<tid>/comm`), without the trailing newline.
    pub fn thread_name(&mut self, pid: u32, tid: u32) -> Option<String> {
        let path = self.root.join(format!("{pid}/task/{tid}/comm"));
        Some(self.read_text(&path)?.trim_end_matches('\n').to_string())
    }

    /// A thread's context switches so far (voluntary + involuntary).
    pub fn thread_switches(&mut self, pid: u32, tid: u32) -> Option<u64> {
        let path = self.root.join(format!("{pid}/task/{tid}/status"));
        parse_context_switches(self.read_text(&path)?)
    }

    /// Reads a small file below the root, for things like a host's `sys` files in fixtures.
    pub fn read_file(&mut self, path: &Path) -> Option<String> {
        self.read_text(path).map(str::to_string)
    }

    fn read(&mut self, path: &Path) -> Option<&[u8]> {
        self.buf.clear();
        File::open(path).ok()?.read_to_end(&mut self.buf).ok()?;
        Some(&self.buf)
    }

    fn read_text(&mut self, path: &Path) -> Option<&str> {
        std::str::from_utf8(self.read(path)?).ok()
    }
}

fn numeric_entries(dir: &Path) -> std::io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(id) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            ids.push(id);
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parentheses_in_the_name_parses() {
        // A real qemu line, with the comm replaced by a hostile one.
        let line = "4799 (evil) (name) S 4790 4799 4790 0 -1 4194560 23113 0 0 0 \
                    331 73 0 0 20 0 4 0 1234567 1393410048 63092 18446744073709551615";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.comm, "evil) (name");
        assert_eq!(stat.cpu_ticks, 331 + 73);
        assert_eq!(stat.start_ticks, 1234567);
    }

    #[test]
    fn truncated_stat_is_rejected() {
        assert_eq!(parse_stat("12 (qemu) S 1 2 3"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn context_switches_are_voluntary_plus_involuntary() {
        let status = "Name:\tCPU 0/TCG\nState:\tS (sleeping)\n\
                      voluntary_ctxt_switches:\t3500\nnonvoluntary_ctxt_switches:\t90\n";
        assert_eq!(parse_context_switches(status), Some(3590));
        assert_eq!(
            parse_context_switches("voluntary_ctxt_switches:\t1\n"),
            None
        );
    }

    #[test]
    fn cmdline_splits_on_nul_and_keeps_empty_arguments() {
        assert_eq!(
            parse_cmdline(b"qemu\0-name\0guest=a b\0\0"),
            vec!["qemu", "-name", "guest=a b", ""]
        );
        assert!(parse_cmdline(b"").is_empty());
    }
}
