-- The VM process a guest's samples come from now (host boot id, pid and start time) and when
-- the server first heard of it. Facts received before then describe an earlier boot of the
-- guest (another kernel, another command line) and are no longer used to judge it.
ALTER TABLE guests ADD COLUMN vm_process TEXT;
ALTER TABLE guests ADD COLUMN vm_process_since_ms INTEGER;
