//! Where a VM's host CPU time is read from, most exact first.
//!
//! `/proc/<pid>/stat` counts CPU in ticks of 10 ms: over a 10 s interval an idle VM at 0.3 % of
//! a core is 3 ticks, give or take one. libvirt, Proxmox and systemd put each VM in a cgroup of
//! its own, whose CPU counter is exact (nanoseconds in cgroup v1's `cpuacct.usage`,
//! microseconds in v2's `cpu.stat`); for any other process each thread's `schedstat` gives its
//! run time in nanoseconds. The counter is chosen once per VM process, so its running total
//! never switches units halfway.

use std::fs;
use std::path::{Path, PathBuf};

use crate::procfs::OpenFile;

/// A cgroup's CPU counter, kept open.
pub struct CgroupCpu {
    file: OpenFile,
    version: CgroupVersion,
    /// The cgroup's directory, for the record.
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// `cpuacct.usage`, nanoseconds.
    V1,
    /// `cpu.stat`'s `usage_usec`, microseconds.
    V2,
}

impl CgroupCpu {
    /// The cgroup's CPU time so far, in nanoseconds.
    pub fn read_ns(&self, buf: &mut Vec<u8>) -> Option<u64> {
        let text = self.file.read(buf)?;
        match self.version {
            CgroupVersion::V1 => text.trim().parse().ok(),
            CgroupVersion::V2 => parse_cpu_stat_usage_us(text)?.checked_mul(1000),
        }
    }
}

/// Where the cgroup hierarchies that count CPU are mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupMounts {
    /// The cgroup2 (unified) hierarchy.
    pub v2: Option<PathBuf>,
    /// The cgroup v1 hierarchy with the `cpuacct` controller.
    pub cpuacct: Option<PathBuf>,
}

impl CgroupMounts {
    /// From a `mountinfo` table (`/proc/self/mountinfo`).
    pub fn from_mountinfo(mountinfo: &str) -> CgroupMounts {
        let mut mounts = CgroupMounts::default();
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mount_point = left.split_whitespace().nth(4);
            let mut right = right.split_whitespace();
            let (fs_type, _source, options) = (right.next(), right.next(), right.next());
            match (fs_type, mount_point) {
                (Some("cgroup2"), Some(point)) if mounts.v2.is_none() => {
                    mounts.v2 = Some(PathBuf::from(unescape_mount_path(point)));
                }
                (Some("cgroup"), Some(point))
                    if mounts.cpuacct.is_none()
                        && options.is_some_and(|o| o.split(',').any(|c| c == "cpuacct")) =>
                {
                    mounts.cpuacct = Some(PathBuf::from(unescape_mount_path(point)));
                }
                _ => {}
            }
        }
        mounts
    }

    /// The exact CPU counter of the cgroup that holds the VM process `pid` and nothing else,
    /// from its `/proc/<pid>/cgroup` text; `None` when the process shares its cgroup (a QEMU
    /// started from a shell, say) or the counter cannot be read.
    pub fn vm_counter(&self, pid: u32, proc_cgroup: &str) -> Option<CgroupCpu> {
        for (controllers, path) in parse_proc_cgroup(proc_cgroup) {
            let (root, version, file) = if controllers.is_empty() {
                (self.v2.as_ref(), CgroupVersion::V2, "cpu.stat")
            } else if controllers.split(',').any(|c| c == "cpuacct") {
                (self.cpuacct.as_ref(), CgroupVersion::V1, "cpuacct.usage")
            } else {
                continue;
            };
            let (Some(root), Some(vm_path)) = (root, vm_cgroup_path(path)) else {
                continue;
            };
            let dir = root.join(vm_path.trim_start_matches('/'));
            if !holds_only(&dir, pid) {
                continue;
            }
            if let Some(file) = OpenFile::open(&dir.join(file)) {
                let counter = CgroupCpu { file, version, dir };
                if counter.read_ns(&mut Vec::new()).is_some() {
                    return Some(counter);
                }
            }
        }
        None
    }
}

/// `/proc/<pid>/cgroup` lines (`hierarchy-id:controllers:path`) as (controllers, path); the v2
/// line has no controllers.
pub fn parse_proc_cgroup(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((controllers, path))
        })
        .collect()
}

