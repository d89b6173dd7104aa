-- Tokens are looked up by the first 16 hex digits of their SHA-256, then the whole hash is
-- compared in constant time in the server: the database's comparison of the full secret hash
-- (which can stop at the first differing byte) is no longer what decides.
CREATE INDEX tokens_lookup_prefix ON tokens (substr(sha256_hex, 1, 16));
