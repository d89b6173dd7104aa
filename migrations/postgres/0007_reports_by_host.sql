-- A host's reports by id: a server following another on the same database reads the samples
-- of the reports the other stored for a host since the last one it read (issue 28), one index
-- range per host, each report's samples then looked up in samples_report, instead of every
-- guest's whole window again. Only PostgreSQL has followers: SQLite, one server's, pays no
-- index for it.
CREATE INDEX reports_host ON reports (host_id, id);
