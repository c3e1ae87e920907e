package pool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
)

// The pool workflow with frozen spares, on Temporal's test environment: of 3 Ready members 1
// keeps running and 2 are frozen (BackendFreeze on their host queue); a claim gets the running
// one, then the pool thaws a spare (BackendThaw) and freezes the replacement once it is Ready.
func TestPoolFreezesItsSparesAndThawsOneAfterAClaim(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 3, 5, 3
	pol.FreezesSpares, pol.ThawedSpares = true, 1
	env, _, _, out := healthEnv(t)
	var freezes, thaws []string
	env.RegisterActivityWithOptions(func(_ context.Context, r instance.BackendRequest) error {
		freezes = append(freezes, r.Spec.ID)
		return nil
	}, activity.RegisterOptions{Name: "BackendFreeze"})
	env.RegisterActivityWithOptions(func(_ context.Context, r instance.BackendRequest) error {
		thaws = append(thaws, r.Spec.ID)
		return nil
	}, activity.RegisterOptions{Name: "BackendThaw"})
	ready := func(ids ...string) {
		for _, id := range ids {
			env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: id, Endpoint: "https://" + id,
				Placement: instance.HostAssignment{HostID: "h", TaskQueue: "host-h"}, Prepared: true})
		}
	}
	env.RegisterDelayedCallback(func() { ready("p-t-1") }, time.Second)
	env.RegisterDelayedCallback(func() { ready("p-t-2") }, 2*time.Second)
	env.RegisterDelayedCallback(func() { ready("p-t-3") }, 3*time.Second)
	var beforeClaim, afterClaim, final pool.Status
	var freezesBefore []string
	env.RegisterDelayedCallback(func() {
		beforeClaim = status(t, env)
		freezesBefore = append(freezesBefore, freezes...)
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() { afterClaim = status(t, env) }, 15*time.Second)
	env.RegisterDelayedCallback(func() { ready("p-t-4") }, 20*time.Second)
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 30*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	assert.Equal(t, 2, beforeClaim.Frozen, "2 of 3 frozen: %+v", beforeClaim.Members)
	assert.Equal(t, []string{"p-t-2", "p-t-3"}, slices.Sorted(slices.Values(freezesBefore)), "the spares beyond the one kept running")
	var assigned []string
	for _, s := range *out {
		if a, ok := s.arg.(pool.Assignment); ok {
			assigned = append(assigned, a.InstanceID)
		}
	}
	assert.Equal(t, []string{"p-t-1"}, assigned, "the claim got the running member")
	assert.Equal(t, []string{"p-t-2"}, thaws, "then the next spare in claim order was thawed")
	assert.Equal(t, 1, afterClaim.Frozen)
	assert.Equal(t, 2, final.Frozen, "the replacement, once Ready, is frozen: 1 running of 3 Ready")
	assert.Contains(t, freezes, "p-t-4")
}

// A release that arrives while the pool, about to continue as new, waits for a freeze under way
// is carried into the next run, not dropped: the run reads its signals only once nothing it
// waits for can let more in. Before, it read them first and then waited for its freezes, so a
// release (or a member's report) delivered during that wait was left unread and its member
// stayed Leased (or Creating, Deleting) for good: what TestPoolLosesNothingAcrossContinueAsNew
// saw when spares were frozen by default. And a certificate check asked for on the pass that
// continues is carried too, not started and dropped with the run.
func TestPoolLosesNoSignalWhileItWaitsForAFreezeToContinueAsNew(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters = 2, 4
	pol.FreezesSpares, pol.ThawedSpares = true, 1
	env, _, tornDown, _ := healthEnv(t)
	none := func(context.Context, instance.BackendRequest) error { return nil }
	env.RegisterActivityWithOptions(none, activity.RegisterOptions{Name: "BackendFreeze"})
	env.RegisterActivityWithOptions(none, activity.RegisterOptions{Name: "BackendThaw"})
	env.RegisterActivityWithOptions(func(context.Context, instance.CertificatesRequest) ([]instance.CertificateState, error) {
		return nil, nil
	}, activity.RegisterOptions{Name: "CheckCertificates"})
	// A freeze takes 5 s of the workflow's clock: the signals below come while it runs.
	var freezes []string
	env.OnActivity("BackendFreeze", mock.Anything, mock.Anything).Return(func(_ context.Context, r instance.BackendRequest) error {
		freezes = append(freezes, r.Spec.ID)
		return nil
	}).After(5 * time.Second)
	host := instance.HostAssignment{HostID: "h", TaskQueue: "host-h"}
	ready := func(id string) *pool.Member {
		return &pool.Member{ID: id, Phase: pool.MemberReady, Placement: host, Endpoint: "https://" + id, Prepared: true}
	}
	leased := ready("p-t-3")
	leased.Phase, leased.LeaseID = pool.MemberLeased, "lease-1"
	env.RegisterDelayedCallback(func() {
		// The history has grown long enough; the next signal wakes the pool, which continues.
		env.SetContinueAsNewSuggested(true)
		env.SignalWorkflow(pool.SignalCheckCertificates, nil)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		// The lease holding p-t-3 is done with it while the run waits for the freeze.
		env.SignalWorkflow(pool.SignalRelease, pool.ReleaseRequest{LeaseID: "lease-1", InstanceID: "p-t-3", Reason: "released"})
	}, 2*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t", Seq: 3,
		Members:  map[string]*pool.Member{"p-t-1": ready("p-t-1"), "p-t-2": ready("p-t-2"), "p-t-3": leased},
		Assigned: map[string]string{"lease-1": "p-t-3"}})

	next := continuedAsPool(t, env.GetWorkflowError())
	assert.Len(t, freezes, 1, "the spare beyond the one kept running was being frozen: %v", freezes)
	if m := next.Members["p-t-3"]; assert.NotNil(t, m) {
		assert.Equal(t, pool.MemberDeleting, m.Phase, "the release that came during the freeze was acted on")
		assert.Equal(t, pool.RecycleLeaseReleased, m.Reason)
	}
	assert.Contains(t, *tornDown, "p-t-3", "the released member's teardown was started")
	assert.Equal(t, pool.Frozen, next.Members["p-t-2"].Freeze, "the freeze's outcome is in the next run's state")
	assert.True(t, next.CertificateCheckDue, "the certificate check asked for is left to the next run")
}

// continuedAsPool returns the snapshot a pool run continued as new with.
func continuedAsPool(t *testing.T, err error) pool.Snapshot {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can, "the pool continued as new")
	var next pool.Snapshot
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}
