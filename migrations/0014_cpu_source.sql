-- Which counter a guest's CPU time was last read from (`cgroup`, `schedstat`, `stat_ticks`);
-- NULL for agents that predate it, which always counted /proc/<pid>/stat ticks.
ALTER TABLE guests ADD COLUMN cpu_source TEXT;
