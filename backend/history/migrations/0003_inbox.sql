-- 0003: the inbox (docs/DESIGN.md, "Durability"). Record commits each
-- request, with its attempts, as one row here: one B-tree to write, where
-- requests and attempts with their indexes are seven. The writer moves the
-- rows into requests and attempts soon after, a query moves what waits
-- before it reads, and Open moves what a crash left. rec is the record in
-- the format of backend/history/inbox.go.

CREATE TABLE inbox (
	id  TEXT PRIMARY KEY,
	rec BLOB NOT NULL
) STRICT, WITHOUT ROWID;
