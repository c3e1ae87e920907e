package lease_test

import (
	"context"
	"encoding/json"
	"sync"
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
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
	kobetest "github.com/kunobi-ninja/kobe/testsuite"
)

// standInLease answers a lease's sleep and wake Updates as a Bound lease does, and keeps every
// request it got (query "requests": update name → raw request), so that the test sees exactly
// what a schedule's run sent.
func standInLease(ctx workflow.Context) error {
	var mu sync.Mutex // handlers run one at a time in a workflow; the lock only documents it
	got := map[string]json.RawMessage{}
	for _, name := range []string{lease.UpdateSleep, lease.UpdateWake} {
		if err := workflow.SetUpdateHandler(ctx, name, func(ctx workflow.Context, req json.RawMessage) (lease.View, error) {
			mu.Lock()
			defer mu.Unlock()
			got[name] = req
			return lease.View{Phase: api.LeaseBound, Sleeping: name == lease.UpdateSleep}, nil
		}); err != nil {
			return err
		}
	}
	if err := workflow.SetQueryHandler(ctx, "requests", func() (map[string]json.RawMessage, error) { return got, nil }); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

// A pool's wake schedule, run for real (ScheduledSleep → ListSleepTargets → ChangeLeaseSleep →
// the lease's wake Update, on an embedded Temporal server), sends a wake that says nothing of
// its bounds, as `kobe lease wake` does: neither reads the pool's policy. The lease bounds it by
// the terms its pool granted it at admission (State.Wake): the pool's certificate minimum (an
// X509Valid gate of 45 days, above the 30-day default) and its resumeTimeout. Both of the
// schedule's requests say they come from the schedule.
func TestScheduledWakeIsBoundedByTheLeasesTerms(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Temporal server; skipped with -short")
	}
	tmp := kobetest.StartTemporal(t)
	st := kobetest.NewStore(t, "sqlite")
	kobetest.StartHostWorker(t, tmp.Client, "wakesched", st, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	m, err := poolspec.Parse([]byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: certs}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 0, maxClusters: 1, resumeTimeout: 3m}
  readinessGates: [{type: X509Valid, minRemaining: 45d}]
`))
	require.NoError(t, err)
	pol, err := m.Validate()
	require.NoError(t, err)
	spec, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, st.UpsertPool(ctx, store.Pool{Name: "certs", Backend: "local", Spec: spec}))
	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: "lease-w", Pool: "certs", Principal: "alice", Phase: api.LeaseBound}))

	w := sdkworker.New(tmp.Client, "stand-in", sdkworker.Options{})
	w.RegisterWorkflowWithOptions(standInLease, workflow.RegisterOptions{Name: "StandInLease"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: leasestart.WorkflowID("lease-w"), TaskQueue: "stand-in"}, "StandInLease")
	require.NoError(t, err)

	for _, wake := range []bool{false, true} {
		in := pool.ScheduledSleepInput{Pool: "certs", Wake: wake, ResumeTimeout: pol.ResumeTimeout}
		run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "wakesched"}, pool.ScheduledSleepWorkflowName, in)
		require.NoError(t, err)
		var res lease.ScheduledSleepResult
		require.NoError(t, run.Get(ctx, &res))
		require.Equal(t, []string{"lease-w"}, res.Changed, "wake %v: %v", wake, res.Skipped)
	}

	v, err := tmp.Client.QueryWorkflow(ctx, leasestart.WorkflowID("lease-w"), "", "requests")
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, v.Get(&got))
	var woke lease.WakeRequest
	require.NoError(t, json.Unmarshal(got[lease.UpdateWake], &woke))
	assert.Equal(t, lease.WakeRequest{Cause: lease.SleepCauseSchedule}, woke, "the schedule sends no bounds of its own")
	held := lease.NewState(lease.Input{LeaseID: "lease-w", Pool: "certs", Principal: "alice",
		LeaseTerms: pol.LeaseTerms(poolspec.LeaseAsk{Owner: "alice"})})
	bounded := held.Wake(woke)
	assert.Equal(t, 45*24*time.Hour, bounded.CertificatesMinRemaining, "the pool's X509Valid minimum, not the 30-day default")
	assert.Equal(t, 3*time.Minute, bounded.ResumeTimeout)
	for _, update := range []string{lease.UpdateSleep, lease.UpdateWake} {
		var raw map[string]any
		require.NoError(t, json.Unmarshal(got[update], &raw))
		assert.Equal(t, "schedule", raw["cause"], "the schedule's %s says it is the schedule's", update)
	}
}
