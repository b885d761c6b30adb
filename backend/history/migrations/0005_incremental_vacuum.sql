-- outside a transaction
-- 0005: a file made before 0005 has auto_vacuum off, so it never gave
-- back the pages a sweep freed. Every connection sets
-- auto_vacuum=INCREMENTAL (history.go, dsn), which a file takes on at
-- its next VACUUM: this one, once. A new file has it from the start, and
-- its VACUUM is quick.
VACUUM;
