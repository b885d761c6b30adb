-- 0006: how far a team's database holds this file's records (backend/team,
-- ship.go; docs/DESIGN.md, "Teams"): per node name, the cursor past the
-- last batch shipped from this file. The team's database keeps a cursor
-- too, but it counts in whichever file the node last shipped from: a new
-- file, or one whose tables a sweep emptied (sweep.go), numbers its rows
-- from 1 again, and would have its first rows skipped. A file made before
-- 0006 that holds records trusts the team's cursor, as it did (the '*'
-- row); a new file ships from its beginning.
CREATE TABLE team_shipped (
	node          TEXT    PRIMARY KEY,
	request_rowid INTEGER NOT NULL,
	breaker_id    INTEGER NOT NULL
) STRICT;
INSERT INTO team_shipped
	SELECT '*', 9223372036854775807, 9223372036854775807
	WHERE EXISTS (SELECT 1 FROM requests) OR EXISTS (SELECT 1 FROM breaker_events);
