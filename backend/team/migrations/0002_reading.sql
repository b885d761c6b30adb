-- The memory reading (or the team's word) that demoted or skipped an
-- attempt, as the history keeps it: team/requests says why, as requests
-- does. JSON of fleet.GPUReading; NULL when there was none.
ALTER TABLE team_attempts ADD COLUMN reading jsonb;
