//! Who each VM is on its platform, where its command line does not say: a libvirt domain's
//! definition is read once (`virsh dumpxml`, read-only: it taints nothing) for the OS libosinfo
//! names and an OpenStack instance's Nova metadata; a libvirt domain in a Kubernetes pod is a
//! KubeVirt VirtualMachineInstance, named `<namespace>_<name>` by virt-launcher.

use std::process::Command;
use std::time::{Duration, Instant};

use super::tracked::{Metadata, VmState};
use crate::discover::libvirt_xml;
use crate::guest_agent::command::run_with_timeout;
use crate::wire::{Platform, VmConfig};

/// Longest one `virsh dumpxml` may take.
const DUMPXML_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest one cycle spends reading definitions: a host of new domains is read over a few cycles.
const BUDGET: Duration = Duration::from_secs(2);

/// Reads the definitions of libvirt domains not read yet, within [`BUDGET`].
pub(super) fn read_libvirt_metadata<'a>(vms: impl Iterator<Item = &'a mut VmState>, uri: &str) {
    let since = Instant::now();
    for vm in vms {
        if vm.libvirt_metadata != Metadata::NotRead
            || vm.identity.management.as_deref() != Some("libvirt")
        {
            continue;
        }
        if since.elapsed() >= BUDGET {
            break;
        }
        // By UUID: a numeric name would be read as a domain id.
        let domain = vm
            .identity
            .uuid
            .clone()
            .unwrap_or_else(|| vm.identity.name.clone());
        let mut virsh = Command::new("virsh");
        virsh
            .args(["--quiet", "-c", uri, "dumpxml", "--domain", &domain])
            .env("LC_ALL", "C");
        let metadata = run_with_timeout(virsh, DUMPXML_TIMEOUT)
            .and_then(|xml| libvirt_xml::parse(&String::from_utf8_lossy(&xml)));
        let Some(metadata) = metadata else {
            vm.libvirt_metadata = Metadata::Failed;
            continue;
        };
        vm.libvirt_metadata = Metadata::Read;
        if vm.identity.vm_config.os_hint.is_none() {
            vm.identity.vm_config = VmConfig {
                os_hint: metadata.os_hint,
                ..std::mem::take(&mut vm.identity.vm_config)
            }
            .cleaned();
        }
        if metadata.platform.is_some() {
            vm.identity.platform = metadata.platform;
        }
    }
}

/// A libvirt domain in a Kubernetes pod (its cgroup under `kubepods`) is run by KubeVirt's
/// virt-launcher, which names it `<namespace>_<name>` after its VirtualMachineInstance.
pub(super) fn kubevirt(cgroups: &str, domain_name: &str) -> Option<Platform> {
    if !cgroups.contains("kubepods") {
        return None;
    }
    let (namespace, name) = domain_name.split_once('_')?;
    Some(
        Platform {
            kind: "kubevirt".into(),
            name: Some(name.to_string()),
            group: Some(namespace.to_string()),
            flavor: None,
            id: None,
        }
        .cleaned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_in_a_kubernetes_pod_is_a_kubevirt_vm_named_by_its_namespace() {
        // /proc/<pid>/cgroup of QEMU in a virt-launcher pod (cgroup v2, systemd driver).
        let pod = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f2a.slice/cri-containerd-9c1e.scope\n";
        assert_eq!(
            kubevirt(pod, "web-team_vm-frontend-1"),
            Some(Platform {
                kind: "kubevirt".into(),
                name: Some("vm-frontend-1".into()),
                group: Some("web-team".into()),
                flavor: None,
                id: None,
            })
        );
        // A libvirt domain on a plain host, and a pod's domain without virt-launcher's name.
        assert_eq!(
            kubevirt(
                "0::/machine.slice/machine-qemu\\x2d3\\x2dweb.scope\n",
                "default_web"
            ),
            None
        );
        assert_eq!(kubevirt(pod, "plain"), None);
    }
}
