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
	r := lease.Record{ID: "lease-e", Pool: "dev", Principal: "alice", Phase: api.LeasePending, TTL: time.Hour}
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
