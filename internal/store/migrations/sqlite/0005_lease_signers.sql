-- The signer a Ready instance's next lease is minted with (see backends.LeasePreparer): its
-- client CA, sealed (AES-GCM) by kobe before it gets here. One row per instance; it goes with
-- the instance's row.
CREATE TABLE lease_signers (
    instance_id TEXT PRIMARY KEY,
    sealed      BLOB NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
