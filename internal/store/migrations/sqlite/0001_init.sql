CREATE TABLE pools (
    name       TEXT PRIMARY KEY,
    backend    TEXT NOT NULL,
    spec       TEXT NOT NULL DEFAULT '{}',
    generation INTEGER NOT NULL DEFAULT 0,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE instances (
    id         TEXT PRIMARY KEY,
    pool       TEXT NOT NULL,
    backend    TEXT NOT NULL,
    host       TEXT NOT NULL DEFAULT '',
    phase      TEXT NOT NULL,
    lease_id   TEXT NOT NULL DEFAULT '',
    endpoint   TEXT NOT NULL DEFAULT '',
    data       TEXT NOT NULL DEFAULT '{}',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX instances_pool_phase ON instances (pool, phase);

CREATE TABLE leases (
    id              TEXT PRIMARY KEY,
    pool            TEXT NOT NULL,
    principal       TEXT NOT NULL,
    phase           TEXT NOT NULL,
    instance_id     TEXT NOT NULL DEFAULT '',
    alias           TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL DEFAULT '',
    ttl_ms          INTEGER NOT NULL DEFAULT 0,
    expires_at      TIMESTAMP,
    metadata        TEXT NOT NULL DEFAULT '{}',
    reason          TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL
);
CREATE INDEX leases_principal_phase ON leases (principal, phase);
CREATE INDEX leases_pool_phase ON leases (pool, phase);

CREATE TABLE quotas (
    subject               TEXT PRIMARY KEY,
    max_concurrent_leases INTEGER NOT NULL,
    updated_at            TIMESTAMP NOT NULL
);

CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         TIMESTAMP NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT NOT NULL DEFAULT '',
    result     TEXT NOT NULL DEFAULT '',
    request_id TEXT NOT NULL DEFAULT '',
    detail     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_at ON events (at);

-- The audit log is append-only: the database itself refuses changes, whoever asks.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only');
END;

CREATE TABLE probes (
    id         TEXT PRIMARY KEY,
    written_at TIMESTAMP NOT NULL
);
