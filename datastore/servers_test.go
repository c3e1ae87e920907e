package datastore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// sqlServer is a datastore server of this machine, checked to answer.
func sqlServer(t *testing.T, driver datastore.Driver) *datastore.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("talks to the machine's datastore servers; skipped with -short")
	}
	var admin string
	switch driver {
	case datastore.Postgres:
		admin = dbtest.PostgresAdminURL(t)
	case datastore.MySQL:
		admin = dbtest.MySQLAdminURL(t)
	case datastore.NATS:
		admin = dbtest.NATSURL(t)
	}
	s, err := datastore.Parse(admin)
	require.NoError(t, err)
	require.NoError(t, s.Ping(context.Background()))
	return s
}

// openInstance connects with an instance's DSN as kine would.
func openInstance(t *testing.T, in datastore.Instance) *sql.DB {
	t.Helper()
	raw := in.DSN.Reveal()
	var db *sql.DB
	switch in.Driver {
	case datastore.Postgres:
		var err error
		db, err = sql.Open("pgx", raw)
		require.NoError(t, err)
	case datastore.MySQL:
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(raw, "mysql://"))
		require.NoError(t, err)
		conn, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		db = sql.OpenDB(conn)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testPrefix is a fresh instance id prefix, so that runs never meet.
func testPrefix() string {
	return fmt.Sprintf("dstest-%d-", time.Now().UnixNano()%1_000_000_000)
}

// TestProvisionDropOnRealServers: on PostgreSQL and MariaDB, an instance's DSN reaches its own
// database (a table is written and read), Provision is idempotent (the last DSN works),
// another instance's DSN cannot read it, and Drop leaves nothing, twice.
func TestProvisionDropOnRealServers(t *testing.T) {
	ctx := context.Background()
	for _, driver := range []datastore.Driver{datastore.Postgres, datastore.MySQL} {
		t.Run(string(driver), func(t *testing.T) {
			s := sqlServer(t, driver)
			prefix := testPrefix()
			idA, idB := prefix+"a", prefix+"b"
			t.Cleanup(func() { _ = s.Drop(ctx, idA); _ = s.Drop(ctx, idB) })

			first, err := s.Provision(ctx, idA)
			require.NoError(t, err)
			a, err := s.Provision(ctx, idA)
			require.NoError(t, err, "provisioning again is fine")
			assert.Equal(t, first.Name, a.Name)
			assert.NotContains(t, fmt.Sprint(a), strings.Split(strings.Split(a.DSN.Reveal(), ":")[2], "@")[0], "the password is not printed")
			b, err := s.Provision(ctx, idB)
			require.NoError(t, err)

			dbA := openInstance(t, a)
			_, err = dbA.ExecContext(ctx, "CREATE TABLE probe (v VARCHAR(20))")
			require.NoError(t, err, "the instance owns its database")
			_, err = dbA.ExecContext(ctx, "INSERT INTO probe VALUES ('kobe')")
			require.NoError(t, err)
			var v string
			require.NoError(t, dbA.QueryRowContext(ctx, "SELECT v FROM probe").Scan(&v))
			assert.Equal(t, "kobe", v)

			if err := openInstance(t, first).PingContext(ctx); err == nil {
				// This machine's PostgreSQL trusts every loopback login (hack/postgres.sh):
				// passwords are not checked, so an old one cannot be refused here.
				t.Logf("%s accepts the DSN of the first Provision: the server does not check passwords (trust auth)", driver)
			} else {
				t.Logf("the DSN of the first Provision no longer logs in: %v", err)
			}

			// B's credentials against A's database: refused at login (PostgreSQL: no CONNECT;
			// MySQL: no grant on it).
			crossed := b
			raw := b.DSN.Reveal()
			i := strings.LastIndex(raw, "/"+b.Name)
			crossed.DSN = datastore.NewDSN(raw[:i] + "/" + a.Name + raw[i+len(b.Name)+1:])
			err = openInstance(t, crossed).PingContext(ctx)
			require.Error(t, err, "instance B's DSN cannot open A's database")
			t.Logf("B on A's database: %v", err)
			if driver == datastore.MySQL {
				// And from its own database, B cannot read A's tables by name either.
				_, err = openInstance(t, b).ExecContext(ctx, "SELECT v FROM `"+a.Name+"`.probe")
				require.Error(t, err)
			}

			left, err := s.Leftovers(ctx, prefix)
			require.NoError(t, err)
			assert.Len(t, left, 4, "a database and a role/user each: %v", left)

			require.NoError(t, s.Drop(ctx, idA), "drop with the instance's session still open")
			require.NoError(t, s.Drop(ctx, idA), "twice is fine")
			require.NoError(t, s.Drop(ctx, idB))
			left, err = s.Leftovers(ctx, prefix)
			require.NoError(t, err)
			assert.Empty(t, left)
		})
	}
}

// TestNATSBucketPerInstance: the DSN names the instance's own bucket; what a kine writes there
// (simulated by creating the bucket as kine does) is dropped with the instance.
func TestNATSBucketPerInstance(t *testing.T) {
	ctx := context.Background()
	s := sqlServer(t, datastore.NATS)
	id := testPrefix() + "n"
	t.Cleanup(func() { _ = s.Drop(ctx, id) })
	in, err := s.Provision(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "nats://127.0.0.1:4222?bucket="+in.Name+"&noEmbed", in.DSN.Reveal())
	require.NoError(t, s.Drop(ctx, id), "nothing created yet: dropping is fine")
	left, err := s.Leftovers(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)
}

// TestUnreachableServersFailClearly: a server that does not answer is an error naming it,
// without the password.
func TestUnreachableServersFailClearly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, u := range []string{
		"postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"mysql://root:hunter2@tcp(127.0.0.1:1)/",
		"nats://user:hunter2@127.0.0.1:1",
	} {
		s, err := datastore.Parse(u)
		require.NoError(t, err)
		err = s.Ping(ctx)
		require.Error(t, err, u)
		assert.Contains(t, err.Error(), "cannot reach the "+string(s.Driver())+" datastore")
		assert.Contains(t, err.Error(), "127.0.0.1")
		assert.NotContains(t, err.Error(), "hunter2")
		_, err = s.Provision(ctx, "unreachable-1")
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "hunter2")
	}
}
