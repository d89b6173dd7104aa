-- Where a sample's host CPU went among the VM's threads (issue 29); the same as SQLite's 0018.
ALTER TABLE samples ADD COLUMN vcpu_cpu_s DOUBLE PRECISION;
ALTER TABLE samples ADD COLUMN iothread_cpu_s DOUBLE PRECISION;
ALTER TABLE samples ADD COLUMN vhost_cpu_s DOUBLE PRECISION;
ALTER TABLE samples ADD COLUMN halt_poll_s DOUBLE PRECISION;
