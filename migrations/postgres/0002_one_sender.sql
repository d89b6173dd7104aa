-- What keeps one sender from costing everyone (issue 26); the same as SQLite's 0016.
--
-- A guest leaves the live fleet once its host stored three reports without it: each host counts
-- the reports stored for it, and each guest keeps that count as of its last report.
ALTER TABLE hosts ADD COLUMN reports_stored BIGINT NOT NULL DEFAULT 0;
ALTER TABLE guests ADD COLUMN last_report_n BIGINT NOT NULL DEFAULT 0;

-- The guest a guest token delivers to (its UUID on one host); for a guest token, host_name is
-- the host an admin pinned it to.
ALTER TABLE tokens ADD COLUMN guest_id BIGINT REFERENCES guests (id);
