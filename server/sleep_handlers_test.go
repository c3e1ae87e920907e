package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
)

// Only a Bound lease sleeps or wakes: an ended one is refused with not_ready (and nothing is
// sent to a workflow); another principal's lease is not found.
func TestLeaseSleepRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ci-a")
	tok := e.token("alice", "ci", time.Time{})
	require.NoError(t, e.st.UpsertLease(ctx, store.Lease{ID: "lease-s1", Pool: "ci-a", Principal: "alice", Role: "ci", Phase: api.LeaseReleased, TTL: time.Hour}))
	for _, verb := range []string{"sleep", "wake"} {
		status, raw := e.do(tok, "POST", "/v1/leases/lease-s1/"+verb, "")
		assert.Equal(t, 409, status, "%s: %s", verb, raw)
		assert.Equal(t, string(api.ReasonNotReady), e.reason(raw))
		status, _ = e.do(e.token("bob-"+verb, "ci", time.Time{}), "POST", "/v1/leases/lease-s1/"+verb, "")
		assert.Equal(t, 404, status, "someone else's lease")
	}
}

// sleepyLease is a lease workflow stub whose view is Bound and whose sleep update puts it to
// sleep: what a real lease does once it holds its member.
func sleepyLease(ctx workflow.Context, v lease.View) error {
	if err := workflow.SetQueryHandler(ctx, lease.QueryLease, func() (lease.View, error) { return v, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, lease.UpdateSleep, func(ctx workflow.Context, _ lease.SleepRequest) (lease.View, error) {
		v.Sleeping = true
		return v, nil
	}); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

// Issue 39, item 13 (the soak): right after a bind the store's row may still say Pending (its
// projection lags the workflow) while GET answers the workflow's Bound. A sleep then is the
// workflow's to decide, not refused not_ready from the stale row.
func TestLeaseSleepRightAfterABindFollowsTheWorkflow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ci-a")
	tok := e.token("alice", "ci", time.Time{})
	require.NoError(t, e.st.UpsertLease(ctx, store.Lease{ID: "lease-s2", Pool: "ci-a", Principal: "alice", Role: "ci", Phase: api.LeasePending, TTL: time.Hour}))
	const queue = "api-test-sleepy"
	w := sdkworker.New(e.tc.Client, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(sleepyLease, workflow.RegisterOptions{Name: lease.WorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	_, err := e.tc.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: leasestart.WorkflowID("lease-s2"), TaskQueue: queue},
		lease.WorkflowName, lease.View{ID: "lease-s2", Pool: "ci-a", Phase: api.LeaseBound, InstanceID: "ci-a-1"})
	require.NoError(t, err)
	status, raw := e.do(tok, "POST", "/v1/leases/lease-s2/sleep", "")
	require.Equal(t, 200, status, "%s", raw)
	var l api.Lease
	require.NoError(t, json.Unmarshal(raw, &l))
	assert.True(t, l.Sleeping, "%s", raw)
}
