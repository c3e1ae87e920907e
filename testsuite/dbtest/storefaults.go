package dbtest

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, for a raw connection to a store file
)

// StoreDSNs are the stores a test runs on: a fresh SQLite file and a fresh PostgreSQL database
// (see PostgresDSN; skipped, or failed under KOBE_TEST_REQUIRE_POSTGRES=1, without a server).
func StoreDSNs() map[string]func(t testing.TB) string {
	return map[string]func(t testing.TB) string{
		"sqlite":   func(t testing.TB) string { return "sqlite://" + t.TempDir() + "/kobe.db" },
		"postgres": PostgresDSN,
	}
}

// RawStoreSQL opens a connection of its own to the store at dsn (sqlite://FILE or postgres://…),
// beside kobe's, to do what only a test does.
func RawStoreSQL(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if path, ok := strings.CutPrefix(dsn, "sqlite://"); ok {
		db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	} else {
		db, err = sql.Open("pgx", dsn)
	}
	if err != nil {
		t.Fatalf("raw connection to the store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// AuditDownMessage is the error every insert into the audit log fails with while BreakAudit holds.
const AuditDownMessage = "audit log unavailable (test fault)"

// BreakAudit makes every insert into the store's audit table fail, in the database itself (a
// trigger that raises), until the returned function restores it. Reads and other tables work.
func BreakAudit(t testing.TB, dsn string) (restore func()) {
	t.Helper()
	db := RawStoreSQL(t, dsn)
	ctx := context.Background()
	var create, drop []string
	if strings.HasPrefix(dsn, "sqlite://") {
		create = []string{`CREATE TRIGGER kobe_test_audit_down BEFORE INSERT ON events
			BEGIN SELECT RAISE(ABORT, '` + AuditDownMessage + `'); END`}
		drop = []string{`DROP TRIGGER kobe_test_audit_down`}
	} else {
		create = []string{`CREATE FUNCTION kobe_test_audit_down() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION '` + AuditDownMessage + `'; END; $$`,
			`CREATE TRIGGER kobe_test_audit_down BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION kobe_test_audit_down()`}
		drop = []string{`DROP TRIGGER kobe_test_audit_down ON events`, `DROP FUNCTION kobe_test_audit_down()`}
	}
	for _, q := range create {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("breaking the audit log: %v", err)
		}
	}
	return func() {
		t.Helper()
		for _, q := range drop {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("restoring the audit log: %v", err)
			}
		}
	}
}
