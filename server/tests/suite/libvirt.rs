//! End to end under libvirt: TCG domains defined and started through libvirt's system instance,
//! the real server, and the real agent run with exactly the privileges of the shipped unit (a
//! dedicated unprivileged user in the groups libvirt, kvm and libvirt-qemu, ambient
//! CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH and nothing else in its bounding set, no new
//! privileges).
//!
//! The guests run Debian's real qemu-guest-agent and the guest probe, each on a virtio-serial
//! port that libvirt made from a `<channel type='unix'>` (libvirt creates the listening sockets
//! itself and hands them to QEMU as descriptors).
//!
//! Needs root, libvirtd and its helpers running, and the assets: `scripts/libvirt-assets.sh`
//! (which `scripts/test.sh` runs) prepares all of it. Ignored by a plain `cargo test`; run with
//! `cargo test -p tickscope-server --test suite -- --ignored libvirt::`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::ansible::ChangeRun;
use common::processes::{Processes, add_token, agent_binary, repo_root, start_server};

const URI: &str = "qemu:///system";
const AGENT_INTERVAL_S: u64 = 2;
const BOOT_TIMEOUT: Duration = Duration::from_secs(240);
/// The user the test runs the agent as (scripts/libvirt-assets.sh adds it).
const AGENT_USER: &str = "tickscope-agent-test";
/// The capabilities the shipped unit gives the agent, in setpriv's spelling.
const UNIT_CAPS: &str = "-all,+sys_ptrace,+dac_read_search";

fn assets() -> PathBuf {
    let dir = std::env::var_os("TICKSCOPE_LIBVIRT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/libvirt"));
    for file in ["vmlinuz", "kernel.package", "modules/order"] {
        assert!(
            dir.join(file).is_file(),
            "{} is missing: run scripts/libvirt-assets.sh as root (scripts/test.sh does)",
            dir.join(file).display()
        );
    }
    dir
}

fn kernel_release() -> String {
    std::fs::read_to_string(assets().join("kernel.package"))
        .unwrap()
        .trim()
        .trim_start_matches("linux-image-")
        .to_string()
}

/// The initramfs with qemu-ga and the probe (scripts/libvirt-initramfs.sh), built for this run's
/// agent binary.
fn initramfs() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("initrd.gz");
    let built = Command::new(repo_root().join("scripts/libvirt-initramfs.sh"))
        .arg(agent_binary())
        .arg(&initrd)
        .status()
        .unwrap();
    assert!(built.success(), "scripts/libvirt-initramfs.sh failed");
    (dir, initrd)
}

fn virsh(args: &[&str]) -> Output {
    Command::new("virsh")
        .args(["--quiet", "-c", URI])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run virsh (apt-get install libvirt-clients)")
}

fn virsh_ok(args: &[&str]) -> String {
    let out = virsh(args);
    assert!(
        out.status.success(),
        "virsh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).unwrap();
    hex::encode(buf)
}

fn random_uuid() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).unwrap();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A libvirt domain of this run: a unique name and UUID, its kernel and initramfs copied into a
/// directory of its own that libvirt's QEMU user can reach (libvirt chowns them while the domain
/// runs and gives them back after). Destroyed and undefined when dropped, also on a panic.
struct Domain {
    name: String,
    uuid: String,
    probe_channel: bool,
    dir: tempfile::TempDir,
    defined: bool,
}

