//! Reading the few `/proc` files the agent needs, cheaply.
//!
//! The root is a parameter so that discovery and sampling can run on recorded fixtures in tests.
//! Parsing is in pure functions; `ProcFs` only does the I/O, reusing one buffer for every read
//! because the agent reads a few hundred small files per cycle and must stay cheap.

use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::FileExt;
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
    /// Threads in the process now.
    pub num_threads: u64,
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
        num_threads: field(20)?,
        start_ticks: field(22)?,
    })
}

/// Context switches from a thread's `schedstat` ("run ns, wait ns, times run"): the third field
/// counts the times the thread was switched in, which equals voluntary + involuntary switches
/// out, and the file is far cheaper for the kernel to produce than `status`.
pub fn parse_schedstat_switches(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(2)?.parse().ok()
}

/// A thread's run time so far from its `schedstat` (the first field), in nanoseconds.
pub fn parse_schedstat_run_ns(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// What one reading of a thread's switches file gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadCounters {
    /// Context switches so far (voluntary + involuntary).
    pub switches: u64,
    /// Run time so far in nanoseconds, when the file was `schedstat` (which holds both).
    pub run_ns: Option<u64>,
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

/// Which file a thread's context switches are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchesFile {
    /// `task/<tid>/schedstat` (kernels with CONFIG_SCHED_INFO, which distributions enable).
    Schedstat,
    /// `task/<tid>/status`, the fallback.
    Status,
}

/// A `/proc` file kept open and re-read from offset 0 (`pread`): one system call per reading
/// instead of four (open, read, read to EOF, close). Reads fail once the process or thread it was
/// opened for has exited, even if its pid has been reused since.
pub struct OpenFile(File);

impl OpenFile {
    pub fn open(path: &Path) -> Option<OpenFile> {
        File::open(path).ok().map(OpenFile)
    }

    /// Reads the whole file into `buf`, growing it if the file does not fit.
    pub fn read<'a>(&self, buf: &'a mut Vec<u8>) -> Option<&'a str> {
        if buf.len() < 4096 {
            buf.resize(4096, 0);
        }
        let mut filled = 0;
        loop {
            let n = self.0.read_at(&mut buf[filled..], filled as u64).ok()?;
            filled += n;
            if n == 0 || filled < buf.len() {
                break;
            }
            buf.resize(buf.len() * 2, 0);
        }
        std::str::from_utf8(&buf[..filled]).ok()
    }
}

/// The devices whose descriptors mean a VM's traffic is moved by vhost workers: threads of the
/// VM process from Linux 6.4, kernel threads (`vhost-<pid>`) outside it before.
const VHOST_DEVICES: [&str; 3] = ["/dev/vhost-net", "/dev/vhost-vsock", "/dev/vhost-scsi"];

/// What a VM process's descriptors say of it (see [`ProcFs::vm_fds`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmFds {
    /// The descriptor of its KVM VM (`anon_inode:kvm-vm`), if it holds one.
    pub kvm_vm_fd: Option<u32>,
    /// Whether it holds a vhost device.
    pub vhost: bool,
}

