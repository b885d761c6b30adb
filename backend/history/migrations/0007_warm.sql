-- 0007: whether an attempt's TTFT was a warm sample of its server's speed
-- (fleet.Attempt.Warm): not cold, no load, no wait in a queue behind other
-- work. The deadline learner is seeded at start from these alone, as it
-- learned from them while running (SPEC 2.4: a queued wait is never a
-- sample). NULL for rows written before, which the seed does not take:
-- they may hold queued waits (docs/DESIGN.md, "What is a sample").
ALTER TABLE attempts ADD COLUMN warm INTEGER;
