-- Every report sets its guests' last_seen_ms, so an index on it is written again for every
-- guest-sample (a delete and an insert each). Only the reads of every active guest (at a start)
-- filtered on it, and they read most of the table: a pass over it costs the same. Without
-- the index a report's guest update touches no index of the guests table (issue 28).
DROP INDEX guests_last_seen;
