-- What keeps one sender from costing everyone (issue 26).
--
-- A guest leaves the live fleet once its host stored three reports without it, instead of
-- counting (and being analysed again with every report) for fifteen minutes: each host counts
-- the reports stored for it, and each guest keeps that count as of its last report. Rows from
-- before this migration start at 0, present until their host's next reports say otherwise.
ALTER TABLE hosts ADD COLUMN reports_stored INTEGER NOT NULL DEFAULT 0;
ALTER TABLE guests ADD COLUMN last_report_n INTEGER NOT NULL DEFAULT 0;

-- A guest token delivers to one guest: the VM with its UUID (guest_uuid) on one host. guest_id
-- is that guest once the token first delivered, and moves to another host's guest only once
-- the old host stopped reporting the VM, or when an admin moves it (`token bind`). For a guest
-- token, host_name is the host an admin pinned it to when making it (`--host`), if any.
ALTER TABLE tokens ADD COLUMN guest_id INTEGER REFERENCES guests (id);
