package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
)

// The schema is a list of migrations, migrations/<driver>/NNNN_name.sql, applied in the order of
// their numbers, each in one transaction. goose (github.com/pressly/goose/v3) applies them and
// serialises concurrent runs; the record of what is applied stays the table kobe v0.1.0's own
// runner kept, schema_migrations (version, name, applied_at), so that a store of v0.1.0 is
// adopted as it is and an older kobe still sees the versions a newer one applied (and refuses
// a schema newer than it knows). There are no down migrations: docs/production.md, "Rollback".

//go:embed migrations
var migrationFiles embed.FS

// Migration is one schema migration this kobe carries.
type Migration struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
}

// AppliedMigration is a migration recorded as applied in a store.
type AppliedMigration struct {
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	AppliedAt time.Time `json:"appliedAt"`
}

// SchemaStatus compares a store's schema with the migrations this kobe carries.
type SchemaStatus struct {
	Driver string `json:"driver"`
	// Current is the highest version applied (0: the store has no schema yet); Expected is the
	// highest this kobe carries.
	Current  int                `json:"current"`
	Expected int                `json:"expected"`
	Applied  []AppliedMigration `json:"applied"`
	// Pending are carried by this kobe and not applied; Unknown are applied and not carried by
	// this kobe: a newer kobe applied them.
	Pending []Migration        `json:"pending"`
	Unknown []AppliedMigration `json:"unknown"`
}

// UpToDate says whether the store's schema is exactly the one this kobe expects.
func (s SchemaStatus) UpToDate() bool { return len(s.Pending) == 0 && len(s.Unknown) == 0 }

// SchemaError refuses a store whose schema is not the one this kobe expects: older (migrations
// pending: `kobe migrate up`) or newer (applied by a newer kobe).
type SchemaError struct {
	// Store is the store's DSN without its password.
	Store  string
	Status SchemaStatus
}

func (e *SchemaError) Error() string {
	st := e.Status
	if len(st.Unknown) > 0 {
		return fmt.Sprintf("store %s: its schema is at version %d, newer than this kobe knows (up to %d; %s applied by a newer kobe): "+
			"run the kobe that migrated it, or a newer one (a schema is never migrated down: docs/production.md, \"Rollback\")",
			e.Store, st.Current, st.Expected, migrationNames(st.Unknown))
	}
	run := fmt.Sprintf("run `kobe migrate up --store %s` first", e.Store)
	if st.Current == 0 {
		return fmt.Sprintf("store %s has no schema yet (this kobe expects version %d): %s", e.Store, st.Expected, run)
	}
	pending := make([]AppliedMigration, len(st.Pending))
	for i, m := range st.Pending {
		pending[i] = AppliedMigration{Version: m.Version, Name: m.Name}
	}
	return fmt.Sprintf("store %s: its schema is at version %d and this kobe expects %d (%s pending): %s",
		e.Store, st.Current, st.Expected, migrationNames(pending), run)
}

func migrationNames(ms []AppliedMigration) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
		if names[i] == "" {
			names[i] = strconv.Itoa(m.Version)
		}
	}
	return strings.Join(names, ", ")
}

// Migrations returns the migrations this kobe carries for driver ("sqlite" or "postgres"), in
// order.
func Migrations(driver string) ([]Migration, error) {
	files, err := loadMigrations(driver)
	if err != nil {
		return nil, err
	}
	out := make([]Migration, len(files))
	for i, f := range files {
		out[i] = f.Migration
	}
	return out, nil
}

// ExpectedSchemaVersion is the schema version this kobe expects: its highest migration (the
// same number on both drivers, which a test checks).
func ExpectedSchemaVersion() int {
	files, err := loadMigrations("postgres")
	if err != nil || len(files) == 0 {
		// The files are embedded at build time and a test reads them: this cannot happen in a
		// binary that passed its tests.
		panic(fmt.Sprintf("store: reading the embedded migrations: %v", err))
	}
	return files[len(files)-1].Version
}

