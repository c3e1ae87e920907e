-- The fingerprint of the key that seals values in this store (the active key of the key file
-- the server and every worker hold; internal/secretbox): recorded by the first process that
-- starts with a key, compared by every later one. A process whose active key is neither it nor
-- newer than it (its key file holding the recorded key as an older one) is refused at start.
CREATE TABLE kobe_sealing_key (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    fingerprint TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
