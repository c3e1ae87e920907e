package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// migrateLikeV010 migrates the store at dsn the way kobe v0.1.0's own runner did (internal/store
// at commit 2f884c0, before goose), applying the migration files up to version upTo: the
// runner's table schema_migrations (version, name, applied_at), each file run whole in a
// transaction of its own (under pg_advisory_xact_lock(7353202) on PostgreSQL), then the
// release stamp of a new store. It is kept here, copied, so that the adoption of such a store
// is tested against what that runner wrote and not against what the new code would write.
func migrateLikeV010(t *testing.T, driver, dsn string, upTo int) {
	t.Helper()
	ctx := context.Background()
	db := dbtest.RawStoreSQL(t, dsn)
	rebind := func(q string) string {
		if driver != "postgres" {
			return q
		}
		for n := 1; strings.Contains(q, "?"); n++ {
			q = strings.Replace(q, "?", "$"+strconv.Itoa(n), 1)
		}
		return q
	}
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
	require.NoError(t, err)
	var current sql.NullInt64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&current))
	files, err := store.Migrations(driver)
	require.NoError(t, err)
	for _, m := range files {
		if m.Version > upTo {
			break
		}
		body, err := os.ReadFile(filepath.Join("migrations", driver, m.Name))
		require.NoError(t, err)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		if driver == "postgres" {
			_, err = tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7353202)`)
			require.NoError(t, err)
		}
		var n int
		require.NoError(t, tx.QueryRowContext(ctx, rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.Version).Scan(&n))
		if n == 0 {
			_, err = tx.ExecContext(ctx, string(body))
			require.NoError(t, err, m.Name)
			_, err = tx.ExecContext(ctx, rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
				m.Version, m.Name, time.Now().UTC().Format(time.RFC3339))
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit())
	}
	if current.Int64 == 0 && upTo >= 9 {
		_, err = db.ExecContext(ctx, rebind(`INSERT INTO kobe_release (id, created, release, opened_at) VALUES (1, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`), "v0.1.0", "v0.1.0", time.Now().UTC().Format(time.RFC3339))
		require.NoError(t, err)
	}
}

// versionRows reads schema_migrations as it is: version → "name applied_at".
func versionRows(t *testing.T, dsn string) map[int]string {
	t.Helper()
	rows, err := dbtest.RawStoreSQL(t, dsn).Query(`SELECT version, name, applied_at FROM schema_migrations`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var v int
		var name, at string
		require.NoError(t, rows.Scan(&v, &name, &at))
		out[v] = name + " " + at
	}
	require.NoError(t, rows.Err())
	return out
}

// The same migrations, by number and name, on both drivers; the version this kobe expects is
// the last of them.
func TestMigrationsAreTheSameOnBothDrivers(t *testing.T) {
	pg, err := store.Migrations("postgres")
	require.NoError(t, err)
	lite, err := store.Migrations("sqlite")
	require.NoError(t, err)
	assert.Equal(t, pg, lite)
	require.NotEmpty(t, pg)
	assert.Equal(t, pg[len(pg)-1].Version, store.ExpectedSchemaVersion())
	assert.Equal(t, store.Migration{Version: 12, Name: "0012_sealing_key.sql"}, pg[len(pg)-1],
		"the schema of this release (a new migration changes this line, the CHANGELOG and docs/production.md)")
}

// `kobe migrate status` and `up` on a new store of each driver: the status reads and creates
// nothing; up applies every migration once, stamps the store with this release, and a second up
// applies nothing.
func TestMigrateUpAndStatus(t *testing.T) {
	for name, newDSN := range dbtest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := newDSN(t)
			all, err := store.Migrations(name)
			require.NoError(t, err)

			m, err := store.OpenMigrator(ctx, dsn)
			require.NoError(t, err)
			st, err := m.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, 0, st.Current)
			assert.Equal(t, store.ExpectedSchemaVersion(), st.Expected)
			assert.Equal(t, all, st.Pending)
			assert.Empty(t, st.Applied)
			assert.False(t, st.UpToDate())
			if name == "sqlite" {
				_, err := os.Stat(strings.TrimPrefix(dsn, "sqlite://"))
				assert.True(t, os.IsNotExist(err), "status does not create the SQLite file")
			} else {
				var exists bool
				require.NoError(t, dbtest.RawStoreSQL(t, dsn).QueryRow(`SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists))
				assert.False(t, exists, "status creates no table")
			}

			t0 := time.Now().Add(-time.Second)
			applied, err := m.Up(ctx)
			require.NoError(t, err)
			assert.Equal(t, all, applied, "every migration, in order")
			st, err = m.Status(ctx)
			require.NoError(t, err)
			assert.True(t, st.UpToDate())
			assert.Equal(t, store.ExpectedSchemaVersion(), st.Current)
			require.Len(t, st.Applied, len(all))
			for i, a := range st.Applied {
				assert.Equal(t, all[i].Version, a.Version)
				assert.Equal(t, all[i].Name, a.Name)
				assert.False(t, a.AppliedAt.Before(t0.Truncate(time.Second)), a.Name)
			}
			rows := versionRows(t, dsn)
			assert.Len(t, rows, len(all), "one row per migration, no row of goose's own (version 0)")

			again, err := m.Up(ctx)
			require.NoError(t, err)
			assert.Empty(t, again, "nothing pending, nothing done")
			assert.Equal(t, rows, versionRows(t, dsn))
			require.NoError(t, m.Close())

			s, err := store.OpenCurrent(ctx, dsn)
			require.NoError(t, err, "a migrated store is accepted by a server or worker")
			defer s.Close()
			stamp, err := s.Release(ctx)
			require.NoError(t, err, "a store kobe migrate up creates is of this release")
			assert.Equal(t, "v0.1.0", stamp.Created)
			v, err := s.SchemaVersion(ctx)
			require.NoError(t, err)
			assert.Equal(t, store.ExpectedSchemaVersion(), v)
		})
	}
}

