-- A lease's kubeconfig, sealed (AES-GCM) by kobe before it gets here; workflows only carry
-- a reference to it, never the kubeconfig itself.
CREATE TABLE lease_credentials (
    lease_id      TEXT PRIMARY KEY,
    sealed        BYTEA NOT NULL,
    credential_id TEXT NOT NULL DEFAULT '',
    expires_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
