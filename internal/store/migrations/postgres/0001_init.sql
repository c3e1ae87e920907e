CREATE TABLE pools (
    name       TEXT PRIMARY KEY,
    backend    TEXT NOT NULL,
    spec       JSONB NOT NULL DEFAULT '{}',
    generation BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE instances (
    id         TEXT PRIMARY KEY,
    pool       TEXT NOT NULL,
    backend    TEXT NOT NULL,
    host       TEXT NOT NULL DEFAULT '',
    phase      TEXT NOT NULL,
    lease_id   TEXT NOT NULL DEFAULT '',
    endpoint   TEXT NOT NULL DEFAULT '',
    data       JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
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
    ttl_ms          BIGINT NOT NULL DEFAULT 0,
    expires_at      TIMESTAMPTZ,
    metadata        JSONB NOT NULL DEFAULT '{}',
    reason          TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX leases_principal_phase ON leases (principal, phase);
CREATE INDEX leases_pool_phase ON leases (pool, phase);

CREATE TABLE quotas (
    subject               TEXT PRIMARY KEY,
    max_concurrent_leases INTEGER NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);

CREATE TABLE events (
    id         BIGSERIAL PRIMARY KEY,
    at         TIMESTAMPTZ NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT NOT NULL DEFAULT '',
    result     TEXT NOT NULL DEFAULT '',
    request_id TEXT NOT NULL DEFAULT '',
    detail     JSONB NOT NULL DEFAULT '{}'
);
CREATE INDEX events_at ON events (at);

-- The audit log is append-only: the database itself refuses changes, whoever asks.
CREATE FUNCTION kobe_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only';
END;
$$;
CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION kobe_events_append_only();

CREATE TABLE probes (
    id         TEXT PRIMARY KEY,
    written_at TIMESTAMPTZ NOT NULL
);
