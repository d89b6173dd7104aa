-- One row the server rewrites to learn whether it can still write: at start (a read-only
-- database refuses to start) and for /readyz (which says "cannot write" while the disk is full).
CREATE TABLE write_probe (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    at_ms INTEGER NOT NULL
);
