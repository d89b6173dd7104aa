-- What the host sees of a VM's setup that decides what its idle vCPUs cost (issue 29): its
-- Hyper-V enlightenments (QEMU's names without `hv-`, sorted, comma-separated; '' for none),
-- whether it has an emulated HPET, and the OS its manager names (a libosinfo id, a Proxmox
-- ostype, a VMware guestOS). NULL: the agent could not tell, or predates them.
ALTER TABLE guests ADD COLUMN hyperv TEXT;
ALTER TABLE guests ADD COLUMN hpet INTEGER CHECK (hpet IN (0, 1));
ALTER TABLE guests ADD COLUMN os_hint TEXT;
-- Who the VM is on its platform (OpenStack, Proxmox VE, KubeVirt), as the agent last read it: the
-- report's `platform` object as JSON (kind, name, group, flavor, id). NULL: not known.
ALTER TABLE guests ADD COLUMN platform TEXT;
