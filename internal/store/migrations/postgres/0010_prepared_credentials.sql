-- lease_signers was named when a Ready instance's next lease was minted with a signing key (its
-- client CA). Since v0.1.0 it holds a prepared credential (backends.PreparedCredential: a token
-- of the instance's holder, sealed by kobe), which cannot sign: the table is named for that.
-- A kobe of v0.1.0 refuses a store migrated past what it knows, so no older process starts on
-- the renamed table (upgrade the server and the workers together).
ALTER TABLE lease_signers RENAME TO prepared_credentials;
ALTER TABLE prepared_credentials RENAME CONSTRAINT lease_signers_pkey TO prepared_credentials_pkey;
