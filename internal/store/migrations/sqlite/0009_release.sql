-- The release of kobe that last started on this store (one row, written at start once the
-- store is accepted): a store last run by a release whose workflows this kobe no longer
-- replays is refused while it holds anything live (docs/architecture.md, "Releases and
-- workflow versions"). A store without the row was made before v0.1.0, or was just created.
CREATE TABLE kobe_release (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    created    TEXT NOT NULL,
    release    TEXT NOT NULL,
    opened_at  TEXT NOT NULL
);