type migrationFile struct {
	Migration
	sql string
}

func loadMigrations(driver string) ([]migrationFile, error) {
	dir := "migrations/" + driver
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var out []migrationFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and an underscore", name)
		}
		body, err := fs.ReadFile(migrationFiles, dir+"/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, migrationFile{Migration: Migration{Version: v, Name: name}, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrator reads and upgrades the schema of one store: `kobe migrate`, and Open for `kobe dev`.
type Migrator struct {
	// db is nil while the store is a SQLite file that does not exist yet: Status reports it
	// without creating it, Up creates it.
	db     *sql.DB
	dsn    string
	driver string
	// redacted is the store's DSN without its password, for messages.
	redacted string
	files    []migrationFile
	versions versionTable
}

// OpenMigrator connects to the store named by dsn without touching its schema (nor creating
// its SQLite file).
func OpenMigrator(ctx context.Context, dsn string) (*Migrator, error) {
	parsed, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if parsed.Driver == "sqlite" && parsed.Path != ":memory:" {
		if _, err := os.Stat(parsed.Path); errors.Is(err, fs.ErrNotExist) {
			return newMigrator(nil, "sqlite", dsn)
		}
	}
	s, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	m, err := newMigrator(s.db, s.driver, dsn)
	if err != nil {
		_ = s.db.Close()
		return nil, err
	}
	return m, nil
}

func newMigrator(db *sql.DB, driver, dsn string) (*Migrator, error) {
	files, err := loadMigrations(driver)
	if err != nil {
		return nil, err
	}
	names := make(map[int]string, len(files))
	for _, f := range files {
		names[f.Version] = f.Name
	}
	return &Migrator{db: db, dsn: dsn, driver: driver, redacted: RedactDSN(dsn), files: files,
		versions: versionTable{driver: driver, names: names}}, nil
}

// Close closes the migrator's connection to the store.
func (m *Migrator) Close() error {
	if m.db == nil {
		return nil
	}
	return m.db.Close()
}

// Store is the store's DSN without its password.
func (m *Migrator) Store() string { return m.redacted }

// Status reads what the store has applied and compares it with what this kobe carries. It
// writes nothing: a store with no schema is reported as such, not created.
func (m *Migrator) Status(ctx context.Context) (SchemaStatus, error) {
	st := SchemaStatus{Driver: m.driver, Expected: m.files[len(m.files)-1].Version,
		Applied: []AppliedMigration{}, Pending: []Migration{}, Unknown: []AppliedMigration{}}
	if m.db != nil {
		exists, err := m.versions.TableExists(ctx, m.db)
		if err == nil && exists {
			st.Applied, err = m.versions.list(ctx, m.db)
		}
		if err != nil {
			return SchemaStatus{}, fmt.Errorf("store %s: reading its schema version: %s", m.redacted, oneLine(RedactDSNError(err, m.dsn)))
		}
	}
	applied := map[int]bool{}
	for _, a := range st.Applied {
		applied[a.Version] = true
		st.Current = max(st.Current, a.Version)
		if _, known := m.versions.names[a.Version]; !known {
			st.Unknown = append(st.Unknown, a)
		}
	}
	for _, f := range m.files {
		if !applied[f.Version] {
			st.Pending = append(st.Pending, f.Migration)
		}
	}
	return st, nil
}

// Check returns a *SchemaError unless the store's schema is exactly the one this kobe expects.
func (m *Migrator) Check(ctx context.Context) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	if !st.UpToDate() {
		return &SchemaError{Store: m.redacted, Status: st}
	}
	return nil
}

