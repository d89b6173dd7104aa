//! What a libvirt domain's definition (`virsh dumpxml`) says of the guest that its command line
//! does not: the OS it was created for (libosinfo's `<libosinfo:os id=...>`, which virt-manager
//! and virt-install write) and, for an OpenStack instance, who it is in Nova (`<nova:instance>`:
//! its display name, project, flavor). Pure: the definition is read elsewhere.

use crate::wire::Platform;

const LIBOSINFO_NS: &str = "http://libosinfo.org/xmlns/libvirt/domain/1.0";
/// Nova's metadata namespace, of whichever version (`.../nova/1.0`, `1.1`, `1.2`).
const NOVA_NS_PREFIX: &str = "http://openstack.org/xmlns/libvirt/nova/";

/// What a domain's metadata tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainMetadata {
    /// libosinfo's id of the guest's OS (`http://microsoft.com/win/10`).
    pub os_hint: Option<String>,
    /// The OpenStack instance it is, if Nova defined it.
    pub platform: Option<Platform>,
}

/// The first child of `parent` named `name`, in whatever namespace.
fn child<'a, 'input>(
    parent: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    parent.children().find(|n| n.tag_name().name() == name)
}

/// Reads a domain's XML; `None` for text that is not a domain definition.
pub fn parse(xml: &str) -> Option<DomainMetadata> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let domain = doc.root_element();
    if !domain.has_tag_name("domain") {
        return None;
    }
    let metadata = domain.children().find(|n| n.has_tag_name("metadata"));
    let os_hint = metadata
        .and_then(|m| {
            m.descendants()
                .find(|n| n.has_tag_name((LIBOSINFO_NS, "os")))
        })
        .and_then(|os| os.attribute("id"))
        .map(str::to_string);
    let nova = metadata.and_then(|m| {
        m.children().find(|n| {
            n.tag_name().name() == "instance"
                && n.tag_name()
                    .namespace()
                    .is_some_and(|ns| ns.starts_with(NOVA_NS_PREFIX))
        })
    });
    let platform = nova.map(|instance| {
        let text = |node: Option<roxmltree::Node>| node.and_then(|n| n.text()).map(str::to_string);
        Platform {
            kind: "openstack".into(),
            name: text(child(instance, "name")),
            group: text(child(instance, "owner").and_then(|o| child(o, "project"))),
            flavor: child(instance, "flavor")
                .and_then(|f| f.attribute("name"))
                .map(str::to_string),
            // Nova names the domain by its instance UUID.
            id: domain
                .children()
                .find(|n| n.has_tag_name("uuid"))
                .and_then(|n| n.text())
                .map(str::to_string),
        }
        .cleaned()
    });
    Some(DomainMetadata { os_hint, platform })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metadata Nova writes into a libvirt domain (nova/virt/libvirt/config.py), cut to
    /// what is read, with virt-install's libosinfo element beside it.
    const NOVA_DOMAIN: &str = r#"<domain type='kvm' id='7'>
  <name>instance-0000a1b2</name>
  <uuid>5c7f3e2a-1d4b-4e8f-9a6c-0b1d2e3f4a5b</uuid>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://ubuntu.com/ubuntu/22.04"/>
    </libosinfo:libosinfo>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:package version="27.1.0"/>
      <nova:name>web-frontend-3</nova:name>
      <nova:creationTime>2026-11-30 09:12:44</nova:creationTime>
      <nova:flavor name="m1.small">
        <nova:memory>2048</nova:memory>
        <nova:disk>20</nova:disk>
        <nova:swap>0</nova:swap>
        <nova:ephemeral>0</nova:ephemeral>
        <nova:vcpus>1</nova:vcpus>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="9f1c2b3a4d5e6f708192a3b4c5d6e7f8">alice</nova:user>
        <nova:project uuid="0a1b2c3d4e5f60718293a4b5c6d7e8f9">web-team</nova:project>
      </nova:owner>
      <nova:root type="image" uuid="11111111-2222-3333-4444-555555555555"/>
    </nova:instance>
  </metadata>
  <memory unit='KiB'>2097152</memory>
</domain>"#;

    #[test]
    fn nova_and_libosinfo_metadata_name_the_instance_and_its_os() {
        let m = parse(NOVA_DOMAIN).unwrap();
        assert_eq!(m.os_hint.as_deref(), Some("http://ubuntu.com/ubuntu/22.04"));
        assert_eq!(
            m.platform,
            Some(Platform {
                kind: "openstack".into(),
                name: Some("web-frontend-3".into()),
                group: Some("web-team".into()),
                flavor: Some("m1.small".into()),
                id: Some("5c7f3e2a-1d4b-4e8f-9a6c-0b1d2e3f4a5b".into()),
            })
        );
    }

    #[test]
    fn a_plain_domain_tells_its_os_at_most_and_garbage_tells_nothing() {
        // virt-manager's Windows 10 domain: libosinfo only.
        let windows = "<domain type='kvm'><name>win10</name><metadata>\
            <libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>\
            <libosinfo:os id='http://microsoft.com/win/10'/></libosinfo:libosinfo></metadata></domain>";
        let m = parse(windows).unwrap();
        assert_eq!(m.os_hint.as_deref(), Some("http://microsoft.com/win/10"));
        assert_eq!(m.platform, None);
        assert_eq!(
            parse("<domain><name>bare</name></domain>"),
            Some(DomainMetadata::default())
        );
        // An element of the right name in another namespace is not libosinfo's.
        let other = "<domain><metadata><x:os xmlns:x='urn:other' id='win'/></metadata></domain>";
        assert_eq!(parse(other).unwrap().os_hint, None);
        assert_eq!(parse("error: failed to get domain 'x'"), None);
        assert_eq!(parse("<network/>"), None);
    }
}