impl Domain {
    fn new(role: &str, initrd: &Path, probe_channel: bool) -> Domain {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("tickscope-libvirt-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(assets().join("vmlinuz"), dir.path().join("vmlinuz")).unwrap();
        std::fs::copy(initrd, dir.path().join("initrd.gz")).unwrap();
        Domain {
            name: format!("tickscope-test-{role}-{}", random_hex(4)),
            uuid: random_uuid(),
            probe_channel,
            dir,
            defined: false,
        }
    }

    fn console(&self) -> PathBuf {
        self.dir.path().join("console.log")
    }

    fn xml(&self, cmdline: &str) -> String {
        let dir = self.dir.path().display();
        // Without a path, libvirt puts a channel's socket under
        // /var/lib/libvirt/qemu/channel/target/domain-<id>-<name>/ and passes it to QEMU as an
        // open descriptor: the agent has to find it through /proc.
        let probe = if self.probe_channel {
            "<channel type='unix'><target type='virtio' name='org.tickscope.probe.0'/></channel>"
        } else {
            ""
        };
        format!(
            "<domain type='qemu'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>
      <libosinfo:os id='http://debian.org/debian/12'/>
    </libosinfo:libosinfo>
    <nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>
      <nova:name>{name} &amp; &lt;friends&gt;</nova:name>
      <nova:flavor name='m1.tiny'><nova:vcpus>1</nova:vcpus></nova:flavor>
      <nova:owner><nova:project uuid='0a1b2c3d4e5f60718293a4b5c6d7e8f9'>tests</nova:project></nova:owner>
    </nova:instance>
  </metadata>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64'>hvm</type>
    <kernel>{dir}/vmlinuz</kernel>
    <initrd>{dir}/initrd.gz</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <serial type='file'><source path='{dir}/console.log'/><target port='0'/></serial>
    {probe}
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <memballoon model='none'/>
  </devices>
</domain>
",
            name = self.name,
            uuid = self.uuid,
        )
    }

    /// Defines the domain with `extra` on its kernel command line (a definition that replaces
    /// the last one) and starts it.
    fn start(&mut self, extra: &str) -> Instant {
        let xml = self.dir.path().join("domain.xml");
        std::fs::write(
            &xml,
            self.xml(&format!("console=ttyS0 quiet panic=-1 {extra}")),
        )
        .unwrap();
        // A guest booted again must not be taken as booted by its last console.
        let _ = std::fs::remove_file(self.console());
        let asked = Instant::now();
        virsh_ok(&["define", xml.to_str().unwrap()]);
        self.defined = true;
        let defined = asked.elapsed();
        virsh_ok(&["start", &self.name]);
        eprintln!(
            "{}: defined in {defined:?}, started in {:?}",
            self.name,
            asked.elapsed() - defined
        );
        Instant::now()
    }

    fn destroy(&self) {
        virsh_ok(&["destroy", &self.name]);
    }

    fn has_booted(&self) -> bool {
        std::fs::read_to_string(self.console())
            .unwrap_or_default()
            .contains("tickscope-guest: booted")
    }

    fn wait_for_boot(&self, since: Instant) {
        loop {
            let log = std::fs::read_to_string(self.console()).unwrap_or_default();
            if log.contains("tickscope-guest: booted") {
                eprintln!(
                    "{} booted in {:?}: {}",
                    self.name,
                    since.elapsed(),
                    log.lines()
                        .filter(|l| l.starts_with("tickscope-guest:"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
                return;
            }
            assert!(
                since.elapsed() < BOOT_TIMEOUT,
                "{} did not finish booting in {BOOT_TIMEOUT:?}; its console said:\n{log}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The running QEMU's command line, as libvirt started it.
    fn qemu_argv(&self) -> Vec<String> {
        let pid_file = format!("/run/libvirt/qemu/{}.pid", self.name);
        let pid = std::fs::read_to_string(&pid_file).unwrap_or_else(|e| panic!("{pid_file}: {e}"));
        std::fs::read(format!("/proc/{}/cmdline", pid.trim()))
            .unwrap()
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    /// The `-chardev` libvirt gave the virtio-serial port named `port`.
    fn chardev_of_port(&self, port: &str) -> String {
        let argv = self.qemu_argv();
        let device = argv
            .iter()
            .filter_map(|a| serde_json::from_str::<Value>(a).ok())
            .find(|d| d["name"] == port)
            .unwrap_or_else(|| panic!("no device for {port} in {argv:?}"));
        let id = device["chardev"].as_str().unwrap();
        argv.iter()
            .find(|a| a.starts_with(&format!("socket,id={id},")))
            .unwrap_or_else(|| panic!("no -chardev {id} in {argv:?}"))
            .clone()
    }

    fn log_path(&self) -> PathBuf {
        PathBuf::from(format!("/var/log/libvirt/qemu/{}.log", self.name))
    }

    /// The lines of libvirt's log of this domain that say it was tainted.
    fn taint_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_else(|e| panic!("{}: {e}", self.log_path().display()))
            .lines()
            .filter(|l| l.contains("tainted"))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        if !self.defined {
            return;
        }
        // Not running is fine; the definition must go either way.
        let _ = virsh(&["destroy", &self.name]);
        let out = virsh(&["undefine", &self.name]);
        if !out.status.success() {
            eprintln!(
                "could not undefine {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let _ = std::fs::remove_file(self.log_path());
    }
}

/// How the agent is run: as the shipped unit runs it, or as `nobody` with nothing extra.
enum Privileges {
    Unit,
    Nobody,
}

/// Starts `tickscope-agent run` under `setpriv` with `privileges`, reporting every
/// `AGENT_INTERVAL_S` to `url` as `host`, with a spool directory only it may write.
fn start_agent(
    privileges: Privileges,
    url: &str,
    token: &str,
    host: &str,
    work: &Path,
    processes: &mut Processes,
) {
    let (user, group, groups) = match privileges {
        Privileges::Unit => {
            let groups: Vec<&str> = ["libvirt", "kvm", "libvirt-qemu"]
                .into_iter()
                .filter(|g| {
                    Command::new("getent")
                        .args(["group", g])
                        .stdout(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
                .collect();
            (AGENT_USER, AGENT_USER, groups.join(","))
        }
        Privileges::Nobody => ("nobody", "nogroup", String::new()),
    };
    let uid = id_of(&["-u", user]);
    let gid = id_of(&["-g", user]);
    let spool = work.join(format!("spool-{host}"));
    std::fs::create_dir(&spool).unwrap();
    std::os::unix::fs::chown(&spool, Some(uid), Some(gid)).unwrap();
    let mut command = Command::new("setpriv");
    command.args(["--reuid", user, "--regid", group]);
    match privileges {
        Privileges::Unit => {
            command.args([
                "--groups",
                &groups,
                "--inh-caps",
                UNIT_CAPS,
                "--ambient-caps",
                UNIT_CAPS,
                "--bounding-set",
                UNIT_CAPS,
            ]);
        }
        Privileges::Nobody => {
            command.args([
                "--clear-groups",
                "--inh-caps",
                "-all",
                "--bounding-set",
                "-all",
            ]);
        }
    }
    command
        .args(["--no-new-privs", "--"])
        .arg(agent_binary())
        .args([
            "run",
            "--interval",
            &AGENT_INTERVAL_S.to_string(),
            "--host-name",
            host,
        ])
        // A service's environment: nothing of the test's, only what the unit would give.
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("HOME", "/")
        .env("TICKSCOPE_SERVER", url)
        .env("TICKSCOPE_TOKEN", token)
        .env("TICKSCOPE_SPOOL_DIR", &spool)
        // Nothing says which libvirt to ask but the agent's own default (qemu:///system):
        // virsh's default for a user other than root would be qemu:///session.
        .current_dir("/")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = command.spawn().expect("cannot run setpriv (util-linux)");
    processes.add(&format!("tickscope-agent {host}"), child);
}

fn id_of(args: &[&str]) -> u32 {
    let out = Command::new("id").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "id {args:?}: {} (scripts/libvirt-assets.sh adds {AGENT_USER})",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The server, on a fresh database, with an agent and a viewer token.
struct Server {
    url: String,
    viewer: String,
    db: PathBuf,
}

fn server(work: &Path, processes: &mut Processes) -> Server {
    let db = work.join("tickscope.db");
    let viewer = add_token(&db, "viewer");
    let url = start_server(&db, &[], processes);
    Server { url, viewer, db }
}

impl Server {
    fn agent_token(&self) -> String {
        add_token(&self.db, "agent")
    }

    fn get(&self, path: &str) -> Value {
        ureq::get(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {}", self.viewer))
            .call()
            .unwrap()
            .into_body()
            .read_json()
            .unwrap()
    }

    /// The guest the server shows for this domain, if it shows it yet.
    fn guest(&self, domain: &Domain) -> Option<Value> {
        self.get("/api/v1/guests")["guests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == domain.name.as_str())
            .cloned()
    }

    /// Waits up to `within` for the domain's guest to satisfy `ready`; returns it as last seen.
    /// The domain's guest once `ready` holds (up to 30 s), printed with the time since
    /// `agent_started`; the assertions that follow say what was missing if it never did.
    fn shown(
        &self,
        domain: &Domain,
        agent_started: Instant,
        ready: impl Fn(&Value) -> bool,
    ) -> Value {
        let g = self
            .wait_for(domain, Duration::from_secs(30), ready)
            .unwrap_or_else(|| panic!("{} was not discovered", domain.name));
        eprintln!(
            "{:?} after the agent started: {}",
            agent_started.elapsed(),
            summary(&g)
        );
        g
    }

    fn wait_for(
        &self,
        domain: &Domain,
        within: Duration,
        ready: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let guest = self.guest(domain);
            if guest.as_ref().is_some_and(&ready) || Instant::now() >= deadline {
                return guest;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn summary(g: &Value) -> String {
    format!(
        "{} ({}, management {}, uuid {}): {} ({}), facts from {} ({} s old), kernel {}, distro {}, cmdline flags {}, boot args {}",
        g["name"],
        g["host"],
        g["management"],
        g["uuid"],
        g["tick_mode"],
        g["tick_mode_confidence"],
        g["facts_source"],
        g["facts_age_s"],
        g["kernel_release"],
        g["distro"],
        g["cmdline_flags"],
        g["boot_args"],
    )
}

#[test]
#[ignore = "boots TCG guests under libvirt (root, libvirtd); run by scripts/test.sh"]
fn a_libvirt_domain_is_found_and_its_probe_and_guest_agent_facts_arrive_without_tainting_it() {
    let _turn = common::processes::guest_turn();
    let release = kernel_release();
    let (_initrd_dir, initrd) = initramfs();
    // One domain with both channels, one with qemu-guest-agent's alone: the guest agent is then
    // the only source of the second one's facts.
    let mut probed = Domain::new("probed", &initrd, true);
    let mut agent_only = Domain::new("qga", &initrd, false);
    let started = Instant::now();
    probed.start("");
    agent_only.start("");
    probed.wait_for_boot(started);
    agent_only.wait_for_boot(started);

    // What makes libvirt's channels hard to find: QEMU gets each listening socket as an open
    // descriptor, its path is nowhere on the command line.
    let chardev = probed.chardev_of_port("org.tickscope.probe.0");
    assert!(
        chardev.contains(",fd=") && !chardev.contains("path="),
        "{chardev}"
    );

    // The agent starts once the guests have booted, so that what it finds first is what the
    // checks below look for (a guest agent still booting is asked again within a few cycles).
    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let server = server(work.path(), &mut processes);
    let token = server.agent_token();
    let agent_started = Instant::now();
    start_agent(
        Privileges::Unit,
        &server.url,
        &token,
        "libvirt-host",
        work.path(),
        &mut processes,
    );

    // Discovery: the domain as libvirt knows it, its name and UUID, managed by libvirt.
    for domain in [&probed, &agent_only] {
        let g = server.shown(domain, agent_started, |g| g["uuid"] == domain.uuid.as_str());
        assert_eq!(g["uuid"], domain.uuid.as_str(), "{g:#}");
        assert_eq!(g["management"], "libvirt", "{g:#}");
        assert_eq!(g["hypervisor"], "qemu", "{g:#}");
        assert_eq!(g["vcpus"], 1, "{g:#}");
    }

    // The probe's facts, through the channel libvirt handed QEMU as a descriptor.
    let g = server.shown(&probed, agent_started, |g| {
        g["facts_source"] == "probe_channel"
    });
    assert_eq!(g["facts_source"], "probe_channel", "{g:#}");
    assert_eq!(g["kernel_release"], release.as_str(), "{g:#}");
    assert_eq!(g["config_hz"], 250, "{g:#}");
    assert_eq!(g["cmdline_flags"], serde_json::json!([]), "{g:#}");

    // qemu-guest-agent's answer to guest-get-osinfo, through libvirt (which holds its socket).
    let g = server.shown(&agent_only, agent_started, |g| {
        g["facts_source"] == "qemu_guest_agent"
    });
    assert_eq!(g["facts_source"], "qemu_guest_agent", "{g:#}");
    assert_eq!(g["kernel_release"], release.as_str(), "{g:#}");
    assert_eq!(g["distro"], "tickscope test initramfs", "{g:#}");
    // A guest agent knows the release, not the timer setup.
    assert_eq!(g["config_hz"], Value::Null, "{g:#}");

    // Who each is, from its definition: libosinfo's OS and Nova's metadata (which virt-install
    // and OpenStack write; here written by the test), read with `virsh dumpxml`.
    for domain in [&probed, &agent_only] {
        let g = server.shown(domain, agent_started, |g| !g["platform"].is_null());
        assert_eq!(g["os_hint"], "http://debian.org/debian/12", "{g:#}");
        assert_eq!(g["platform"]["kind"], "openstack", "{g:#}");
        assert_eq!(
            g["platform"]["name"],
            format!("{} & <friends>", domain.name),
            "{g:#}"
        );
        assert_eq!(g["platform"]["group"], "tests", "{g:#}");
        assert_eq!(g["platform"]["flavor"], "m1.tiny", "{g:#}");
        assert_eq!(g["platform"]["id"], domain.uuid.as_str(), "{g:#}");
    }

    // Asking the guest agent must not taint the domains (`virsh qemu-agent-command` does:
    // "Domain id=N is tainted: custom-ga-command").
    let tainted: Vec<String> = [&probed, &agent_only]
        .iter()
        .flat_map(|d| d.taint_lines())
        .collect();
    assert!(
        tainted.is_empty(),
        "libvirt's domain logs say:\n{}",
        tainted.join("\n")
    );
}

#[test]
#[ignore = "boots a TCG guest under libvirt twice (root, libvirtd); run by scripts/test.sh"]
fn after_a_restart_with_another_command_line_the_verdict_follows_the_new_boot() {
    let _turn = common::processes::guest_turn();
    let (_initrd_dir, initrd) = initramfs();
    let mut domain = Domain::new("reboot", &initrd, true);
    let started = domain.start("nohz=off");
    domain.wait_for_boot(started);

    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let server = server(work.path(), &mut processes);
    let token = server.agent_token();
    start_agent(
        Privileges::Unit,
        &server.url,
        &token,
        "libvirt-host",
        work.path(),
        &mut processes,
    );
    let g = server
        .wait_for(&domain, Duration::from_secs(40), |g| {
            g["facts_source"] == "probe_channel" && g["tick_mode"] == "periodic"
        })
        .unwrap_or_else(|| panic!("{} was not discovered", domain.name));
    eprintln!("first boot: {}", summary(&g));
    assert_eq!(g["tick_mode"], "periodic", "{g:#}");
    assert_eq!(g["cmdline_flags"], serde_json::json!(["nohz=off"]), "{g:#}");

    // The same domain, destroyed and started again without nohz=off: a new QEMU process.
    domain.destroy();
    let restarted = domain.start("");
    // What the server says from the restart on, every half second, until the new boot is
    // judged tickless (or a minute after it booted): each change is kept and printed.
    let mut timeline: Vec<(Duration, String)> = Vec::new();
    let mut booted: Option<Duration> = None;
    let mut tickless: Option<Duration> = None;
    let mut stale_facts: Option<(Duration, Value)> = None;
    let last = loop {
        let now = restarted.elapsed();
        if booted.is_none() && domain.has_booted() {
            booted = Some(now);
            timeline.push((now, "the guest's console says booted".into()));
        }
        let g = server.guest(&domain).unwrap();
        let seen = format!(
            "{} ({}), facts from {} with cmdline flags {}, boot args {}",
            g["tick_mode"],
            g["tick_mode_confidence"],
            g["facts_source"],
            g["cmdline_flags"],
            g["boot_args"]
        );
        if timeline
            .iter()
            .rev()
            .find(|(_, s)| !s.starts_with("the guest"))
            .map(|(_, s)| s)
            != Some(&seen)
        {
            timeline.push((now, seen));
        }
        // Once the server has a sample of the new process (its command line), the old boot's
        // facts are not this process's.
        let new_process = g["boot_args"]
            .as_str()
            .is_some_and(|a| !a.contains("nohz=off"));
        if new_process
            && stale_facts.is_none()
            && g["cmdline_flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == "nohz=off"))
        {
            stale_facts = Some((now, g.clone()));
        }
        if booted.is_some() && g["tick_mode"] == "tickless" {
            tickless = Some(now);
            break g;
        }
        let waited_too_long = match booted {
            Some(b) => now > b + Duration::from_secs(60),
            None => now > BOOT_TIMEOUT,
        };
        if waited_too_long {
            break g;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!("after the restart without nohz=off:");
    for (at, what) in &timeline {
        eprintln!("  {:>6.1} s: {what}", at.as_secs_f64());
    }
    let booted = booted.unwrap_or_else(|| {
        panic!(
            "{} did not boot again in {BOOT_TIMEOUT:?}; its console said:\n{}",
            domain.name,
            std::fs::read_to_string(domain.console()).unwrap_or_default()
        )
    });
    // From the new boot's "booted" line on: three agent intervals, and the probe's one-second
    // measurement, for the server to say what the new boot is. The first report after that
    // line can still hold the boot's own work (on a slow day, 2026-12-07, TCG: "polling" 3.1 s
    // after it, from that report, and tickless at 5.1 s, from the next but one), so two
    // intervals failed a server that followed the boot as soon as its reports showed it.
    let within = Duration::from_secs(3 * AGENT_INTERVAL_S + 1);
    let tickless = tickless
        .unwrap_or_else(|| panic!("never tickless in the minute after the second boot: {last:#}"));
    assert!(
        tickless <= booted + within,
        "tickless only {:.1} s after the second boot finished (allowed: {within:?}); what the server said {within:?} after it is in the timeline above",
        (tickless - booted).as_secs_f64()
    );
    assert!(
        stale_facts.is_none(),
        "the new process was shown with the first boot's facts: {:#?}",
        stale_facts
    );
    assert_eq!(last["cmdline_flags"], serde_json::json!([]), "{last:#}");
}

#[test]
#[ignore = "starts a TCG guest under libvirt (root, libvirtd); run by scripts/test.sh"]
fn an_agent_without_the_units_privileges_lists_its_blind_spots() {
    let _turn = common::processes::guest_turn();
    let (_initrd_dir, initrd) = initramfs();
    // Its QEMU process is all the agent needs to see: the guest need not finish booting.
    let mut domain = Domain::new("blind", &initrd, true);
    domain.start("");

    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let server = server(work.path(), &mut processes);
    let token = server.agent_token();
    let host = "libvirt-nobody";
    start_agent(
        Privileges::Nobody,
        &server.url,
        &token,
        host,
        work.path(),
        &mut processes,
    );
    // Seen at all: the VM's /proc/<pid>/stat and cmdline are world-readable.
    let g = server
        .wait_for(&domain, Duration::from_secs(30), |_| true)
        .unwrap_or_else(|| panic!("{} was not discovered", domain.name));
    eprintln!("as nobody: {}", summary(&g));
    // A few reports more, for whatever the agent says about what it cannot see.
    std::thread::sleep(Duration::from_secs(2 * AGENT_INTERVAL_S));

    let hosts = server.get("/api/v1/hosts");
    let entry = hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == host)
        .unwrap_or_else(|| panic!("{host} is not listed: {hosts:#}"))
        .clone();
    eprintln!("GET /api/v1/hosts, {host}: {entry:#}");
    let spots = entry["blind_spots"]
        .as_array()
        .unwrap_or_else(|| panic!("no blind_spots array: {entry:#}"));
    assert!(!spots.is_empty(), "{entry:#}");
    for spot in spots {
        for field in ["check", "detail", "fix"] {
            assert!(
                spot[field].as_str().is_some_and(|s| !s.trim().is_empty()),
                "{field} of {spot:#}"
            );
        }
    }
    assert!(
        spots.iter().any(|s| s["check"] == "vm_fds"),
        "no vm_fds among {spots:#?}"
    );
}

fn qemu_pid(domain: &Domain) -> Option<String> {
    std::fs::read_to_string(format!("/run/libvirt/qemu/{}.pid", domain.name))
        .ok()
        .map(|p| p.trim().to_string())
}

#[test]
#[ignore = "boots a TCG guest under libvirt and changes it with Ansible (root, libvirtd, ansible); run by scripts/test.sh"]
fn the_libvirt_playbook_takes_the_hpet_out_keeps_the_old_xml_restarts_and_records_it() {
    let _turn = common::processes::guest_turn();
    let (_initrd_dir, initrd) = initramfs();
    let mut domain = Domain::new("ansible", &initrd, true);
    // A guest that keeps time with the VM's emulated HPET (clocksource=hpet; there is no
    // kvm-clock under TCG): the disable_hpet rule's case.
    let started = domain.start("clocksource=hpet");
    domain.wait_for_boot(started);
    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let server = server(work.path(), &mut processes);
    let token = server.agent_token();
    start_agent(
        Privileges::Unit,
        &server.url,
        &token,
        "libvirt-host",
        work.path(),
        &mut processes,
    );
    let has_rule = |g: &Value, rule: &str| {
        g["suggestions"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["rule"] == rule))
    };
    let g = server
        .wait_for(&domain, Duration::from_secs(90), |g| {
            has_rule(g, "disable_hpet")
        })
        .unwrap_or_else(|| panic!("{} was not discovered", domain.name));
    assert!(has_rule(&g, "disable_hpet"), "no disable_hpet: {g:#}");
    let id = g["id"].as_i64().unwrap();

    // What an admin has: the plan's inventory, their own (how to reach the hypervisor host),
    // the rollout's tokens and the server's address.
    let plan = ureq::get(&format!("{}/api/v1/plan-inventory.yml", server.url))
        .header("Authorization", &format!("Bearer {}", server.viewer))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    let w = work.path();
    let own = "all:\n  vars:\n    ansible_become: false\n  hosts:\n    libvirt-host:\n      ansible_connection: local\n      ansible_python_interpreter: /usr/bin/python3\n";
    let backups = w.join("backups");
    let vars = serde_json::json!({
        "tickscope_server_url": server.url,
        "tickscope_viewer_token": server.viewer,
        "tickscope_agent_tokens": {"libvirt-host": token},
        "tickscope_libvirt_backup_dir": backups,
        // The test initramfs has no ACPI daemon: it never shuts down cleanly, and is stopped
        // after this long, as a hung guest would be.
        "tickscope_libvirt_shutdown_timeout_s": 6,
    });
    let change = ChangeRun::prepare(w, &plan, own, &vars, &domain.name);
    let inactive = || virsh_ok(&["dumpxml", "--inactive", &domain.name]);
    let hpet_off = "<timer name='hpet' present='no'/>";

    // --check first: nothing changes, nothing is recorded.
    let before = inactive();
    let (ok, out) = change.run("libvirt_domain", &["--check"]);
    assert!(ok, "{out}");
    assert_eq!(inactive(), before, "--check changed the definition: {out}");
    let changes = |s: &Server| s.get(&format!("/api/v1/guests/{id}/changes"))["changes"].clone();
    assert_eq!(changes(&server), serde_json::json!([]), "{out}");

    let pid_before = qemu_pid(&domain);
    let (ok, out) = change.run("libvirt_domain", &[]);
    assert!(ok, "{out}");
    eprintln!("{out}");
    let after = inactive();
    assert!(after.contains(hpet_off), "{after}");
    let kept: Vec<PathBuf> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().ends_with("Z.xml"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let old = std::fs::read_to_string(&kept[0]).unwrap();
    assert!(
        !old.contains(hpet_off) && old.contains(&domain.uuid),
        "{old}"
    );
    // Restarted: a new QEMU process, running the new definition.
    assert_eq!(virsh_ok(&["domstate", &domain.name]).trim(), "running");
    assert_ne!(qemu_pid(&domain), pid_before);
    assert!(
        domain
            .qemu_argv()
            .iter()
            .any(|a| a.contains("hpet=off") || a == "-no-hpet")
    );
    let recorded = changes(&server);
    assert_eq!(recorded.as_array().unwrap().len(), 1, "{recorded:#}");
    assert_eq!(recorded[0]["rule"], "disable_hpet");
    assert!(
        recorded[0]["made_by"]
            .as_str()
            .unwrap()
            .ends_with("with Ansible"),
        "{recorded:#}"
    );

    // The restarted VM has no HPET: the server says so, and the change is no longer planned.
    let g = server
        .wait_for(&domain, Duration::from_secs(90), |g| {
            g["hpet"] == false && !has_rule(g, "disable_hpet")
        })
        .unwrap();
    assert!(!has_rule(&g, "disable_hpet"), "{g:#}");
    // Run again: the server refuses the guest, and nothing is touched.
    let (ok, out) = change.run("libvirt_domain", &[]);
    assert!(!ok, "a guest no longer planned was not refused: {out}");
    assert!(out.contains("no longer needs disable_hpet"), "{out}");
    assert_eq!(inactive(), after);
    assert_eq!(changes(&server).as_array().unwrap().len(), 1);
    assert_eq!(std::fs::read_dir(&backups).unwrap().count(), kept.len());
}
