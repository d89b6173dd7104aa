-- Where a sample's host CPU went among the VM's threads (issue 29), in core-seconds: its vCPU
-- threads, QEMU's I/O threads and vhost workers; the emulator (QEMU's main loop and the rest)
-- is host_cpu_s less these. NULL where the agent could not tell, or the sample reaches over
-- reports that never arrived.
ALTER TABLE samples ADD COLUMN vcpu_cpu_s REAL;
ALTER TABLE samples ADD COLUMN iothread_cpu_s REAL;
ALTER TABLE samples ADD COLUMN vhost_cpu_s REAL;
-- The host CPU KVM spent halt-polling the VM's vCPUs (part of their time above), in
-- core-seconds, where the agent could read KVM's debugfs; NULL otherwise.
ALTER TABLE samples ADD COLUMN halt_poll_s REAL;
