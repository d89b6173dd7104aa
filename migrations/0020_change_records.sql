-- Changes made to guests, as whoever made them recorded them (issue 31): an Ansible playbook
-- after it changed a guest, with the agent token of the guest's host. A record is a point in
-- the guest's history that its realised saving is measured around, whatever the change was (a
-- VM's setup changes no kernel fact that would mark it otherwise).
CREATE TABLE change_records (
    id                 INTEGER PRIMARY KEY,
    guest_id           INTEGER NOT NULL REFERENCES guests (id),
    -- The suggestion's rule (remove_nohz_off, disable_hpet, ...), its kind and title then.
    rule               TEXT    NOT NULL,
    kind               TEXT    NOT NULL,
    title              TEXT    NOT NULL,
    -- When the change was made (the playbook says: before the reboot or restart it took), and
    -- when it was recorded, Unix ms.
    made_at_ms         INTEGER NOT NULL,
    recorded_ms        INTEGER NOT NULL,
    -- Who made it, in the recorder's words (Ansible's user and controller), and the token that
    -- recorded it.
    made_by            TEXT    NOT NULL,
    token_id           INTEGER REFERENCES tokens (id),
    note               TEXT    NOT NULL DEFAULT '',
    -- The saving the suggestion projected when the change was recorded, % of one core.
    projected_cpu_pct  REAL,
    -- The measurement once it can no longer change (an hour after the change): when it was
    -- settled, and its figures (NULL when there was not enough idle time on a side).
    settled_ms         INTEGER,
    cpu_before_pct     REAL,
    cpu_after_pct      REAL,
    wakeups_before     REAL,
    wakeups_after      REAL,
    idle_share_after   REAL,
    saved_cpu_pct      REAL
);
CREATE INDEX change_records_guest ON change_records (guest_id, made_at_ms);
CREATE INDEX change_records_made ON change_records (made_at_ms);
CREATE INDEX change_records_unsettled ON change_records (made_at_ms) WHERE settled_ms IS NULL;
