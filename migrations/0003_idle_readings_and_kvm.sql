-- The guest's own idle time, one row per facts delivery that carried it. guest_facts keeps only
-- the newest facts of each distinct set, but judging each sample interval idle or busy needs the
-- readings over time. received_ms is on the server clock, like samples.received_ms; a reading
-- covers the samples received in the measured_ms before it (NULL: the guest did not say).
-- Readings older than the longest history any page reads are deleted as new ones arrive.
CREATE TABLE guest_idle_readings (
    guest_id      INTEGER NOT NULL REFERENCES guests (id),
    source        TEXT    NOT NULL,
    received_ms   INTEGER NOT NULL,
    measured_ms   INTEGER,
    idle_fraction REAL    NOT NULL CHECK (idle_fraction BETWEEN 0.0 AND 1.0),
    PRIMARY KEY (guest_id, received_ms, source)
) WITHOUT ROWID;

-- Whether the VM process holds a KVM VM (1), was seen without one (0, e.g. QEMU under TCG), or
-- could not be looked at (NULL). Host-side KVM halt polling only concerns KVM guests.
ALTER TABLE guests ADD COLUMN uses_kvm INTEGER CHECK (uses_kvm IN (0, 1));