/// A `/proc` tree (the real one, or a fixture).
pub struct ProcFs {
    root: PathBuf,
    buf: Vec<u8>,
    /// Files read so far (each reading of a kept-open file counts): what a cycle costs the
    /// kernel, in a figure that does not depend on the machine.
    files_read: u64,
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcFs {
            root: root.into(),
            buf: Vec::with_capacity(4096),
            files_read: 0,
        }
    }

    /// Files read through this `ProcFs` so far.
    pub fn files_read(&self) -> u64 {
        self.files_read
    }

    /// Reads a kept-open file whole into the shared buffer.
    fn read_open(&mut self, file: &OpenFile) -> Option<&str> {
        self.files_read += 1;
        file.read(&mut self.buf)
    }

    /// Where this `/proc` is.
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

    /// A thread's context switches so far (voluntary + involuntary), read once.
    pub fn thread_switches(&mut self, pid: u32, tid: u32) -> Option<u64> {
        let (file, kind) = self.open_thread_switches(pid, tid)?;
        self.read_switches(&file, kind)
    }

    /// Opens what a thread's context switches are read from: `schedstat`, else `status`.
    /// A thread that exists has run at least once, so a schedstat that counts zero runs is a
    /// kernel that does not keep the count (sched_info off): `status` is used then.
    pub fn open_thread_switches(&mut self, pid: u32, tid: u32) -> Option<(OpenFile, SwitchesFile)> {
        let task = self.root.join(format!("{pid}/task/{tid}"));
        if let Some(file) = OpenFile::open(&task.join("schedstat"))
            && self
                .read_open(&file)
                .and_then(parse_schedstat_switches)
                .is_some_and(|runs| runs > 0)
        {
            return Some((file, SwitchesFile::Schedstat));
        }
        OpenFile::open(&task.join("status")).map(|f| (f, SwitchesFile::Status))
    }

    pub fn read_switches(&mut self, file: &OpenFile, kind: SwitchesFile) -> Option<u64> {
        self.read_thread_counters(file, kind).map(|c| c.switches)
    }

    /// A thread's context switches, and its run time too when they come from `schedstat`: one
    /// read serves both, where the CPU time is counted from the threads.
    pub fn read_thread_counters(
        &mut self,
        file: &OpenFile,
        kind: SwitchesFile,
    ) -> Option<ThreadCounters> {
        let text = self.read_open(file)?;
        match kind {
            SwitchesFile::Schedstat => Some(ThreadCounters {
                switches: parse_schedstat_switches(text)?,
                run_ns: Some(parse_schedstat_run_ns(text)?),
            }),
            SwitchesFile::Status => Some(ThreadCounters {
                switches: parse_context_switches(text)?,
                run_ns: None,
            }),
        }
    }

    /// Whether a thread of a process still exists.
    pub fn thread_exists(&self, pid: u32, tid: u32) -> bool {
        self.root.join(format!("{pid}/task/{tid}")).exists()
    }

    /// Opens a thread's `schedstat`, for its run time.
    pub fn open_thread_schedstat(&self, pid: u32, tid: u32) -> Option<OpenFile> {
        OpenFile::open(&self.root.join(format!("{pid}/task/{tid}/schedstat")))
    }

    /// A thread's run time so far in nanoseconds, from its open `schedstat`.
    pub fn read_run_ns(&mut self, file: &OpenFile) -> Option<u64> {
        parse_schedstat_run_ns(self.read_open(file)?)
    }

    /// `/proc/<pid>/cgroup`: the cgroups the process is in.
    pub fn cgroups(&mut self, pid: u32) -> Option<String> {
        let path = self.root.join(format!("{pid}/cgroup"));
        self.read_text(&path).map(str::to_string)
    }

    /// `/proc/self/mountinfo` of this `/proc` (absent from recorded fixtures).
    pub fn own_mountinfo(&mut self) -> Option<String> {
        let path = self.root.join("self/mountinfo");
        self.read_text(&path).map(str::to_string)
    }

    pub fn open_stat(&self, pid: u32) -> Option<OpenFile> {
        OpenFile::open(&self.root.join(format!("{pid}/stat")))
    }

    pub fn read_stat(&mut self, file: &OpenFile) -> Option<ProcStat> {
        parse_stat(self.read_open(file)?)
    }

    /// The filesystem path a process's socket descriptor is bound to (libvirt hands QEMU
    /// listening sockets as descriptors): the socket's inode from `/proc/<pid>/fd/<fd>`, looked
    /// up in `/proc/net/unix`.
    pub fn socket_path_of_fd(&self, pid: u32, fd: u32) -> Option<String> {
        let link = fs::read_link(self.root.join(format!("{pid}/fd/{fd}"))).ok()?;
        let inode = link
            .to_str()?
            .strip_prefix("socket:[")?
            .strip_suffix(']')?
            .to_string();
        let table = fs::read_to_string(self.root.join("net/unix")).ok()?;
        unix_socket_path(&table, &inode)
    }

    /// Whether the process holds a KVM virtual machine (a descriptor linked to
    /// `anon_inode:kvm-vm`): QEMU under TCG, or any process without KVM, holds none. `None` when
    /// its descriptors cannot be listed or their links read (no permission, or it exited).
    pub fn holds_kvm_vm(&self, pid: u32) -> Option<bool> {
        self.vm_fds(pid).map(|fds| fds.kvm_vm_fd.is_some())
    }

    /// What a VM process's descriptors say of it: the descriptor of its KVM VM, which names its
    /// directory in KVM's debugfs (`<pid>-<fd>`), and whether it holds a vhost device. `None`
    /// when its descriptors cannot be read.
    pub fn vm_fds(&self, pid: u32) -> Option<VmFds> {
        let fds = fs::read_dir(self.root.join(format!("{pid}/fd"))).ok()?;
        let mut unreadable = false;
        let mut found = VmFds::default();
        for fd in fds.flatten() {
            match fs::read_link(fd.path()) {
                Ok(link) if link.as_os_str() == "anon_inode:kvm-vm" => {
                    found.kvm_vm_fd = fd.file_name().to_str().and_then(|n| n.parse().ok());
                }
                Ok(link) => {
                    found.vhost |= link.to_str().is_some_and(|l| VHOST_DEVICES.contains(&l));
                }
                // Listing the directory takes CAP_DAC_READ_SEARCH, reading the links the ptrace
                // check too: with the first alone every link is refused, which tells nothing.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => unreadable = true,
                Err(_) => {} // closed since the listing
            }
        }
        (!unreadable || found.kvm_vm_fd.is_some()).then_some(found)
    }

    /// Reads a VM's configuration file (VMware's `.vmx`) as the VM process sees it: through its
    /// root and working directory under `/proc`, so a path means what it means to the VM, and a
    /// fixture's paths stay inside the fixture. The path comes from a command line anybody can
    /// set, so only a regular file is read (never a FIFO or device), and at most 64 KiB of it.
    pub fn read_config_file(&self, pid: u32, path: &str) -> Option<String> {
        use std::os::unix::fs::OpenOptionsExt;
        const MAX_CONFIG_BYTES: u64 = 64 * 1024;
        let base = if path.starts_with('/') { "root" } else { "cwd" };
        let full = self
            .root
            .join(format!("{pid}/{base}"))
            .join(path.trim_start_matches('/'));
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(full)
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES).read_to_string(&mut text).ok()?;
        Some(text)
    }

    fn read(&mut self, path: &Path) -> Option<&[u8]> {
        self.files_read += 1;
        self.buf.clear();
        File::open(path).ok()?.read_to_end(&mut self.buf).ok()?;
        Some(&self.buf)
    }

    fn read_text(&mut self, path: &Path) -> Option<&str> {
        std::str::from_utf8(self.read(path)?).ok()
    }
}

