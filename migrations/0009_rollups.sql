-- Each guest's history once its raw samples are gone: one row per analysis window (5 minutes)
-- and, later, per hour, on the server clock like samples.received_ms. A row keeps sums, minima
-- and maxima, so that any longer stretch is the sum of its rows and averages and waste stay
-- exact (analysis::history::Summary). wasted_cpu_s is priced against the host's tickless
-- baseline when the window was rolled up.
CREATE TABLE rollups (
    guest_id      INTEGER NOT NULL REFERENCES guests (id),
    resolution_ms INTEGER NOT NULL CHECK (resolution_ms IN (300000, 3600000)),
    start_ms      INTEGER NOT NULL,
    samples       INTEGER NOT NULL,
    length_s      REAL    NOT NULL,
    vcpu_s        REAL    NOT NULL,
    host_cpu_s    REAL    NOT NULL,
    wakeups       INTEGER NOT NULL,
    idle_s        REAL    NOT NULL,
    busy_s        REAL    NOT NULL,
    wasted_cpu_s  REAL    NOT NULL,
    min_cpu_pct   REAL,
    max_cpu_pct   REAL,
    PRIMARY KEY (guest_id, resolution_ms, start_ms)
) WITHOUT ROWID;
-- Retention deletes reports by age; a report is needed only to recognise a resent one.
CREATE INDEX reports_received ON reports (received_ms);
