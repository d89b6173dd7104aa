//! VirtualBox guest properties (`/VirtualBox/GuestInfo/OS/*`), set by the Guest Additions.
//! `VBoxManage` talks to the per-user VirtualBox service, so it only sees the VMs of the user the
//! agent runs as.

use std::process::Command;

use crate::wire::GuestFacts;

/// Asks VBoxManage for a VM's OS properties.
pub fn os_properties(vm: &str) -> Option<GuestFacts> {
    let output = Command::new("VBoxManage")
        .args([
            "guestproperty",
            "enumerate",
            vm,
            "--patterns",
            "/VirtualBox/GuestInfo/OS/*",
        ])
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| parse(&String::from_utf8_lossy(&output.stdout)))
        .flatten()
}

/// Reads `enumerate` output in either layout:
/// VirtualBox 6 `Name: /VirtualBox/GuestInfo/OS/Release, value: 5.15.0-91-generic, timestamp: …`
/// and VirtualBox 7 `/VirtualBox/GuestInfo/OS/Release = '5.15.0-91-generic' @ 2024-…`.
pub fn parse(text: &str) -> Option<GuestFacts> {
    let property = |name: &str| -> Option<String> {
        let key = format!("/VirtualBox/GuestInfo/OS/{name}");
        text.lines().find_map(|line| {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix(&format!("Name: {key}, value: ")) {
                return Some(rest.split(", timestamp:").next()?.to_string());
            }
            let rest = line.strip_prefix(&key)?.trim_start().strip_prefix("= '")?;
            Some(rest.rsplit_once('\'')?.0.to_string())
        })
    };
    let facts = GuestFacts {
        kernel_release: property("Release"),
        kernel_version: property("Version"),
        ..GuestFacts::default()
    };
    facts.kernel_release.is_some().then(|| facts.cleaned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_output_layouts_give_the_release() {
        let v6 = "Name: /VirtualBox/GuestInfo/OS/Product, value: Linux, timestamp: 1700000000000000000, flags: \n\
                  Name: /VirtualBox/GuestInfo/OS/Release, value: 2.6.29-slitaz, timestamp: 1700000000000000000, flags: \n\
                  Name: /VirtualBox/GuestInfo/OS/Version, value: #1 Mon Mar 2 2009, timestamp: 1700000000000000000, flags: \n";
        let v7 = "/VirtualBox/GuestInfo/OS/Product = 'Linux' @ 2024-05-01T10:00:00.000000000Z\n\
                  /VirtualBox/GuestInfo/OS/Release = '5.15.0-91-generic' @ 2024-05-01T10:00:00.000000000Z\n\
                  /VirtualBox/GuestInfo/OS/Version = '#101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023' @ 2024-05-01T10:00:00.000000000Z\n";
        let f6 = parse(v6).unwrap();
        assert_eq!(f6.kernel_release.as_deref(), Some("2.6.29-slitaz"));
        assert_eq!(f6.kernel_version.as_deref(), Some("#1 Mon Mar 2 2009"));
        let f7 = parse(v7).unwrap();
        assert_eq!(f7.kernel_release.as_deref(), Some("5.15.0-91-generic"));
        assert_eq!(
            f7.kernel_version.as_deref(),
            Some("#101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023")
        );
        assert_eq!(parse("No properties found.\n"), None);
    }
}
