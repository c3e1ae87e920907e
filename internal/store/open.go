package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver (pure Go)
)

// memoryDBs numbers in-memory SQLite databases so that two stores in one process stay apart.
var memoryDBs atomic.Int64

// Open connects to the store named by dsn and brings its schema up to date (every pending
// migration applied): what `kobe dev` does with the store it owns, and what tests do. A schema
// newer than this kobe knows is refused (*SchemaError). A server and a worker share a store that
// an operator migrates (`kobe migrate up`): they open it with OpenCurrent. Errors never contain
// the DSN's password.
func Open(ctx context.Context, dsn string) (Store, error) {
	s, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	m, err := newMigrator(s.db, s.driver, dsn)
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		_ = s.db.Close()
		return nil, err
	}
	return s, nil
}

// OpenCurrent connects to the store named by dsn and refuses it with a *SchemaError, which names
// the command to run, unless its schema is exactly the one this kobe expects. It changes nothing
// in the store (a SQLite file that does not exist is not created).
func OpenCurrent(ctx context.Context, dsn string) (Store, error) {
	m, err := OpenMigrator(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := m.Check(ctx); err != nil {
		_ = m.Close()
		return nil, err
	}
	return newSQLStore(m.db, m.driver), nil
}

// connect opens the database of dsn, leaving its schema as it is.
func connect(ctx context.Context, dsn string) (*sqlStore, error) {
	parsed, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if parsed.Driver == "sqlite" {
		return openSQLite(parsed.Path)
	}
	return openPostgres(ctx, parsed.URL)
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
