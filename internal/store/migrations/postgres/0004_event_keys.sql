-- An audit event may name the transition it records (a lease's phase change, say): with a key,
-- a retried writer writes it exactly once. Events without a key ('') are not constrained.
ALTER TABLE events ADD COLUMN dedup_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX events_dedup_key ON events (dedup_key) WHERE dedup_key <> '';
