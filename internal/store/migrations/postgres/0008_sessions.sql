-- Portal sessions of people logged in with SSO: only a hash of each cookie's secret is kept.
-- The claims of the login's ID token are kept so that every request maps them through the
-- policy's identity template and rules as they are now.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    principal  TEXT NOT NULL,
    issuer     TEXT NOT NULL,
    claims     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX sessions_principal ON sessions (principal);
