package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// A member whose teardown gave up is Quarantined: counted, visible, not blocking the pool from
// serving (it does not count against maxClusters); a retry starts a new teardown workflow (a
// new id, so the failed one does not refuse it); forgetting drops it; and deleting the pool
// finishes with quarantined members left for the operator.
func TestPoolQuarantinesAMemberWhoseTeardownGaveUp(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 1, 2, 1
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	env.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	env.OnWorkflow(instance.ProvisionWorkflowName, mock.Anything, mock.Anything).Return(instance.ProvisionResult{}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(nil)
	healthyMembers(env)
	var teardownIDs []string
	env.OnWorkflow(instance.TeardownWorkflowName, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in instance.TeardownInput) error {
			teardownIDs = append(teardownIDs, workflow.GetInfo(ctx).WorkflowExecution.ID)
			return nil
		})
	var forgotten []string
	env.RegisterActivityWithOptions(func(_ context.Context, in pool.ForgetPoolInput) (bool, error) {
		forgotten = append(forgotten, in.Name)
		return true, nil
	}, activity.RegisterOptions{Name: "ForgetUnchangedPool"})
	readyAll := func(at time.Duration) {
		env.RegisterDelayedCallback(func() {
			for _, m := range membersIn(status(t, env), pool.MemberCreating) {
				env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: m.ID, Endpoint: "https://x"})
			}
		}, at)
	}
	readyAll(time.Second)
	// Leased, released, and its teardown gives up.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalRelease, pool.ReleaseRequest{LeaseID: "lease-1", InstanceID: "p-t-1"})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberQuarantined, instance.MemberReport{InstanceID: "p-t-1", Reason: "process will not die"})
	}, 4*time.Second)
	readyAll(5 * time.Second)
	var quarantined pool.Status
	env.RegisterDelayedCallback(func() {
		quarantined = status(t, env)
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-2", At: env.Now()})
	}, 6*time.Second)
	readyAll(7 * time.Second)
	var serving pool.Status
	env.RegisterDelayedCallback(func() {
		serving = status(t, env)
		env.SignalWorkflow(pool.SignalRetryTeardown, pool.MemberAction{InstanceID: "p-t-1", Actor: "admin"})
	}, 8*time.Second)
	var retried pool.Status
	env.RegisterDelayedCallback(func() {
		retried = status(t, env)
		// The retry gave up too; the operator cleans up by hand and forgets it.
		env.SignalWorkflow(instance.SignalMemberQuarantined, instance.MemberReport{InstanceID: "p-t-1", Reason: "still"})
	}, 9*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalForgetMember, pool.MemberAction{InstanceID: "p-t-1", Actor: "admin"})
	}, 10*time.Second)
	var forgot pool.Status
	env.RegisterDelayedCallback(func() { forgot = status(t, env); env.CancelWorkflow() }, 11*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t", ContinueAsNewAfter: 1 << 20})
	_ = env.GetWorkflowError()

	assert.Equal(t, 1, quarantined.Quarantined)
	require.Len(t, membersIn(quarantined, pool.MemberQuarantined), 1)
	assert.Equal(t, "process will not die", membersIn(quarantined, pool.MemberQuarantined)[0].Reason)
	assert.Equal(t, 1, serving.Leased, "lease-2 was served although maxClusters (2) counts a quarantined member")
	assert.Equal(t, []string{"teardown-p-t-1", "teardown-p-t-1-2"}, teardownIDs[:2], "the retry is a workflow of its own")
	assert.Equal(t, 0, retried.Quarantined, "retrying: Deleting again")
	assert.Equal(t, 0, forgot.Quarantined)
	for _, m := range forgot.Members {
		assert.NotEqual(t, "p-t-1", m.ID, "forgotten")
	}
}

// A deleted pool whose only remaining member is Quarantined finishes: it never waits forever.
func TestPoolDeleteFinishesWithQuarantinedMembers(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters = 1, 1
	env, _ := poolEnv(t, pol)
	var forgotten []string
	env.RegisterActivityWithOptions(func(_ context.Context, in pool.ForgetPoolInput) (bool, error) {
		forgotten = append(forgotten, in.Name)
		return true, nil
	}, activity.RegisterOptions{Name: "ForgetUnchangedPool"})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://x"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, nil) }, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberQuarantined, instance.MemberReport{InstanceID: "p-t-1", Reason: "stuck"})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "the drained pool's workflow ends")
	assert.Equal(t, []string{"p"}, forgotten)
}
