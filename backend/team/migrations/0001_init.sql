-- 0001: the team's tables (docs/DESIGN.md, "Teams"). Every row names the
-- node that wrote it, and only that node writes it. The tables that grow
-- are partitioned by day (partition.go creates the partitions ahead of the
-- rows and drops whole ones past retention, never DELETEs), so their keys
-- include the partitioning time.

-- The nodes: what each says of itself, refreshed by its heartbeat.
CREATE TABLE team_nodes (
	node        text        PRIMARY KEY,
	version     text        NOT NULL,
	config_hash text        NOT NULL,
	started_at  timestamptz NOT NULL,
	last_seen   timestamptz NOT NULL       -- the database's clock, not the node's
);

-- Where each node's shipping stands in its own history file
-- (history.Cursor), moved in the transaction that ships the rows.
CREATE TABLE team_cursors (
	node           text   PRIMARY KEY,
	request_rowid  bigint NOT NULL,
	breaker_id     bigint NOT NULL
);

CREATE TABLE team_requests (
	node              text        NOT NULL,
	id                text        NOT NULL,
	started_at        timestamptz NOT NULL,
	protocol          text        NOT NULL,
	stream            boolean     NOT NULL,
	thinking          boolean     NOT NULL,
	requested_model   text        NOT NULL,
	served_candidate  text,
	served_model      text,
	is_fallback       boolean     NOT NULL,
	status            text        NOT NULL,
	http_status       integer,
	error             text,
	failure           text,
	ttft_ms           bigint,
	latency_ms        bigint      NOT NULL,
	prompt_tokens     integer,
	completion_tokens integer,
	PRIMARY KEY (node, id, started_at)
) PARTITION BY RANGE (started_at);

CREATE INDEX team_requests_started_at ON team_requests (started_at, node);

-- Attempts sit in their request's partition (request_started_at).
CREATE TABLE team_attempts (
	node               text        NOT NULL,
	request_id         text        NOT NULL,
	request_started_at timestamptz NOT NULL,
	ord                integer     NOT NULL,
	candidate          text        NOT NULL,
	outcome            text        NOT NULL,
	fault              text,
	error              text,
	http_status        integer,
	started_at         timestamptz,
	deadline_ms        bigint      NOT NULL,
	ttft_ms            bigint,
	duration_ms        bigint      NOT NULL,
	cold               boolean     NOT NULL,
	demoted            boolean     NOT NULL,
	PRIMARY KEY (node, request_id, ord, request_started_at)
) PARTITION BY RANGE (request_started_at);

-- A node's breaker transitions, named by what they are: a node's numbering
-- of its own events may start over, the transition itself does not repeat.
CREATE TABLE team_breaker_events (
	node       text        NOT NULL,
	candidate  text        NOT NULL,
	from_state text        NOT NULL,
	to_state   text        NOT NULL,
	at         timestamptz NOT NULL,
	cause      text        NOT NULL,
	PRIMARY KEY (node, candidate, at, from_state, to_state)
) PARTITION BY RANGE (at);

-- Evidence (evidence.go): what a node last saw of a model on a shared server, one
-- append-only row per change, rate-limited per server. at is the
-- database's clock, so a reader ages a row without trusting the writer's.
CREATE TABLE team_evidence (
	seq      bigserial   NOT NULL,
	node     text        NOT NULL,
	server   text        NOT NULL,     -- the server's key (server_key, or its URL's scheme://host:port)
	model    text        NOT NULL,
	status   text        NOT NULL,     -- ok, breaker_open, probe_failed, busy, loading, model_missing
	detail   text        NOT NULL,
	for_ms   bigint      NOT NULL,     -- how long the status holds from at
	inflight integer     NOT NULL,
	at       timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (seq, at)
) PARTITION BY RANGE (at);

CREATE INDEX team_evidence_at ON team_evidence (at);
