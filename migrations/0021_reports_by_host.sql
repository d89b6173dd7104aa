-- A host's reports by id: a server following another on the same database reads the samples
-- of the reports the other stored for a host since the last one it read (issue 28), one
-- index range per host instead of every guest's whole window again.
CREATE INDEX reports_host ON reports (host_id, id);
