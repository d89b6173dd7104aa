-- tickscope schema v1. Times are Unix milliseconds (INTEGER); CPU in core-seconds (REAL).

-- API tokens. Only the SHA-256 of a token is stored; the token itself is shown once.
-- An agent token reports for one host: the one named when it was made, or else the first it
-- reports for.
CREATE TABLE tokens (
    id           INTEGER PRIMARY KEY,
    name         TEXT    NOT NULL,
    role         TEXT    NOT NULL CHECK (role IN ('agent', 'viewer', 'guest')),
    sha256_hex   TEXT    NOT NULL UNIQUE,
    host_name    TEXT,
    created_ms   INTEGER NOT NULL,
    last_used_ms INTEGER,
    revoked_ms   INTEGER
);

-- Hypervisor hosts, as their agents describe them.
CREATE TABLE hosts (
    id               INTEGER PRIMARY KEY,
    name             TEXT    NOT NULL UNIQUE,
    cpus             INTEGER NOT NULL,
    kernel           TEXT    NOT NULL,
    agent_version    TEXT    NOT NULL,
    kvm_halt_poll_ns INTEGER,
    first_seen_ms    INTEGER NOT NULL,
    last_report_ms   INTEGER NOT NULL
);

-- One row per accepted report; the unique key makes ingest idempotent.
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
    UNIQUE (agent_id, run_id, seq)
);

-- VMs. A guest is its UUID when the hypervisor exposes one, else its name, per host and family.
CREATE TABLE guests (
    id            INTEGER PRIMARY KEY,
    host_id       INTEGER NOT NULL REFERENCES hosts (id),
    hypervisor    TEXT    NOT NULL,
    identity      TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    uuid          TEXT,
    management    TEXT,
    vcpus         INTEGER NOT NULL,
    pid           INTEGER NOT NULL,
    boot_args     TEXT,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL,
    UNIQUE (host_id, hypervisor, identity)
);
CREATE INDEX guests_last_seen ON guests (last_seen_ms);

-- One row per guest per report interval. end_ms is on the agent's clock (when the interval
-- ended); received_ms on the server's (when it was stored), which the analysis window uses so
-- that a host whose clock jumps cannot freeze or empty it.
CREATE TABLE samples (
    id             INTEGER PRIMARY KEY,
    guest_id       INTEGER NOT NULL REFERENCES guests (id),
    report_id      INTEGER NOT NULL REFERENCES reports (id),
    end_ms         INTEGER NOT NULL,
    received_ms    INTEGER NOT NULL,
    length_ms      REAL    NOT NULL,
    vcpus          INTEGER NOT NULL,
    host_cpu_s     REAL    NOT NULL,
    vcpu_wakeups   INTEGER NOT NULL,
    wakeups_source TEXT    NOT NULL
);
CREATE INDEX samples_guest_received ON samples (guest_id, received_ms);
