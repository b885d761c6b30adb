-- 0002: whose fault a failed attempt was (fleet.Fault: server, busy, queued,
-- loading, request, config, capability, client), and why a request got no
-- answer (fleet.Failure). NULL for rows written before, and where none.

ALTER TABLE attempts ADD COLUMN fault TEXT;
ALTER TABLE requests ADD COLUMN failure TEXT;
