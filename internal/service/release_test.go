package service_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/service"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
)

// preBaselineStore makes the store at dsn look as a kobe before v0.1.0 leaves it: the schema of
// migrations 1 to 8 (no kobe_release), holding a pool and a Pending lease of it. It returns the
// lease, for draining it.
func preBaselineStore(t *testing.T, dsn string) store.Lease {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "ci", Backend: "local", Spec: []byte(`{}`)}))
	l, _, err := s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: "lease-old", Pool: "ci", Principal: "alice", TTL: time.Hour}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	raw := dbtest.RawStoreSQL(t, dsn)
	for _, q := range []string{`DROP TABLE kobe_release`, `DELETE FROM schema_migrations WHERE version = 9`} {
		_, err := raw.Exec(q)
		require.NoError(t, err)
	}
	require.NoError(t, raw.Close())
	return l
}

// drain ends the lease and deletes the pool, as `kobe dev --down` (or a server's drain) of the
// kobe that made them does.
func drain(t *testing.T, dsn string, l store.Lease) {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	l.Phase = api.LeaseReleased
	require.NoError(t, s.UpsertLease(ctx, l))
	require.NoError(t, s.DeletePool(ctx, "ci"))
}

// TestStartRefusesStateFromBeforeTheBaseline: `kobe dev` on a state dir from before v0.1.0 that
// still holds a lease and a pool is refused at once, saying to drain it with `kobe dev --down`,
// and starts nothing; drained, it starts and stamps the state dir and its store with v0.1.0. A
// server or worker on such a PostgreSQL store is refused the same way, naming the server drain.
func TestStartRefusesStateFromBeforeTheBaseline(t *testing.T) {
	ctx := context.Background()
	t.Run("dev state dir", func(t *testing.T) {
		dir := t.TempDir()
		dsn := "sqlite://" + filepath.Join(dir, "kobe.db")
		l := preBaselineStore(t, dsn)
		c := devConfig(t)
		c.Ephemeral, c.StateDir, c.UIPort = false, dir, 0
		c.APIAddress = fmt.Sprintf("127.0.0.1:%d", freePort(t))

		t0 := time.Now()
		_, err := service.Start(ctx, c, config.ModeDev, zap.NewNop())
		require.Error(t, err)
		assert.Equal(t, "the state dir "+dir+" was last run by a kobe before v0.1.0 and still holds 1 lease (Pending or Bound) "+
			"and 1 pool, whose workflows kobe v0.1.0 does not replay: drain it first with the kobe that ran it "+
			"(`kobe dev --down --state-dir "+dir+"`), then start kobe v0.1.0 again", err.Error())
		assert.Less(t, time.Since(t0), 10*time.Second, "refused before anything heavy starts")
		_, err = os.Stat(filepath.Join(dir, "temporal.db"))
		assert.True(t, os.IsNotExist(err), "no Temporal was started on it")
		assert.Empty(t, service.StateDirRelease(dir), "a refused state dir is not stamped")
		ln, err := net.Listen("tcp", c.APIAddress)
		require.NoError(t, err, "the API port was released")
		require.NoError(t, ln.Close())

		drain(t, dsn, l)
		p := start(t, c, config.ModeDev)
		assert.Equal(t, "v0.1.0", service.StateDirRelease(dir))
		stamp, err := p.Store.Release(ctx)
		require.NoError(t, err)
		assert.Equal(t, "v0.1.0", stamp.Release)
	})

	t.Run("server and worker store", func(t *testing.T) {
		dsn := testsuite.PostgresDSN(t)
		preBaselineStore(t, dsn)
		c := config.Default()
		c.Store = dsn
		c.Temporal.Address = fmt.Sprintf("127.0.0.1:%d", freePort(t)) // never dialled
		c.APIAddress, c.MetricsAddress = "127.0.0.1:0", "127.0.0.1:0"
		// Its schema lacks 0009 (kobe_release): a server and a worker ask for `kobe migrate up`
		// first, and once it is run refuse the state it holds.
		for _, mode := range []config.Mode{config.ModeServer, config.ModeWorker} {
			_, err := service.Start(ctx, c, mode, zap.NewNop())
			require.Error(t, err, mode)
			assert.Contains(t, err.Error(), "0009_release.sql pending): run `kobe migrate up --store "+store.RedactDSN(dsn)+"` first", mode)
		}
		migrated(t, dsn)
		for _, mode := range []config.Mode{config.ModeServer, config.ModeWorker} {
			_, err := service.Start(ctx, c, mode, zap.NewNop())
			require.Error(t, err, mode)
			assert.Contains(t, err.Error(), "the store "+store.RedactDSN(dsn)+" was last run by a kobe before v0.1.0 and still holds "+
				"1 lease (Pending or Bound) and 1 pool, whose workflows kobe v0.1.0 does not replay: drain it first with the kobe that ran it ("+
				service.ServerDrain+"), then start kobe v0.1.0 again", mode)
		}
	})
}
