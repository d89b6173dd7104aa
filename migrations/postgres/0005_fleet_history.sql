-- The fleet over time (issue 30); the same as SQLite's 0019.
CREATE TABLE fleet_history (
    at_ms          BIGINT PRIMARY KEY,
    guests         BIGINT NOT NULL,
    ticking        BIGINT NOT NULL,
    wasted_cpu_pct DOUBLE PRECISION NOT NULL,
    saved_cpu_pct  DOUBLE PRECISION NOT NULL,
    changes        BIGINT NOT NULL
);
