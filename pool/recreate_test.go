package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
)

// A pool applied again while its drained workflow is forgetting it lives on: the apply lands
// after the drain decided to end (the store row was deleted, then recorded again by the
// apply). Before, the workflow ended with the apply unread: the pool's row existed with no
// workflow to serve it.
func TestPoolAppliedAgainWhileForgettingLivesOn(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget = 0
	env, _ := poolEnv(t, pol)
	forgets := 0
	env.RegisterActivityWithOptions(func(_ context.Context, _ pool.ForgetPoolInput) (bool, error) {
		forgets++
		if forgets == 1 {
			env.SignalWorkflow(pool.SignalApply, pol) // what the API does meanwhile
		}
		return true, nil
	}, activity.RegisterOptions{Name: "ForgetUnchangedPool"})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, pool.Deletion{Generation: 1}) }, time.Second)
	var between pool.Status
	env.RegisterDelayedCallback(func() { between = status(t, env) }, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, pool.Deletion{Generation: 2}) }, 2*time.Hour)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Hour)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "the second delete drains and ends the pool")
	assert.Equal(t, 2, forgets, "the first forget was followed by an apply: the pool lived on until the second delete")
	assert.NotEqual(t, api.PoolDraining, between.Phase, "between the deletes the pool serves")
}

// A claim that arrives while the drained pool is being forgotten is refused with
// pool_deleted. Before, the workflow ended with it unread and its lease waited for an answer
// that could not come.
func TestPoolForgettingRefusesALateClaim(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget = 0
	env, sent := poolEnv(t, pol)
	env.RegisterActivityWithOptions(func(_ context.Context, _ pool.ForgetPoolInput) (bool, error) {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-late", At: env.Now()})
		return true, nil
	}, activity.RegisterOptions{Name: "ForgetUnchangedPool"})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, pool.Deletion{Generation: 1}) }, time.Second)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Hour)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var refused []string
	for _, s := range *sent {
		if s.signal == pool.SignalClaimFailed {
			refused = append(refused, s.to)
			assert.Equal(t, pool.RecyclePoolDeleted, s.arg.(pool.ClaimFailure).Reason)
		}
	}
	assert.Equal(t, []string{"lease-late"}, refused, "refused, not lost")
}

// The store kept the pool because an apply recorded it after the delete: the workflow does not
// end even if the apply's signal has not come yet (it comes next, or the API retries it).
func TestPoolKeptByTheStoreIsNotForgotten(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget = 0
	env, _ := poolEnv(t, pol)
	var generations []int64
	env.RegisterActivityWithOptions(func(_ context.Context, in pool.ForgetPoolInput) (bool, error) {
		generations = append(generations, in.Generation)
		return len(generations) > 1, nil // the first time the row had been applied since
	}, activity.RegisterOptions{Name: "ForgetUnchangedPool"})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, pool.Deletion{Generation: 3}) }, time.Second)
	var between pool.Status
	env.RegisterDelayedCallback(func() { between = status(t, env) }, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, pool.Deletion{Generation: 4}) }, 2*time.Hour)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Hour)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []int64{3, 4}, generations, "each forget names the generation its delete saw")
	assert.NotEqual(t, api.PoolDraining, between.Phase)
}
