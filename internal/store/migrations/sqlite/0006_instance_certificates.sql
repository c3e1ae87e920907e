-- When each of an instance's certificates expires (CA, serving, admin client), written when the
-- instance is created and each time its certificates are checked or re-issued; exported as
-- kobe_instance_cert_expiry_seconds. One row per instance; it goes with the instance's row.
CREATE TABLE instance_certificates (
    instance_id       TEXT PRIMARY KEY,
    pool              TEXT NOT NULL,
    ca_not_after      TIMESTAMP NOT NULL,
    serving_not_after TIMESTAMP NOT NULL,
    client_not_after  TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL
);