// A server or a worker (OpenCurrent) refuses a store with no schema, one older than it expects
// and one newer, each with a message naming what to do, and changes none of them; kobe dev
// (Open) and `kobe migrate up` upgrade the older one and refuse the newer one.
func TestOpenCurrentRefusesOlderAndNewerSchemas(t *testing.T) {
	for name, newDSN := range dbtest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := newDSN(t)
			shown := store.RedactDSN(dsn)

			_, err := store.OpenCurrent(ctx, dsn)
			var schemaErr *store.SchemaError
			require.True(t, errors.As(err, &schemaErr), "refused: %v", err)
			assert.Equal(t, "store "+shown+" has no schema yet (this kobe expects version 12): run `kobe migrate up --store "+shown+"` first", err.Error())
			if name == "sqlite" {
				_, err := os.Stat(strings.TrimPrefix(dsn, "sqlite://"))
				assert.True(t, os.IsNotExist(err), "a refused SQLite store is not created")
			}

			// The schema of v0.1.0: migrations up to 0009.
			migrateLikeV010(t, name, dsn, 9)
			_, err = store.OpenCurrent(ctx, dsn)
			require.True(t, errors.As(err, &schemaErr), "refused: %v", err)
			assert.Equal(t, 9, schemaErr.Status.Current)
			assert.Equal(t, "store "+shown+": its schema is at version 9 and this kobe expects 12 (0010_prepared_credentials.sql, 0011_pool_managed_by.sql, 0012_sealing_key.sql pending): "+
				"run `kobe migrate up --store "+shown+"` first", err.Error())
			assert.Len(t, versionRows(t, dsn), 8, "refusing changes nothing (0001 to 0009, there is no 0007)")

			// kobe dev migrates its own store.
			s, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			s, err = store.OpenCurrent(ctx, dsn)
			require.NoError(t, err)
			require.NoError(t, s.Close())

			// A newer kobe applied 0012.
			_, err = dbtest.RawStoreSQL(t, dsn).Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (13, '0013_from_a_newer_kobe.sql', '2027-01-01T00:00:00Z')`)
			require.NoError(t, err)
			before := versionRows(t, dsn)
			newer := "store " + shown + ": its schema is at version 13, newer than this kobe knows (up to 12; 0013_from_a_newer_kobe.sql applied by a newer kobe): " +
				"run the kobe that migrated it, or a newer one (a schema is never migrated down: docs/production.md, \"Rollback\")"
			_, err = store.OpenCurrent(ctx, dsn)
			require.True(t, errors.As(err, &schemaErr), "refused: %v", err)
			assert.Equal(t, newer, err.Error())
			_, err = store.Open(ctx, dsn)
			require.True(t, errors.As(err, &schemaErr), "kobe dev refuses it too: %v", err)
			m, err := store.OpenMigrator(ctx, dsn)
			require.NoError(t, err)
			defer m.Close()
			_, err = m.Up(ctx)
			require.True(t, errors.As(err, &schemaErr), "and kobe migrate up: %v", err)
			st, err := m.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, []store.AppliedMigration{{Version: 13, Name: "0013_from_a_newer_kobe.sql",
				AppliedAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}}, st.Unknown)
			assert.Empty(t, st.Pending)
			assert.Equal(t, before, versionRows(t, dsn), "left as it is")
		})
	}
}

// A store migrated by kobe v0.1.0's own runner is adopted as it is: at v0.1.0's schema (0001 to
// 0009) the new runner sees 0010, 0011 and 0012 pending and applies only them, keeping the rows the
// old runner wrote and the data; at the schema of main before goose (0001 to 0010) it applies
// only 0011 and 0012.
func TestAdoptsAStoreMigratedByTheOldRunner(t *testing.T) {
	for name, newDSN := range dbtest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := newDSN(t)
			migrateLikeV010(t, name, dsn, 9)
			// Applied a while ago, so that a row written again would show.
			_, err := dbtest.RawStoreSQL(t, dsn).Exec(`UPDATE schema_migrations SET applied_at = '2026-12-01T09:00:00Z'`)
			require.NoError(t, err)
			old := versionRows(t, dsn)
			require.Len(t, old, 8, "0001 to 0009, there is no 0007")
			insert := `INSERT INTO pools (name, backend, spec, generation, created_at, updated_at) VALUES ('ci', 'local', '{}', 1, ?, ?)`
			if name == "postgres" {
				insert = `INSERT INTO pools (name, backend, spec, generation, created_at, updated_at) VALUES ('ci', 'local', '{}', 1, $1, $2)`
			}
			now := time.Now().UTC()
			_, err = dbtest.RawStoreSQL(t, dsn).Exec(insert, now, now)
			require.NoError(t, err)

			m, err := store.OpenMigrator(ctx, dsn)
			require.NoError(t, err)
			defer m.Close()
			st, err := m.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, 9, st.Current)
			newer := []store.Migration{{Version: 10, Name: "0010_prepared_credentials.sql"}, {Version: 11, Name: "0011_pool_managed_by.sql"},
				{Version: 12, Name: "0012_sealing_key.sql"}}
			assert.Equal(t, newer, st.Pending)
			assert.Empty(t, st.Unknown)
			applied, err := m.Up(ctx)
			require.NoError(t, err)
			assert.Equal(t, newer, applied, "only the newer ones")
			rows := versionRows(t, dsn)
			for v, row := range old {
				assert.Equal(t, row, rows[v], "the old runner's row of %d is kept as it was", v)
			}
			assert.Contains(t, rows[10], "0010_prepared_credentials.sql ")

			s, err := store.OpenCurrent(ctx, dsn)
			require.NoError(t, err)
			defer s.Close()
			p, err := s.GetPool(ctx, "ci")
			require.NoError(t, err, "the data is kept")
			assert.Equal(t, "local", p.Backend)
			require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "ci-1", Pool: "ci", Backend: "local", Phase: api.InstanceReady}))
			require.NoError(t, s.PutPreparedCredential(ctx, "ci-1", []byte("sealed")), "0010's table is there")
			stamp, err := s.Release(ctx)
			require.NoError(t, err)
			assert.Equal(t, "v0.1.0", stamp.Created, "the old runner's stamp is kept")

			t.Run("at the schema of main before goose", func(t *testing.T) {
				dsn := newDSN(t)
				migrateLikeV010(t, name, dsn, 10)
				old := versionRows(t, dsn)
				m, err := store.OpenMigrator(ctx, dsn)
				require.NoError(t, err)
				defer m.Close()
				applied, err := m.Up(ctx)
				require.NoError(t, err)
				assert.Equal(t, []store.Migration{{Version: 11, Name: "0011_pool_managed_by.sql"}, {Version: 12, Name: "0012_sealing_key.sql"}}, applied, "only the newer ones")
				rows := versionRows(t, dsn)
				for v, row := range old {
					assert.Equal(t, row, rows[v], "the old runner's row of %d is kept as it was", v)
				}
				require.NoError(t, m.Check(ctx))
			})
		})
	}
}

// Several processes migrating one new PostgreSQL store at once (a migration Job retried beside
// a kobe migrate run by hand) take turns: every one succeeds and each migration is applied once.
func TestConcurrentMigrationsTakeTurns(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.PostgresDSN(t)
	var wg sync.WaitGroup
	applied := make([][]store.Migration, 4)
	errs := make([]error, 4)
	for i := range applied {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := store.OpenMigrator(ctx, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer m.Close()
			applied[i], errs[i] = m.Up(ctx)
		}()
	}
	wg.Wait()
	total := 0
	for i := range applied {
		require.NoError(t, errs[i])
		total += len(applied[i])
	}
	all, err := store.Migrations("postgres")
	require.NoError(t, err)
	assert.Equal(t, len(all), total, "each migration applied by exactly one of them")
	assert.Len(t, versionRows(t, dsn), len(all))
}
