-- A report is a duplicate of another only for the same host: the key is (host, agent, run, seq).
-- Keyed on (agent, run, seq) alone, one host's token could send a report with another host's
-- next key and have that host's real report answered "duplicate" and dropped.
--
-- SQLite cannot drop a constraint, so the table is rebuilt. sqlx runs a migration in a
-- transaction, where foreign keys cannot be switched off, and samples.report_id refers to
-- reports: the rows are put aside, the table dropped and made again, and the rows put back, so
-- that every sample's report exists again by the end. The checks of samples against reports are
-- deferred to the commit meanwhile. Each report dropped or put back is looked up among the
-- samples, which have no index on report_id (ingest would pay for one on every sample): one is
-- made for the rebuild and dropped after it, or each report would scan every sample.
PRAGMA defer_foreign_keys = ON;

CREATE INDEX samples_report_0010 ON samples (report_id);
CREATE TABLE reports_0010 AS SELECT * FROM reports;
DROP TABLE reports;

-- As in 0001, but for the key.
CREATE TABLE reports (
    id          INTEGER PRIMARY KEY,
    host_id     INTEGER NOT NULL REFERENCES hosts (id),
    token_id    INTEGER NOT NULL REFERENCES tokens (id),
    agent_id    TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    start_ms    INTEGER NOT NULL,
    end_ms      INTEGER NOT NULL,
    length_ms   REAL    NOT NULL,
    received_ms INTEGER NOT NULL,
    UNIQUE (host_id, agent_id, run_id, seq)
);
INSERT INTO reports (id, host_id, token_id, agent_id, run_id, seq, start_ms, end_ms, length_ms,
                     received_ms)
SELECT id, host_id, token_id, agent_id, run_id, seq, start_ms, end_ms, length_ms, received_ms
FROM reports_0010;
DROP TABLE reports_0010;
DROP INDEX samples_report_0010;

-- The old table's other index (0009).
CREATE INDEX reports_received ON reports (received_ms);
