-- Every report updates its guests' rows. With last_seen_ms indexed no update could be HOT
-- (heap-only: the new row version on the same page, no index touched), so each one wrote a
-- new entry into each of the table's four indexes and left as many dead ones for vacuum. Only
-- the reads of every active guest (at a start, and when a follower's listener reconnects)
-- filtered on it, and they read most of the table: a pass over it costs the same. Without the index, and with room left on each page for the
-- next version of its rows, a report's guest updates touch no index (issue 28).
DROP INDEX guests_last_seen;
ALTER TABLE guests SET (fillfactor = 70);
