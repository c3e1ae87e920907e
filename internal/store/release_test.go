package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// TestCheckRelease, on real SQLite and PostgreSQL stores: a new store is stamped by Open and
// accepted;
// a store from before v0.1.0 (the schema of v8, without kobe_release) that holds a lease, a pool
// and a cluster is refused, naming them, until they are drained, when it is accepted and
// stamped; a stamped store is accepted with what it holds; one stamped by a release older than
// the oldest supported is refused like a store from before the stamp.
func TestCheckRelease(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := d.dsn(t)
			s, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			stamp, err := s.Release(ctx)
			require.NoError(t, err, "a store Open creates is of this release")
			assert.Equal(t, "v0.1.0", stamp.Created)
			assert.Equal(t, "v0.1.0", stamp.Release)
			require.NoError(t, store.CheckRelease(ctx, s, "v0.1.0", "v0.1.0", t0), "a new store is accepted")
			stamp, err = s.Release(ctx)
			require.NoError(t, err)
			assert.Equal(t, store.ReleaseStamp{Created: "v0.1.0", Release: "v0.1.0", OpenedAt: t0}, stamp)

			// What a kobe before v0.1.0 leaves running: a pool, its cluster, a lease.
			require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "ci", Backend: "local", Spec: []byte(`{}`)}))
			require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "ci-1", Pool: "ci", Backend: "local", Phase: api.InstanceReady}))
			l, _, err := s.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: "lease-1", Pool: "ci", Principal: "alice", TTL: time.Hour}})
			require.NoError(t, err)
			require.NoError(t, store.CheckRelease(ctx, s, "v0.1.0", "v0.1.0", t0.Add(time.Minute)), "a stamped store keeps what it holds")
			stamp, err = s.Release(ctx)
			require.NoError(t, err)
			assert.Equal(t, t0.Add(time.Minute), stamp.OpenedAt)

			// Back to the schema of a store made before v0.1.0 (migrations up to 0008).
			raw := d.rawSQL(t, dsn)
			require.NoError(t, s.Close())
			_, err = raw.Exec(`DROP TABLE kobe_release`)
			require.NoError(t, err)
			_, err = raw.Exec(`DELETE FROM schema_migrations WHERE version = 9`)
			require.NoError(t, err)

			s, err = store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			err = store.CheckRelease(ctx, s, "v0.1.0", "v0.1.0", t0)
			var old *store.OldReleaseError
			require.True(t, errors.As(err, &old), "refused: %v", err)
			assert.Equal(t, store.Live{Leases: 1, Pools: 1, Instances: 1}, old.Live)
			assert.Equal(t, "this store was last run by a kobe before v0.1.0 and still holds 1 lease (Pending or Bound), "+
				"1 pool and 1 cluster, whose workflows kobe v0.1.0 does not replay: drain it first with the kobe that ran it, "+
				"then start kobe v0.1.0 again", err.Error())
			_, err = s.Release(ctx)
			require.ErrorIs(t, err, store.ErrNotFound, "a refused store is not stamped")

			// Drained (what `kobe dev --down` does): accepted and stamped.
			l.Phase = api.LeaseReleased
			require.NoError(t, s.UpsertLease(ctx, l))
			require.NoError(t, s.DeleteInstance(ctx, "ci-1"))
			require.NoError(t, s.DeletePool(ctx, "ci"))
			require.NoError(t, store.CheckRelease(ctx, s, "v0.1.0", "v0.1.0", t0))
			stamp, err = s.Release(ctx)
			require.NoError(t, err)
			assert.Equal(t, store.ReleaseStamp{Created: "v0.1.0", Release: "v0.1.0", OpenedAt: t0}, stamp)

			// A later release whose window no longer holds v0.1.0 refuses it while it holds a pool,
			// and keeps the first release when it accepts it.
			require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "ci", Backend: "local", Spec: []byte(`{}`)}))
			err = store.CheckRelease(ctx, s, "v0.5.0", "v0.4.0", t0)
			require.True(t, errors.As(err, &old), "refused: %v", err)
			assert.Equal(t, "v0.1.0", old.Last)
			assert.Contains(t, err.Error(), "last run by kobe v0.1.0 (this kobe runs the state of v0.4.0 and later) and still holds 1 pool")
			require.NoError(t, store.CheckRelease(ctx, s, "v0.4.1", "v0.1.0", t0))
			stamp, err = s.Release(ctx)
			require.NoError(t, err)
			assert.Equal(t, store.ReleaseStamp{Created: "v0.1.0", Release: "v0.4.1", OpenedAt: t0}, stamp)
		})
	}
}

func TestCompareReleases(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"v0.1.0", "v0.1.0", 0},
		{"v0.1.0-dev", "v0.1.0", 0},
		{"v0.1.0-3-gabcdef", "v0.1.0", 0},
		{"v0.0.9", "v0.1.0", -1},
		{"v0.10.0", "v0.9.1", 1},
		{"v1.0.0", "v0.99.99", 1},
		{"dev", "v0.1.0", 0},
	} {
		assert.Equal(t, c.want, store.CompareReleases(c.a, c.b), "%s vs %s", c.a, c.b)
	}
}