/// The path of the socket with this inode in `/proc/net/unix` (columns: Num RefCount Protocol
/// Flags Type St Inode Path).
pub fn unix_socket_path(table: &str, inode: &str) -> Option<String> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(6) == Some(&inode))
            .then(|| fields.get(7).map(|p| p.to_string()))
            .flatten()
    })
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
        assert_eq!(stat.num_threads, 4);
    }

    #[test]
    fn socket_paths_are_found_by_inode() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                     0000000000000000: 00000002 00000000 00010000 0001 01 23987 /var/lib/libvirt/qemu/channel/target/domain-3-web/org.tickscope.probe.0\n\
                     0000000000000000: 00000003 00000000 00000000 0001 03 24001\n";
        assert_eq!(
            unix_socket_path(table, "23987").as_deref(),
            Some("/var/lib/libvirt/qemu/channel/target/domain-3-web/org.tickscope.probe.0")
        );
        assert_eq!(
            unix_socket_path(table, "24001"),
            None,
            "an unbound socket has no path"
        );
        assert_eq!(unix_socket_path(table, "1"), None);
    }

    #[test]
    fn schedstat_gives_the_times_a_thread_ran() {
        assert_eq!(
            parse_schedstat_switches("224659850 12154924 350\n"),
            Some(350)
        );
        assert_eq!(parse_schedstat_switches("1 2"), None);
    }

    #[test]
    fn an_open_file_is_read_again_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "first").unwrap();
        let file = OpenFile::open(&path).unwrap();
        let mut buf = Vec::new();
        assert_eq!(file.read(&mut buf), Some("first"));
        let long = "x".repeat(10_000);
        fs::write(&path, &long).unwrap();
        assert_eq!(file.read(&mut buf).map(str::len), Some(10_000));
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
