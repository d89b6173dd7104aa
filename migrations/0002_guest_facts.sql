-- What guests say about their own kernels (guest probe, qemu-guest-agent, VirtualBox guest
-- properties). One row per guest, source and distinct set of facts: a repeat of the same facts
-- only refreshes the row, a change (new kernel, new command line) adds one, so the rows of a
-- guest are its history of kernel events.
CREATE TABLE guest_facts (
    id                INTEGER PRIMARY KEY,
    guest_id          INTEGER NOT NULL REFERENCES guests (id),
    source            TEXT    NOT NULL,
    -- When these facts were first and last received (server clock).
    first_received_ms INTEGER NOT NULL,
    received_ms       INTEGER NOT NULL,
    kernel_release    TEXT,
    cmdline           TEXT,
    -- The facts without their rates, to tell a change from a repeat.
    stable_json       TEXT    NOT NULL,
    -- The newest full facts (rates included).
    facts_json        TEXT    NOT NULL
);
CREATE INDEX guest_facts_guest ON guest_facts (guest_id, source, id);

-- A guest token submits facts for one guest: the UUID it first reported.
ALTER TABLE tokens ADD COLUMN guest_uuid TEXT;
-- Guest facts are joined to guests by UUID.
CREATE INDEX guests_uuid ON guests (uuid);
