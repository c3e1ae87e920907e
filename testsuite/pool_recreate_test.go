package testsuite_test

import (
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// A pool deleted and applied again under the same name gets new members and serves leases.
// Before member ids carried the pool's incarnation, the new pool numbered its members from 1
// again; their Provision workflow ids were those of the deleted pool's members, which Temporal
// keeps for its retention period and refuses to reuse, so the new members sat in Creating.
func TestPoolCanBeRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "kobe", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	manifest := func(size string) string {
		return `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: again}
spec:
  size: ` + size + `
  ttl: 10m
  backend: {type: local}
  cluster: {version: v1.37.2}
`
	}
	start := func(size string) {
		_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("again"), TaskQueue: "kobe"},
			pool.WorkflowName, pool.Snapshot{Policy: poolPolicy(t, manifest(size))})
		require.NoError(t, err)
	}
	startLease := func(id string) {
		run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"},
			lease.WorkflowName, lease.Input{LeaseID: id, Pool: "again", Principal: "alice",
				LeaseTerms: poolspec.LeaseTerms{TTL: time.Minute, MaxTTL: time.Hour, MaxExtensions: 1}})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return leaseView(t, tmp.Client, id).Phase == api.LeaseBound },
			2*time.Minute, 50*time.Millisecond, "lease %s binds", id)
		require.NoError(t, tmp.Client.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
		var lv lease.View
		require.NoError(t, run.Get(ctx, &lv))
		assert.Equal(t, api.LeaseReleased, lv.Phase)
	}
	drain := func() {
		require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("again"), "", pool.SignalDeletePool, nil))
		require.NoError(t, tmp.Client.GetWorkflow(ctx, pool.WorkflowID("again"), "").Get(ctx, nil), "the pool drains and ends")
	}
	ready := func(n int) {
		require.Eventually(t, func() bool {
			st := poolStatus(t, tmp.Client, "again")
			return st.Ready == n && st.Creating == 0
		}, 3*time.Minute, 200*time.Millisecond, "the pool has %d Ready member(s): %+v", n, poolStatus(t, tmp.Client, "again"))
	}

	start("1")
	ready(1)
	startLease("lease-first")
	ready(1)
	drain()

	// The same name again, same spec: new members, a lease binds.
	start("1")
	ready(1)
	startLease("lease-second")
	drain()

	// And with another spec.
	start("2")
	ready(2)
	startLease("lease-third")
	drain()
	rows, err := s.ListInstances(ctx, store.InstanceFilter{Pool: "again"})
	require.NoError(t, err)
	assert.Empty(t, rows, "nothing of the three pools is left in the store")
}
