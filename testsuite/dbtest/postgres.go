// Package dbtest gives tests real stores: fresh PostgreSQL databases and SQLite files, and faults
// injected into them. It imports nothing of kobe, so that any package can use it in its tests.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// DefaultPostgresAdminDSN is where tests look for PostgreSQL when KOBE_TEST_POSTGRES is unset:
// the Debian package's cluster on loopback with trust auth, as .ci/run sets it up.
const DefaultPostgresAdminDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// PostgresDSN creates a fresh, uniquely named database on the test PostgreSQL server and returns
// its DSN; the database is dropped when the test ends.
//
// The server comes from KOBE_TEST_POSTGRES (an admin DSN) or DefaultPostgresAdminDSN. When it
// cannot be reached the test is skipped with a message saying how to provide one, unless
// KOBE_TEST_REQUIRE_POSTGRES=1 (set by `make test` and CI), which turns the skip into a failure.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("KOBE_TEST_POSTGRES")
	if admin == "" {
		admin = DefaultPostgresAdminDSN
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("KOBE_TEST_POSTGRES: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		msg := fmt.Sprintf("PostgreSQL is needed for this test but %s is not reachable (%v). "+
			"Start one (Debian: apt-get install postgresql && pg_ctlcluster 15 main start, as .ci/run does) "+
			"or point KOBE_TEST_POSTGRES at an admin DSN.", redact(admin), err)
		if os.Getenv("KOBE_TEST_REQUIRE_POSTGRES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "kobe_test_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("KOBE_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
