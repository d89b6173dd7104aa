-- Alerts as Alertmanager knows them: each alert's label set is fixed when it opens and kept
-- with it, so its firing and resolved notifications carry the same labels (and so the same
-- fingerprint); its annotations (summary, suggestion, tick mode) are those of its last
-- evaluation. Alerts opened before this migration have '{}' until their next evaluation.
ALTER TABLE alerts ADD COLUMN labels_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE alerts ADD COLUMN annotations_json TEXT NOT NULL DEFAULT '{}';
CREATE INDEX alerts_resolved ON alerts (resolved_ms) WHERE state = 'resolved';

-- Receivers group like Alertmanager's routes: by the rule's name (alertname) plus the labels in
-- group_by (comma-separated); the first notification of a new group waits group_wait_s, changes
-- to a group already notified wait group_interval_s after its last one. auth_header is sent as
-- the Authorization header (never shown back); ca_pem is the CA an https receiver is checked
-- against instead of the system's roots.
ALTER TABLE receivers ADD COLUMN group_by TEXT NOT NULL DEFAULT '';
ALTER TABLE receivers ADD COLUMN group_wait_s INTEGER NOT NULL DEFAULT 30 CHECK (group_wait_s >= 0);
ALTER TABLE receivers ADD COLUMN group_interval_s INTEGER NOT NULL DEFAULT 300
    CHECK (group_interval_s >= 0);
ALTER TABLE receivers ADD COLUMN auth_header TEXT;
ALTER TABLE receivers ADD COLUMN ca_pem TEXT;

-- Each outbox row is one alert's transition (its payload: that alert as the webhook tells it);
-- the sender posts the due rows of one (receiver, group_key) together. A key starting 'single:'
-- is a row whose payload is a whole body, posted alone: the plain JSON format, and the rows
-- written before this migration (whole Alertmanager bodies of one alert).
ALTER TABLE outbox ADD COLUMN group_key TEXT NOT NULL DEFAULT '';
UPDATE outbox SET group_key = 'single:' || id;
CREATE INDEX outbox_group ON outbox (receiver_id, group_key)
    WHERE delivered_ms IS NULL AND failed_ms IS NULL;

-- When each (receiver, group) was last notified, for its group interval.
CREATE TABLE receiver_groups (
    receiver_id  INTEGER NOT NULL REFERENCES receivers (id) ON DELETE CASCADE,
    group_key    TEXT    NOT NULL,
    last_sent_ms INTEGER NOT NULL,
    PRIMARY KEY (receiver_id, group_key)
);
