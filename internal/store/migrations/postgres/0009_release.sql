-- The release of kobe that created this store or last started on it (one row: written by Open
-- for a store it creates, and at start once the store is accepted): a store last run by a
-- release whose workflows this kobe no longer replays is refused while it holds anything live
-- (docs/architecture.md, "Releases and workflow versions"). A store with a schema from before
-- this migration has no row: it was made by a kobe before v0.1.0.
CREATE TABLE kobe_release (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    created    TEXT NOT NULL,
    release    TEXT NOT NULL,
    opened_at  TEXT NOT NULL
);