// Up applies every pending migration, in order, each in its own transaction, and returns those
// it applied (none when the schema is up to date). A schema newer than this kobe knows is
// refused with a *SchemaError and left as it is. A store that had no schema is stamped with
// this kobe's release (kobe_release: see CheckRelease).
func (m *Migrator) Up(ctx context.Context) ([]Migration, error) {
	before, err := m.Status(ctx)
	if err != nil {
		return nil, err
	}
	if len(before.Unknown) > 0 {
		return nil, &SchemaError{Store: m.redacted, Status: before}
	}
	if len(before.Pending) == 0 {
		return []Migration{}, nil
	}
	if m.db == nil {
		s, err := connect(ctx, m.dsn)
		if err != nil {
			return nil, err
		}
		m.db = s.db
	}
	applied, err := m.applyPending(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: migrating its schema: %s", m.redacted, oneLine(RedactDSNError(err, m.dsn)))
	}
	if before.Current == 0 {
		// A store this kobe created is of its release; one that had a schema before and no stamp
		// was made by a kobe before v0.1.0 (see CheckRelease).
		if _, err := m.db.ExecContext(ctx, rebindFor(m.driver, `INSERT INTO kobe_release (id, created, release, opened_at) VALUES (1, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`), buildinfo.Get().Version, buildinfo.Get().Version, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return nil, fmt.Errorf("store %s: recording its release: %s", m.redacted, oneLine(RedactDSNError(err, m.dsn)))
		}
	}
	return applied, nil
}

// applyPending runs goose over the migration files. Each file is a goose Go migration that runs
// the file whole in goose's transaction (the files are plain SQL, without goose's annotations,
// exactly as v0.1.0 applied them). On PostgreSQL goose holds a session advisory lock for the
// whole run, with the key v0.1.0's runner locked each migration with, so that processes
// migrating at the same moment (of this release or of v0.1.0) take turns. On SQLite the
// transaction takes the write lock at BEGIN (_txlock=immediate) and the migration first looks,
// inside it, whether another process applied the version meanwhile: then it does nothing, and
// recording the version again is a no-op.
func (m *Migrator) applyPending(ctx context.Context) ([]Migration, error) {
	var applied []Migration
	var goMigrations []*goose.Migration
	for _, f := range m.files {
		goMigrations = append(goMigrations, goose.NewGoMigration(int64(f.Version), &goose.GoFunc{
			RunTx: func(ctx context.Context, tx *sql.Tx) error {
				done, err := m.versions.has(ctx, tx, f.Version)
				if err != nil || done {
					return err
				}
				if _, err := tx.ExecContext(ctx, f.sql); err != nil {
					return fmt.Errorf("%s: %w", f.Name, err)
				}
				applied = append(applied, f.Migration)
				return nil
			},
		}, nil))
	}
	opts := []goose.ProviderOption{
		goose.WithStore(&m.versions),
		goose.WithGoMigrations(goMigrations...),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
		// Any migration not recorded is applied, lower than the highest recorded or not, as
		// v0.1.0's runner did (and as Status counts it pending).
		goose.WithAllowOutofOrder(true),
	}
	if m.driver == "postgres" {
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockKey), lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	provider, err := goose.NewProvider(goose.DialectCustom, m.db, nil, opts...)
	if err != nil {
		return nil, err
	}
	if _, err := provider.Up(ctx); err != nil {
		var partial *goose.PartialError
		if errors.As(err, &partial) && partial.Failed != nil && partial.Failed.Error != nil {
			return nil, partial.Failed.Error
		}
		return nil, err
	}
	if applied == nil {
		applied = []Migration{}
	}
	return applied, nil
}

// migrationLockKey is the PostgreSQL advisory lock key of schema migrations (v0.1.0's runner
// took it per transaction, pg_advisory_xact_lock(7353202)).
const migrationLockKey = 7353202

// versionTable is goose's record of applied migrations kept in the table of kobe v0.1.0's runner:
// schema_migrations (version, name, applied_at as RFC 3339 text), one row per migration applied.
// goose marks a version table it creates with a row of version 0; this table never holds one,
// and version 0 is reported as always there, so that a table v0.1.0 made and one goose made
// read the same.
type versionTable struct {
	driver string
	// names are the file names of the migrations this kobe carries, recorded with their version.
	names map[int]string
}

