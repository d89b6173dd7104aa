-- Reports an agent's spool deleted unsent to stay within its bounds (the largest count the
-- agent reported), so that a host that lost data during an outage says so.
ALTER TABLE hosts ADD COLUMN agent_dropped_reports INTEGER NOT NULL DEFAULT 0;
