-- Each guest's VM process running totals as of its latest report that carried them, and what
-- they count for (host boot id, pid, process start time and wake-up source). A report that
-- follows reports which never arrived is measured back to these, so no CPU time goes uncounted;
-- totals of another process start the count again. NULL: no totals were sent.
ALTER TABLE guests ADD COLUMN process_key TEXT;
ALTER TABLE guests ADD COLUMN cpu_s_total REAL;
ALTER TABLE guests ADD COLUMN wakeups_total INTEGER;
ALTER TABLE guests ADD COLUMN totals_at_ms INTEGER;
