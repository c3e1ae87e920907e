-- API bearer tokens: only a hash of each secret is kept.
CREATE TABLE tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL,
    principal    TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP,
    revoked_at   TIMESTAMP,
    last_used_at TIMESTAMP
);

-- Admission: a lease row is written by the API, in the same transaction as the quota check.
ALTER TABLE leases ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN request_hash TEXT NOT NULL DEFAULT '';
CREATE INDEX leases_role_phase ON leases (role, phase);
CREATE UNIQUE INDEX leases_idempotency ON leases (principal, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX events_actor ON events (actor);
ALTER TABLE events ADD COLUMN pool TEXT NOT NULL DEFAULT '';
CREATE INDEX events_pool ON events (pool);
