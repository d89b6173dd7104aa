-- The fleet over time (issue 30): one point every five minutes, written by the server that
-- runs the retention from the fleet's totals as it judges them then. The overview's chart and
-- GET /api/v1/fleet/history read it, not every guest's history.
CREATE TABLE fleet_history (
    -- The start of the five minutes it was written in, Unix ms.
    at_ms          INTEGER PRIMARY KEY NOT NULL,
    -- Active guests, and those of them that tick or poll while idle.
    guests         INTEGER NOT NULL,
    ticking        INTEGER NOT NULL,
    -- Host CPU wasted while idle over the fleet, in % of one core.
    wasted_cpu_pct REAL NOT NULL,
    -- Host CPU saved by the kernel and command-line changes measured so far, in % of one core,
    -- and how many guests' changes that is.
    saved_cpu_pct  REAL NOT NULL,
    changes        INTEGER NOT NULL
) WITHOUT ROWID;
