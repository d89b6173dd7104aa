-- Dashboard users. The password is kept only as an argon2id hash (a PHC string with its own salt
-- and parameters). An admin changes settings and tokens; a viewer only reads. Sessions name a
-- user by id, so ids are never reused (AUTOINCREMENT); names are unique whatever their case.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL UNIQUE COLLATE NOCASE,
    role          TEXT    NOT NULL CHECK (role IN ('admin', 'viewer')),
    password_hash TEXT    NOT NULL,
    created_ms    INTEGER NOT NULL,
    last_login_ms INTEGER
);

-- Login sessions, in the schema of tower-sessions' SQLite store, which reads and writes them:
-- id is the random session cookie value, data the session in MessagePack, expiry_date the time
-- it lapses as the store writes it (RFC 3339 text, despite the column's type).
CREATE TABLE tower_sessions (
    id          TEXT    PRIMARY KEY NOT NULL,
    data        BLOB    NOT NULL,
    expiry_date INTEGER NOT NULL
);

-- Settings an admin changes on the settings page, by name (`cost_model`: JSON). A setting stored
-- here wins over the command-line default it replaces.
CREATE TABLE settings (
    name       TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_ms INTEGER NOT NULL,
    updated_by TEXT    NOT NULL
);