/// The cgroup that stands for the whole VM, from the one its main thread is in: libvirt puts
/// QEMU's main thread in `.../emulator` beside `.../vcpuN` and `.../iothreadN` (under a
/// `libvirt/` level with systemd), so the VM is their parent. `None` for the root cgroup, which
/// holds everything.
pub fn vm_cgroup_path(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let is_libvirt_leaf = |p: &str| {
        p == "emulator"
            || p.strip_prefix("vcpu")
                .or_else(|| p.strip_prefix("iothread"))
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    if parts.last().is_some_and(|p| is_libvirt_leaf(p)) {
        parts.pop();
        if parts.last() == Some(&"libvirt") {
            parts.pop();
        }
    }
    (!parts.is_empty()).then(|| format!("/{}", parts.join("/")))
}

/// Whether the cgroup `dir` and the cgroups below it hold process `pid` and no other process.
/// Bounded: a cgroup with a large subtree is not a VM's.
fn holds_only(dir: &Path, pid: u32) -> bool {
    const MAX_CGROUPS: usize = 512;
    let mut pending = vec![dir.to_path_buf()];
    let mut seen_cgroups = 0;
    let mut found = false;
    while let Some(cgroup) = pending.pop() {
        seen_cgroups += 1;
        if seen_cgroups > MAX_CGROUPS {
            return false;
        }
        // cgroup v2 threaded cgroups (libvirt's emulator, vcpuN, iothreadN under systemd) refuse
        // to list processes (EOPNOTSUPP); their process is listed in the domain above them.
        let threaded =
            fs::read_to_string(cgroup.join("cgroup.type")).is_ok_and(|t| t.trim() == "threaded");
        let procs = match fs::read_to_string(cgroup.join("cgroup.procs")) {
            Ok(procs) => procs,
            Err(_) if threaded => String::new(),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => String::new(),
            Err(_) => return false,
        };
        for listed in procs.split_whitespace() {
            if listed.parse::<u32>().ok() != Some(pid) {
                return false;
            }
            found = true;
        }
        let Ok(entries) = fs::read_dir(&cgroup) else {
            return false;
        };
        pending.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    found
}

/// `usage_usec` from a cgroup v2 `cpu.stat`.
pub fn parse_cpu_stat_usage_us(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("usage_usec "))?
        .trim()
        .parse()
        .ok()
}

/// Mount points in `mountinfo` escape spaces and a few other bytes as `\ooo`.
fn unescape_mount_path(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Some(code) = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|octal| u8::from_str_radix(octal, 8).ok())
        {
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vm_cgroup_is_found_in_the_layouts_of_libvirt_proxmox_and_systemd() {
        let cases = [
            // libvirt without systemd, cgroup v1 (Debian 12 started by hand).
            (
                "/machine/qemu-1-web.libvirt-qemu/emulator",
                Some("/machine/qemu-1-web.libvirt-qemu"),
            ),
            (
                "/machine/qemu-1-web.libvirt-qemu/vcpu0",
                Some("/machine/qemu-1-web.libvirt-qemu"),
            ),
            // libvirt with systemd, cgroup v2.
            (
                "/machine.slice/machine-qemu\\x2d1\\x2dweb.scope/libvirt/emulator",
                Some("/machine.slice/machine-qemu\\x2d1\\x2dweb.scope"),
            ),
            // Proxmox VE: the main thread is in the VM's scope itself.
            ("/qemu.slice/100.scope", Some("/qemu.slice/100.scope")),
            // A QEMU started from a login shell: the session's scope (checked later for others).
            (
                "/user.slice/user-1000.slice/session-3.scope",
                Some("/user.slice/user-1000.slice/session-3.scope"),
            ),
            ("/", None),
            ("/emulator", None),
            ("/vcpus/emulator", Some("/vcpus")),
        ];
        for (path, expected) in cases {
            assert_eq!(vm_cgroup_path(path).as_deref(), expected, "{path}");
        }
    }

    #[test]
    fn mount_points_of_the_cpu_counting_hierarchies_are_read_from_mountinfo() {
        let v1 = "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                  31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                  32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            CgroupMounts::from_mountinfo(v1),
            CgroupMounts {
                v2: Some("/sys/fs/cgroup/unified".into()),
                cpuacct: Some("/sys/fs/cgroup/cpu,cpuacct".into()),
            }
        );
        let v2 = "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            CgroupMounts::from_mountinfo(v2).v2.as_deref(),
            Some(Path::new("/sys/fs/cgroup"))
        );
        let spaced = "36 24 0:31 / /mnt/cg\\040v2 rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            CgroupMounts::from_mountinfo(spaced).v2.as_deref(),
            Some(Path::new("/mnt/cg v2"))
        );
    }

    /// A cgroup tree in a directory, as the kernel shows it.
    fn cgroup(root: &Path, path: &str, procs: &[u32], counter: (&str, &str)) {
        let dir = root.join(path.trim_start_matches('/'));
        fs::create_dir_all(&dir).unwrap();
        let listed: String = procs.iter().map(|p| format!("{p}\n")).collect();
        fs::write(dir.join("cgroup.procs"), listed).unwrap();
        fs::write(dir.join(counter.0), counter.1).unwrap();
    }

    #[test]
    fn a_cgroup_counter_is_used_only_when_the_cgroup_holds_the_vm_alone() {
        let v1 = tempfile::tempdir().unwrap();
        let v2 = tempfile::tempdir().unwrap();
        let mounts = CgroupMounts {
            v2: Some(v2.path().into()),
            cpuacct: Some(v1.path().into()),
        };
        let usage = ("cpuacct.usage", "2500000000\n");
        // libvirt, v1: the VM's cgroup with emulator and vcpu children, the pid in emulator.
        cgroup(v1.path(), "/machine/qemu-1-web.libvirt-qemu", &[], usage);
        cgroup(
            v1.path(),
            "/machine/qemu-1-web.libvirt-qemu/emulator",
            &[4242],
            usage,
        );
        cgroup(
            v1.path(),
            "/machine/qemu-1-web.libvirt-qemu/vcpu0",
            &[4242],
            usage,
        );
        let proc_cgroup = "4:cpu,cpuacct:/machine/qemu-1-web.libvirt-qemu/emulator\n0::/\n";
        let counter = mounts
            .vm_counter(4242, proc_cgroup)
            .expect("the VM's own cgroup");
        assert_eq!(counter.read_ns(&mut Vec::new()), Some(2_500_000_000));
        // The same layout, but another process shares it: not the VM's alone.
        cgroup(
            v1.path(),
            "/machine/qemu-1-web.libvirt-qemu/vcpu1",
            &[4242, 777],
            usage,
        );
        assert!(mounts.vm_counter(4242, proc_cgroup).is_none());

        // systemd, v2: microseconds.
        let scope = "/machine.slice/machine-qemu\\x2d2\\x2ddb.scope";
        cgroup(
            v2.path(),
            scope,
            &[],
            (
                "cpu.stat",
                "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
            ),
        );
        cgroup(
            v2.path(),
            &format!("{scope}/libvirt"),
            &[],
            ("cpu.stat", "usage_usec 1500\n"),
        );
        cgroup(
            v2.path(),
            &format!("{scope}/libvirt/emulator"),
            &[5151],
            ("cpu.stat", "usage_usec 900\n"),
        );
        let proc_cgroup = format!("0::{scope}/libvirt/emulator\n");
        let counter = mounts.vm_counter(5151, &proc_cgroup).expect("the scope");
        assert_eq!(counter.read_ns(&mut Vec::new()), Some(1_500_000));
        // libvirt makes emulator and vcpuN threaded cgroups, which cannot list processes: the
        // VM's process is listed in the domain cgroup above them.
        let threaded_scope = "/machine.slice/machine-qemu\\x2d3\\x2dapp.scope";
        cgroup(
            v2.path(),
            threaded_scope,
            &[],
            ("cpu.stat", "usage_usec 7\n"),
        );
        cgroup(
            v2.path(),
            &format!("{threaded_scope}/libvirt"),
            &[6161],
            ("cpu.stat", "usage_usec 7\n"),
        );
        for leaf in ["emulator", "vcpu0"] {
            let dir = v2.path().join(format!(
                "{}/libvirt/{leaf}",
                threaded_scope.trim_start_matches('/')
            ));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("cgroup.type"), "threaded\n").unwrap();
            fs::write(dir.join("cpu.stat"), "usage_usec 3\n").unwrap();
        }
        let proc_cgroup = format!("0::{threaded_scope}/libvirt/emulator\n");
        let counter = mounts
            .vm_counter(6161, &proc_cgroup)
            .expect("the threaded layout's scope");
        assert_eq!(counter.read_ns(&mut Vec::new()), Some(7_000));
        // The root cgroup holds everything.
        assert!(mounts.vm_counter(5151, "0::/\n").is_none());
    }
}
