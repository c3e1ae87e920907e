package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
)

// Recording a phase on a lease that has ended is refused, and the refusal is not retried (the
// store activity's retry policy has no end: a retryable error would spin for ever); the row
// keeps its end. Recording the same end again (a retry of that record) is fine.
func TestRecordLeaseOnAnEndedLeaseIsNotRetried(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	a := &lease.Activities{Store: st}
	r := lease.View{ID: "lease-e", Pool: "dev", Principal: "alice", Phase: api.LeasePending, TTL: time.Hour}
	require.NoError(t, a.RecordLease(ctx, r))
	r.Phase = api.LeaseExpired
	require.NoError(t, a.RecordLease(ctx, r))
	require.NoError(t, a.RecordLease(ctx, r), "the same end again")

	r.Phase, r.InstanceID = api.LeaseBound, "inst-1"
	err = a.RecordLease(ctx, r)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "an application error: %v", err)
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, lease.ErrLeaseEnded, appErr.Type())
	assert.ErrorIs(t, err, store.ErrLeaseEnded)

	got, err := st.GetLease(ctx, "lease-e")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseExpired, got.Phase)
	events, err := st.ListEvents(ctx, store.EventFilter{Target: "lease-e"})
	require.NoError(t, err)
	for _, e := range events {
		assert.NotEqual(t, "lease.bound", e.Action, "no event of a refused transition")
	}
}

// A lease the orphan reaper failed whose workflow starts after all (an API that stalled past
// the grace, a pool's Update delivered late) cannot bind, and its own failure does not
// rewrite why it ended: the row stays Failed with reason orphaned, its end audited once.
func TestAnOrphanedLeaseKeepsItsEnd(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, _, err = st.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: "lease-late", Pool: "dev", Principal: "alice", TTL: time.Hour}})
	require.NoError(t, err)
	failed, err := st.FailPendingLease(ctx, "lease-late", api.ReasonOrphaned)
	require.NoError(t, err)
	require.True(t, failed)

	a := &lease.Activities{Store: st}
	r := lease.View{ID: "lease-late", Pool: "dev", Principal: "alice", Phase: api.LeasePending, TTL: time.Hour}
	require.ErrorIs(t, a.RecordLease(ctx, r), store.ErrLeaseEnded, "its Pending row is not written back")
	r.Phase, r.InstanceID = api.LeaseBound, "inst-1"
	require.ErrorIs(t, a.RecordLease(ctx, r), store.ErrLeaseEnded, "nor bound")
	_, err = st.AddLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-late", Sealed: []byte("x"), ExpiresAt: time.Now().Add(time.Hour)})
	require.ErrorIs(t, err, store.ErrLeaseEnded, "nor given a credential")
	// The workflow's failure path records Failed with its own reason.
	r.Phase, r.Reason = api.LeaseFailed, api.ReasonBackendError
	require.NoError(t, a.RecordLease(ctx, r))

	got, err := st.GetLease(ctx, "lease-late")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseFailed, got.Phase)
	assert.Equal(t, api.ReasonOrphaned, got.Reason, "the end first recorded stands")
	assert.Empty(t, got.InstanceID)
}
