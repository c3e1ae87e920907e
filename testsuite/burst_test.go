package testsuite_test

import (
	"context"
	"fmt"
	"github.com/kunobi-ninja/kobe/poolspec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/testsuite"
)

// TestBurstOfLeasesOnASmallPool: 50 concurrent leases on a pool of 5 real local clusters with
// maxClusters 8. Each lease that binds is released a moment later (a CI job). Invariants, not
// timings: never more than 8 instances, every instance bound to one lease only, the queue served
// in claim order, and every lease ends Released or Failed with pool_exhausted after waiting its
// queueTimeout.
func TestBurstOfLeasesOnASmallPool(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	if raceDetector {
		// The race detector slows the in-process Temporal server and worker by an order of
		// magnitude, which turns a load test into a timeout test. `make test` runs this test in
		// a second step without -race.
		t.Skip("runs without -race: make test's second step (go test -run TestBurstOfLeasesOnASmallPool ./testsuite)")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "kobe", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: burst}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  maxConcurrentProvisions: 3
  scaling:
    minReady: 5
    maxClusters: 8
    queueTimeout: 40s
`)
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("burst"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "burst").Ready == 5 }, 4*time.Minute, 200*time.Millisecond)

	// Watch the pool's size the whole time.
	stop := make(chan struct{})
	var maxMembers int
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			// A query may time out while the pool is busy; the next one counts.
			v, err := tmp.Client.QueryWorkflow(ctx, pool.WorkflowID("burst"), "", pool.QueryPoolStatus)
			var st pool.Status
			if err == nil && v.Get(&st) == nil && len(st.Members) > maxMembers {
				maxMembers = len(st.Members)
			}
		}
	}()

	const n = 50
	views := make([]lease.View, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("lease-burst-%02d", i)
			run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"},
				lease.WorkflowName, lease.Input{LeaseID: id, Pool: "burst", Principal: "ci",
					LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour, MaxExtensions: 2}})
			if !assert.NoError(t, err) {
				return
			}
			// Release one second after binding, like a short CI job.
			for {
				v, err := tmp.Client.QueryWorkflow(ctx, id, "", lease.QueryLease)
				var lv lease.View
				if err == nil && v.Get(&lv) == nil && lv.Phase != api.LeasePending {
					if lv.Phase == api.LeaseBound {
						time.Sleep(time.Second)
						_ = tmp.Client.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil)
					}
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			assert.NoError(t, run.Get(ctx, &views[i]))
		}(i)
	}
	wg.Wait()
	close(stop)
	watch.Wait()

	bound := map[string]string{}
	var served []lease.View
	released, exhausted := 0, 0
	for _, v := range views {
		switch {
		case v.Phase == api.LeaseReleased && v.InstanceID != "":
			released++
			other, twice := bound[v.InstanceID]
			assert.False(t, twice, "instance %s bound to %s and %s", v.InstanceID, other, v.ID)
			bound[v.InstanceID] = v.ID
			served = append(served, v)
		case v.Phase == api.LeaseFailed && v.Reason == api.ReasonPoolExhausted:
			exhausted++
		default:
			t.Errorf("lease %s ended %s (%s)", v.ID, v.Phase, v.Reason)
		}
	}
	// The pool served claims in the order they were made (equal priority: oldest first).
	sort.Slice(served, func(i, j int) bool { return served[i].AssignmentSeq < served[j].AssignmentSeq })
	for i := 6; i < len(served); i++ { // the first five took warm members as their claims arrived
		assert.False(t, served[i].ClaimedAt.Before(served[i-1].ClaimedAt),
			"%s (claimed %s) served after %s (claimed %s)", served[i].ID, served[i].ClaimedAt, served[i-1].ID, served[i-1].ClaimedAt)
	}
	assert.LessOrEqual(t, maxMembers, 8, "never more than maxClusters instances")
	assert.Equal(t, n, released+exhausted)
	assert.Greater(t, released, 5)
	t.Logf("%d leases: %d bound once and released, %d failed with pool_exhausted after %s; at most %d instances at once",
		n, released, exhausted, pol.QueueTimeout, maxMembers)

	// Once the burst is over, the pool is back to its warm target.
	require.Eventually(t, func() bool {
		st := poolStatus(t, tmp.Client, "burst")
		return st.Ready == 5 && st.Leased == 0 && st.Creating == 0 && st.Deleting == 0
	}, 4*time.Minute, 200*time.Millisecond)
}
