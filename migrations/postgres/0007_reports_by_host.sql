-- A host's reports by id; the same as SQLite's 0021, which says why.
CREATE INDEX reports_host ON reports (host_id, id);
