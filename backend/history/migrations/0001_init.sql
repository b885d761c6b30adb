-- 0001: the tables of docs/DESIGN.md, "History". Times are unix milliseconds (UTC); durations
-- are whole milliseconds. A NULL means "none" or "unknown" where the Go
-- field's zero value means the same.

CREATE TABLE requests (
	id                TEXT    PRIMARY KEY,
	started_at        INTEGER NOT NULL,
	protocol          TEXT    NOT NULL,
	stream            INTEGER NOT NULL,
	thinking          INTEGER NOT NULL,
	requested_model   TEXT    NOT NULL,
	served_candidate  TEXT,             -- NULL when no candidate served it
	served_model      TEXT,
	is_fallback       INTEGER NOT NULL,
	status            TEXT    NOT NULL,
	http_status       INTEGER,
	error             TEXT,
	ttft_ms           INTEGER,          -- as the caller saw it; NULL when no first token
	latency_ms        INTEGER NOT NULL,
	prompt_tokens     INTEGER,          -- NULL when unknown
	completion_tokens INTEGER
) STRICT;

-- Newest-first listing, cursor paging, time filters and pruning.
CREATE INDEX requests_started_at ON requests (started_at, id);
-- The UI's "served by" filter.
CREATE INDEX requests_served_candidate ON requests (served_candidate, started_at);

CREATE TABLE attempts (
	request_id  TEXT    NOT NULL REFERENCES requests (id) ON DELETE CASCADE,
	ord         INTEGER NOT NULL,       -- 0-based position in the request's attempt list
	candidate   TEXT    NOT NULL,
	outcome     TEXT    NOT NULL,
	error       TEXT,
	http_status INTEGER,
	started_at  INTEGER,                -- NULL when the attempt never started
	deadline_ms INTEGER NOT NULL,
	ttft_ms     INTEGER,                -- NULL when no first token
	duration_ms INTEGER NOT NULL,
	cold        INTEGER NOT NULL,
	demoted     INTEGER NOT NULL,
	reading     TEXT,                   -- fleet.GPUReading as JSON, NULL when none
	PRIMARY KEY (request_id, ord)
) STRICT, WITHOUT ROWID;

-- TTFT statistics and series over a time window.
CREATE INDEX attempts_started_at ON attempts (started_at);
-- A candidate's newest successful attempts (learned deadlines).
CREATE INDEX attempts_success ON attempts (candidate, started_at) WHERE outcome = 'success';

CREATE TABLE breaker_events (
	id         INTEGER PRIMARY KEY,     -- arrival order, breaks ties on at
	candidate  TEXT    NOT NULL,
	from_state TEXT    NOT NULL,
	to_state   TEXT    NOT NULL,
	at         INTEGER NOT NULL,
	cause      TEXT    NOT NULL
) STRICT;

CREATE INDEX breaker_events_at ON breaker_events (at);
CREATE INDEX breaker_events_candidate ON breaker_events (candidate, at);