var _ database.StoreExtender = (*versionTable)(nil)

const versionTableName = "schema_migrations"

func (v *versionTable) Tablename() string { return versionTableName }

// TableExists looks in the catalog (PostgreSQL: on the search path, as every query of kobe).
func (v *versionTable) TableExists(ctx context.Context, db database.DBTxConn) (bool, error) {
	var exists bool
	var err error
	if v.driver == "postgres" {
		err = db.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists)
	} else {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists)
	}
	return exists, err
}

// CreateVersionTable creates the table as v0.1.0's runner did. IF NOT EXISTS: two processes
// migrating a new SQLite file at the same moment may both find it missing.
func (v *versionTable) CreateVersionTable(ctx context.Context, db database.DBTxConn) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
	return err
}

// Insert records a version (a no-op for version 0 and for a version already recorded).
func (v *versionTable) Insert(ctx context.Context, db database.DBTxConn, req database.InsertRequest) error {
	if req.Version == 0 {
		return nil
	}
	name, ok := v.names[int(req.Version)]
	if !ok {
		return fmt.Errorf("recording migration %d: this kobe carries no such migration", req.Version)
	}
	_, err := db.ExecContext(ctx, rebindFor(v.driver, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)
		ON CONFLICT (version) DO NOTHING`), req.Version, name, time.Now().UTC().Format(time.RFC3339))
	return err
}

// Delete forgets a version. kobe never migrates down; goose's interface asks for it.
func (v *versionTable) Delete(ctx context.Context, db database.DBTxConn, version int64) error {
	_, err := db.ExecContext(ctx, rebindFor(v.driver, `DELETE FROM schema_migrations WHERE version = ?`), version)
	return err
}

func (v *versionTable) GetMigration(ctx context.Context, db database.DBTxConn, version int64) (*database.GetMigrationResult, error) {
	if version == 0 {
		return &database.GetMigrationResult{IsApplied: true}, nil
	}
	var at string
	err := db.QueryRowContext(ctx, rebindFor(v.driver, `SELECT applied_at FROM schema_migrations WHERE version = ?`), version).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, database.ErrVersionNotFound
	}
	if err != nil {
		return nil, err
	}
	t, _ := time.Parse(time.RFC3339, at)
	return &database.GetMigrationResult{Timestamp: t, IsApplied: true}, nil
}

func (v *versionTable) GetLatestVersion(ctx context.Context, db database.DBTxConn) (int64, error) {
	var latest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&latest); err != nil {
		return 0, err
	}
	return latest.Int64, nil
}

// ListMigrations lists the versions applied, newest first, and version 0 last.
func (v *versionTable) ListMigrations(ctx context.Context, db database.DBTxConn) ([]*database.ListMigrationsResult, error) {
	applied, err := v.list(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]*database.ListMigrationsResult, 0, len(applied)+1)
	for i := len(applied) - 1; i >= 0; i-- {
		out = append(out, &database.ListMigrationsResult{Version: int64(applied[i].Version), IsApplied: true})
	}
	return append(out, &database.ListMigrationsResult{Version: 0, IsApplied: true}), nil
}

// list reads the rows of the table, oldest version first.
func (v *versionTable) list(ctx context.Context, db database.DBTxConn) ([]AppliedMigration, error) {
	rows, err := db.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AppliedMigration{}
	for rows.Next() {
		var a AppliedMigration
		var at string
		if err := rows.Scan(&a.Version, &a.Name, &at); err != nil {
			return nil, err
		}
		a.AppliedAt, _ = time.Parse(time.RFC3339, at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// has says whether version is recorded.
func (v *versionTable) has(ctx context.Context, db database.DBTxConn, version int) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, rebindFor(v.driver, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), version).Scan(&n)
	return n > 0, err
}
