package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver (pure Go)
)

//go:embed migrations
var migrations embed.FS

// memoryDBs numbers in-memory SQLite databases so that two stores in one process stay apart.
var memoryDBs atomic.Int64

// Open connects to the store named by dsn (see ParseDSN), applies pending schema
// migrations, and returns it. Errors never contain the DSN's password.
func Open(ctx context.Context, dsn string) (Store, error) {
	parsed, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var s *sqlStore
	switch parsed.Driver {
	case "sqlite":
		s, err = openSQLite(parsed.Path)
	case "postgres":
		s, err = openPostgres(ctx, parsed.URL)
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.db.Close()
		return nil, fmt.Errorf("store %s: migrating schema: %s", RedactDSN(dsn), oneLine(RedactDSNError(err, dsn)))
	}
	return s, nil
}

func openSQLite(path string) (*sqlStore, error) {
	// busy_timeout makes writers wait for each other instead of failing; WAL lets readers run
	// beside the single writer; _txlock=immediate takes the write lock at BEGIN, which avoids
	// deadlocks between transactions that read first and write later.
	pragmas := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_txlock=immediate"
	var dsn string
	memory := path == ":memory:"
	if memory {
		dsn = fmt.Sprintf("file:kobe-store-%d-%d?mode=memory&cache=shared&%s", os.Getpid(), memoryDBs.Add(1), pragmas)
	} else {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("store sqlite://%s: %v", path, err)
			}
		}
		dsn = "file:" + path + "?" + pragmas + "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store sqlite://%s: %v", path, err)
	}
	if memory {
		// A shared-cache memory database disappears with its last connection, and shared-cache
		// locks do not honour busy_timeout: one connection, kept forever, avoids both.
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
	} else {
		db.SetMaxOpenConns(4)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A connection's first statements switch a new file to WAL. Two processes doing that at the
	// same moment can get SQLITE_BUSY at once, without the busy handler: SQLite refuses to wait
	// where waiting could deadlock (a reader upgrading to the exclusive lock the switch needs).
	// The other process finishes within milliseconds, so a new connection simply tries again.
	for {
		err = db.PingContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "database is locked") || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store sqlite://%s: %v", path, err)
	}
	return newSQLStore(db, "sqlite"), nil
}

func openPostgres(ctx context.Context, url string) (*sqlStore, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("store %s: %s", RedactDSN(url), RedactDSNError(err, url))
	}
	db.SetMaxOpenConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: cannot connect: %s", RedactDSN(url), oneLine(RedactDSNError(err, url)))
	}
	return newSQLStore(db, "postgres"), nil
}

type migration struct {
	version int
	name    string
	sql     string
}

func (s *sqlStore) loadMigrations() ([]migration, error) {
	dir := "migrations/" + s.driver
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and an underscore", name)
		}
		body, err := fs.ReadFile(migrations, dir+"/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate applies each pending migration in its own transaction. On PostgreSQL an advisory
// lock serialises concurrent starts (server and worker booting together); on SQLite the
// immediate transaction does the same.
func (s *sqlStore) migrate(ctx context.Context) error {
	all, err := s.loadMigrations()
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	current, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if latest := all[len(all)-1].version; current > latest {
		return fmt.Errorf("the store's schema is at version %d but this kobe knows only up to %d: upgrade kobe", current, latest)
	}
	for _, m := range all {
		if err := s.applyMigration(ctx, m); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	if current == 0 {
		// A store this kobe created is of its release (kobe_release); one that had a schema
		// before and no stamp was made by a kobe before v0.1.0 (see CheckRelease).
		if _, err := s.exec(ctx, `INSERT INTO kobe_release (id, created, release, opened_at) VALUES (1, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`, buildinfo.Get().Version, buildinfo.Get().Version, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return fmt.Errorf("recording the store's release: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) applyMigration(ctx context.Context, m migration) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if s.driver == "postgres" {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7353202)`); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	return tx.Commit()
}

// oneLine folds a multi-line driver error (pgx lists one line per address tried) into one line,
// dropping repeats, so that start-up failures stay one readable line.
func oneLine(msg string) string {
	var parts []string
	seen := map[string]bool{}
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		parts = append(parts, l)
	}
	return strings.Join(parts, " ")
}
