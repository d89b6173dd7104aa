-- Alerting: rules, the alerts they raise (one open alert per rule and subject), silences,
-- webhook receivers, and the outbox of notifications still to deliver.

-- kind 'guest_waste': an active guest whose waste (% of one host core, measured on its idle
--   intervals) is at least `threshold` for `duration_s`.
-- kind 'host_silent': a host whose agent has not reported for `threshold` seconds, for
--   `duration_s` more.
-- scope: 'all', 'host' (a host name), 'hypervisor' (a family: qemu, virtualbox, ...) or 'name'
--   (a guest name pattern, `*` for any run of characters); scope_value is '' for 'all'.
CREATE TABLE alert_rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    kind        TEXT    NOT NULL CHECK (kind IN ('guest_waste', 'host_silent')),
    scope       TEXT    NOT NULL CHECK (scope IN ('all', 'host', 'hypervisor', 'name')),
    scope_value TEXT    NOT NULL DEFAULT '',
    threshold   REAL    NOT NULL CHECK (threshold >= 0),
    duration_s  INTEGER NOT NULL CHECK (duration_s >= 0),
    severity    TEXT    NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
    enabled     INTEGER NOT NULL DEFAULT 1,
    updated_ms  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL
);

INSERT INTO alert_rules (name, kind, scope, scope_value, threshold, duration_s, severity, updated_ms, updated_by)
VALUES ('Idle guest burning CPU', 'guest_waste', 'all', '', 2.0, 900, 'warning', 0, 'tickscope'),
       ('Agent silent', 'host_silent', 'all', '', 120, 180, 'critical', 0, 'tickscope');

-- An alert: pending while the condition holds for less than the rule's duration, then firing,
-- then resolved (kept as history). A pending alert whose condition clears is deleted: it never
-- fired. subject is 'guest' or 'host', subject_id that row's id; subject_name and host_name are
-- copied so that history stays readable when the guest is gone.
CREATE TABLE alerts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    rule_id      INTEGER NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    subject      TEXT    NOT NULL CHECK (subject IN ('guest', 'host')),
    subject_id   INTEGER NOT NULL,
    subject_name TEXT    NOT NULL,
    host_name    TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'firing', 'resolved')),
    active_ms    INTEGER NOT NULL,
    fired_ms     INTEGER,
    resolved_ms  INTEGER,
    -- The rule's measure at the last evaluation (waste in % of a core, or seconds silent).
    value        REAL    NOT NULL,
    evaluated_ms INTEGER NOT NULL,
    acked_by     TEXT,
    acked_ms     INTEGER
);
CREATE UNIQUE INDEX alerts_open ON alerts (rule_id, subject, subject_id)
    WHERE state IN ('pending', 'firing');
CREATE INDEX alerts_subject ON alerts (subject, subject_id, active_ms);
CREATE INDEX alerts_state ON alerts (state, active_ms);

-- A silence: while now is in [starts_ms, ends_ms), alerts it matches send no notification (their
-- state moves on as usual). It matches by rule (NULL: any) and by subject name pattern ('': any;
-- `*` for any run of characters), which is checked against the guest name and the host name.
CREATE TABLE silences (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    rule_id    INTEGER REFERENCES alert_rules (id) ON DELETE CASCADE,
    pattern    TEXT    NOT NULL DEFAULT '',
    starts_ms  INTEGER NOT NULL,
    ends_ms    INTEGER NOT NULL,
    reason     TEXT    NOT NULL,
    created_by TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE INDEX silences_ends ON silences (ends_ms);

-- Where notifications go: a webhook in the Alertmanager webhook payload format, or a plain JSON
-- form of one alert.
CREATE TABLE receivers (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE,
    url        TEXT    NOT NULL,
    format     TEXT    NOT NULL CHECK (format IN ('alertmanager', 'json')),
    enabled    INTEGER NOT NULL DEFAULT 1,
    created_ms INTEGER NOT NULL
);

-- Notifications to deliver: one per receiver, alert and transition, written in the same
-- transaction as the transition, so that a restart neither loses nor repeats one.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    receiver_id     INTEGER NOT NULL REFERENCES receivers (id) ON DELETE CASCADE,
    alert_id        INTEGER NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    transition      TEXT    NOT NULL CHECK (transition IN ('firing', 'resolved')),
    payload         TEXT    NOT NULL,
    created_ms      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER NOT NULL,
    delivered_ms    INTEGER,
    -- Set when delivery was given up (after the last attempt); the row stays as a record.
    failed_ms       INTEGER,
    last_error      TEXT,
    UNIQUE (receiver_id, alert_id, transition)
);
CREATE INDEX outbox_due ON outbox (next_attempt_ms) WHERE delivered_ms IS NULL AND failed_ms IS NULL;
