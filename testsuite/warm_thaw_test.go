package testsuite_test

import (
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// The review's item 1 on a real Temporal server with the real Pool and Lease workflows: every
// spare is frozen, a warm bind's Update takes one and thaws it, the thaw hangs (its host's
// worker is gone); the API stops waiting and starts the lease the slow way, whose claim reaches
// the pool while the thaw runs; then the thaw fails. The lease must be bound by the other
// member. Before the fix the pool took the slow path's claim for a retry and dropped it, and
// the failed thaw's teardown panicked the pool's workflow task (a wait on the run's context
// from the Update handler): the lease stayed Pending in no queue.
func TestALeaseWhoseWarmBindThawFailedIsBoundByTheNextMember(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Temporal server; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	c, name := tmp.Client, "thaw-fails"
	hostGone := make(chan struct{})
	var thaws atomic.Int32
	memberWorkerWith(t, c, name, memberOptions{prepared: true, thaw: func(ctx context.Context, _ instance.BackendRequest) error {
		if thaws.Add(1) > 1 {
			return nil
		}
		select {
		case <-hostGone:
		case <-ctx.Done():
			return ctx.Err()
		}
		return temporal.NewNonRetryableApplicationError("the member's host worker is gone", "HostGone", nil)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: thaw-fails}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 2, maxClusters: 4, thawedSpares: 0}
`)
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID(name), TaskQueue: name},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := poolStatus(t, c, name)
		frozen := 0
		for _, m := range st.Members {
			if m.Phase == pool.MemberReady && m.Freeze == pool.Frozen {
				frozen++
			}
		}
		return frozen == 2
	}, time.Minute, 50*time.Millisecond, "2 Ready, both frozen (their freezes done)")

	// The API's warm bind: an Update it stops waiting for (warmBindFor, shortened).
	in := lease.Input{LeaseID: "lease-1", Pool: name, Principal: "p", LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: time.Hour}}
	uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
	h, err := c.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{WorkflowID: pool.WorkflowID(name), UpdateID: in.LeaseID,
		UpdateName: pool.UpdateClaim, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{pool.BindRequest{Claim: pool.ClaimRequest{LeaseID: in.LeaseID, At: time.Now()}, Lease: in}}})
	var res pool.BindResult
	if err == nil {
		err = h.Get(uctx, &res)
	}
	ucancel()
	require.Error(t, err, "the Update waits for the thaw, which hangs (answered %+v; pool %+v)", res, poolStatus(t, c, name).Members)
	require.EqualValues(t, 1, thaws.Load(), "the warm bind is thawing a frozen member")

	// The API's slow path: the lease's own workflow, which claims by signal.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.LeaseID, TaskQueue: name}, lease.WorkflowName, in)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return signalled(t, ctx, c, in.LeaseID, run.GetRunID()) }, time.Minute,
		50*time.Millisecond, "the lease's claim reached the pool")
	time.Sleep(time.Second) // and the pool's next task has read it
	close(hostGone)

	var lv lease.View
	require.Eventually(t, func() bool {
		lv = leaseView(t, c, in.LeaseID)
		return lv.Phase == api.LeaseBound
	}, time.Minute, 100*time.Millisecond, "the lease is bound by the other member (last seen: %+v)", lv)
	assert.EqualValues(t, 2, thaws.Load(), "the other member was thawed for the queued claim")
	st := poolStatus(t, c, name)
	assert.Equal(t, 1, st.Leased, "%+v", st.Members)
	require.NoError(t, c.SignalWorkflow(ctx, in.LeaseID, "", lease.SignalReleaseLease, nil))
	require.NoError(t, run.Get(ctx, nil))
}

// signalled: the lease's run has signalled a workflow (its claim to the pool).
func signalled(t *testing.T, ctx context.Context, c client.Client, id, runID string) bool {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Logf("history of %s: %v", id, err)
			return false
		}
		if e.GetEventType() == enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED {
			return true
		}
	}
	return false
}
