package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/internal/store"
	kobetest "github.com/kunobi-ninja/kobe/testsuite/dbtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The store projections of the workflows record a change and its audit event together: while
// the audit log refuses inserts (a trigger in the database), each activity fails and changes no
// row; retried once the log is back, each writes its event exactly once — also when the retry
// repeats an attempt that had succeeded (its answer lost).
func TestProjectionsAuditOrNothing(t *testing.T) {
	for name, dsn := range kobetest.StoreDSNs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := dsn(t)
			s, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			a := &worker.Activities{Store: s}
			events := func(action, target string) int {
				evs, err := s.ListEvents(ctx, store.EventFilter{Action: action, Target: target})
				require.NoError(t, err)
				return len(evs)
			}
			require.NoError(t, s.UpsertLease(ctx, store.Lease{ID: "lease-1", Pool: "dev", Principal: "ann", Phase: "Pending", TTL: time.Hour}))
			require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "old", Backend: "local"}))
			require.NoError(t, s.UpsertInstance(ctx, store.Instance{ID: "dev-1", Pool: "dev", Backend: "local", Phase: "Creating"}))
			bound := lease.View{ID: "lease-1", Pool: "dev", Principal: "ann", Phase: "Bound", InstanceID: "dev-1",
				TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}
			ready := instance.Record{ID: "dev-1", Pool: "dev", Backend: "local", Phase: "Ready"}

			restore := kobetest.BreakAudit(t, dsn)
			assert.ErrorContains(t, a.Lease().RecordLease(ctx, bound), kobetest.AuditDownMessage)
			assert.ErrorContains(t, a.Instance().RecordInstance(ctx, ready), kobetest.AuditDownMessage)
			assert.ErrorContains(t, a.Pool().ForgetPool(ctx, "old"), kobetest.AuditDownMessage)
			l, err := s.GetLease(ctx, "lease-1")
			require.NoError(t, err)
			assert.Equal(t, api.LeasePending, l.Phase, "a lease transition whose audit event failed is not recorded")
			in, err := s.GetInstance(ctx, "dev-1")
			require.NoError(t, err)
			assert.Equal(t, api.InstanceCreating, in.Phase, "an instance transition whose audit event failed is not recorded")
			_, err = s.GetPool(ctx, "old")
			assert.NoError(t, err, "a pool whose deletion could not be audited is still there")
			restore()

			// The activities' retries.
			require.NoError(t, a.Lease().RecordLease(ctx, bound))
			require.NoError(t, a.Instance().RecordInstance(ctx, ready))
			require.NoError(t, a.Pool().ForgetPool(ctx, "old"))
			// And retries of attempts that succeeded.
			require.NoError(t, a.Lease().RecordLease(ctx, bound))
			require.NoError(t, a.Pool().ForgetPool(ctx, "old"))
			l, err = s.GetLease(ctx, "lease-1")
			require.NoError(t, err)
			assert.Equal(t, api.LeaseBound, l.Phase)
			assert.Equal(t, 1, events("lease.bound", "lease-1"), "lease.bound events")
			assert.Equal(t, 1, events("instance.Ready", "dev-1"), "instance.Ready events")
			assert.Equal(t, 1, events("pool.deleted", "old"), "pool.deleted events")
		})
	}
}
