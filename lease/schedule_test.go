package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
	"github.com/kunobi-ninja/kobe/worker"
)

// ScheduledSleep in the test environment, with the real ListSleepTargets on a real (in-memory)
// store: only the pool's Bound leases are acted on, the excluded ones (owner, alias, metadata)
// are left alone, and a lease whose change was refused is reported as skipped with its reason.
// ChangeLeaseSleep, which sends the lease's Update through a Temporal client, is played by the
// test here; TestScheduledSleepAndWakeOfAPool runs it for real.
func TestScheduledSleepActsOnTheBoundLeasesNotExcluded(t *testing.T) {
	st := workflowtest.MemoryStore(t)
	ctx := context.Background()
	for _, l := range []store.Lease{
		{ID: "lease-a", Pool: "p", Principal: "alice", Phase: api.LeaseBound},
		{ID: "lease-ci", Pool: "p", Principal: "ci-bot", Phase: api.LeaseBound},
		{ID: "lease-demo", Pool: "p", Principal: "bob", Alias: "demo-1", Metadata: map[string]string{"keep": "awake"}, Phase: api.LeaseBound},
		{ID: "lease-demo2", Pool: "p", Principal: "bob", Alias: "demo-2", Phase: api.LeaseBound},
		{ID: "lease-pending", Pool: "p", Principal: "alice", Phase: api.LeasePending},
		{ID: "lease-other", Pool: "q", Principal: "alice", Phase: api.LeaseBound},
	} {
		require.NoError(t, st.UpsertLease(ctx, l))
	}
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(lease.ScheduledSleep, workflow.RegisterOptions{Name: pool.ScheduledSleepWorkflowName})
	acts := worker.NewActivities(st, zap.NewNop())
	env.RegisterActivity(acts.Lease().ListSleepTargets)
	// The workflow runs the changes at once: the test's activity records them under a lock.
	var mu sync.Mutex
	var asked []lease.LeaseSleepChange
	env.RegisterActivityWithOptions(func(_ context.Context, c lease.LeaseSleepChange) (string, error) {
		mu.Lock()
		asked = append(asked, c)
		mu.Unlock()
		if c.LeaseID == "lease-demo2" {
			return string(api.ReasonNotReady), nil
		}
		return "ok", nil
	}, activity.RegisterOptions{Name: "ChangeLeaseSleep"})
	env.ExecuteWorkflow(pool.ScheduledSleepWorkflowName, pool.ScheduledSleepInput{Pool: "p", Wake: true, ResumeTimeout: 2 * time.Minute,
		Exclude: []poolspec.SleepExclusion{{Owner: "ci-*"}, {Alias: "demo-*", Metadata: map[string]string{"keep": "awake"}}}})
	require.NoError(t, env.GetWorkflowError())
	var res lease.ScheduledSleepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.ElementsMatch(t, []string{"lease-a"}, res.Changed)
	assert.ElementsMatch(t, []string{"lease-ci", "lease-demo"}, res.Excluded)
	assert.Equal(t, map[string]string{"lease-demo2": "not_ready"}, res.Skipped)
	require.Len(t, asked, 2)
	for _, c := range asked {
		assert.True(t, c.Wake)
		assert.Equal(t, 2*time.Minute, c.ResumeTimeout)
		assert.Contains(t, c.Actor, "kobe:schedule:")
	}
}
