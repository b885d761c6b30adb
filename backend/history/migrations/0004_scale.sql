-- 0004: what a year of history needs (docs/DESIGN.md, "History").
--
-- An index for every filter of the list (query.go, Filter), each ending in
-- the list's order (started_at, id), so that a filter that matches little
-- or nothing reads what it matches and no more.
DROP INDEX requests_served_candidate;
CREATE INDEX requests_served_candidate ON requests (served_candidate, started_at, id);
CREATE INDEX requests_status ON requests (status, started_at, id);
CREATE INDEX requests_fallback ON requests (is_fallback, started_at, id);

-- The charts' roll-ups, per minute (width 60000), 5 and 30 minutes,
-- hour and 3 hours (rollup.go, rollupWidths),
-- written with the rows they count, in the same transaction (rollup.go):
-- the requests served by candidate ('' for none) that started in
-- [at, at + width), how many were fallbacks and how many failed, and the
-- TTFTs of candidate's successful attempts that started in it, as
-- rollup.go encodes them.
CREATE TABLE rollups (
	width     INTEGER NOT NULL,
	at        INTEGER NOT NULL,
	candidate TEXT    NOT NULL,
	requests  INTEGER NOT NULL,
	fallbacks INTEGER NOT NULL,
	errors    INTEGER NOT NULL,
	ttft      BLOB    NOT NULL,
	PRIMARY KEY (width, at, candidate)
) STRICT, WITHOUT ROWID;
