package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

type sent struct {
	to, signal string
	arg        any
}

// poolEnv runs the Pool workflow alone: member workflows are mocked (the test reports their
// outcome by signal, as the real ones do) and signals to leases are recorded.
func poolEnv(t *testing.T, pol poolspec.Policy) (*testsuite.TestWorkflowEnvironment, *[]sent) {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	env.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	env.OnWorkflow(instance.ProvisionWorkflowName, mock.Anything, mock.Anything).Return(instance.ProvisionResult{}, nil)
	env.OnWorkflow(instance.TeardownWorkflowName, mock.Anything, mock.Anything).Return(nil)
	healthyMembers(env)
	var out []sent
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(
		func(_, to, _, signal string, arg any) error {
			out = append(out, sent{to, signal, arg})
			return nil
		})
	return env, &out
}

// healthyMembers answers every health check: all members are fine.
func healthyMembers(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(_ context.Context, req instance.HealthRequest) ([]instance.HealthResult, error) {
		out := make([]instance.HealthResult, 0, len(req.InstanceIDs))
		for _, id := range req.InstanceIDs {
			out = append(out, instance.HealthResult{InstanceID: id, Healthy: true})
		}
		return out, nil
	}, activity.RegisterOptions{Name: "CheckHealth"})
}

func status(t *testing.T, env *testsuite.TestWorkflowEnvironment) pool.Status {
	v, err := env.QueryWorkflow(pool.QueryPoolStatus)
	require.NoError(t, err)
	var st pool.Status
	require.NoError(t, v.Get(&st))
	return st
}

func creating(st pool.Status) string {
	for _, m := range st.Members {
		if m.Phase == pool.MemberCreating {
			return m.ID
		}
	}
	return ""
}

func basePolicy() poolspec.Policy {
	return poolspec.Policy{Name: "p", Backend: "local", KubernetesVersion: "v1.37.2", WarmTarget: 1, MaxClusters: 4,
		TTL: time.Hour, MaxTTL: 2 * time.Hour, MaxExtensions: 2, MaxConcurrentProvisions: 1,
		ScaleDownAfter: 5 * time.Minute, QueueTimeout: 5 * time.Minute, CreatingTimeout: 10 * time.Minute,
		BackoffBase: 5 * time.Second, BackoffMultiplier: 2, BackoffMax: 30 * time.Second}
}

// A broken backend: every provision fails; the wait between attempts doubles up to the cap and
// the pool reports Backoff, then Failing; one success resets it to Healthy.
func TestPoolBackoffGrowsToCapThenRecovers(t *testing.T) {
	env, _ := poolEnv(t, basePolicy())
	var waits []time.Duration
	var phases []api.PoolPhase
	failures := 0
	for i := 1; i <= 300; i++ {
		env.RegisterDelayedCallback(func() {
			st := status(t, env)
			id := creating(st)
			if id == "" {
				return
			}
			phases = append(phases, st.Phase)
			if failures < 6 {
				failures++
				env.SignalWorkflow(instance.SignalMemberFail, instance.MemberReport{InstanceID: id, Reason: "apiserver crashed"})
				env.RegisterDelayedCallback(func() {
					st := status(t, env)
					waits = append(waits, st.NextAttemptAt.Sub(env.Now()).Round(time.Second))
					phases = append(phases, st.Phase)
				}, time.Millisecond)
				return
			}
			env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: id, Endpoint: "https://x"})
		}, time.Duration(i)*time.Second)
	}
	var final pool.Status
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 301*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: basePolicy(), Incarnation: "t"})

	// Each wait is measured 1 ms after the failure.
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	require.Len(t, waits, 6)
	assert.Equal(t, want, waits, "base 5s ×2, capped at 30s")
	assert.Contains(t, phases, api.PoolBackoff)
	assert.Contains(t, phases, api.PoolFailing)
	assert.Equal(t, 0, final.ConsecutiveFailures, "a success resets the count")
	assert.Equal(t, api.PoolHealthy, final.Phase)
	assert.Equal(t, 1, final.Ready)
	assert.Empty(t, final.LastFailureReason)
}

// Claims are served by priority, then age; the one that waits past queueTimeout fails with
// pool_exhausted; maxClusters is never exceeded; an instance is assigned once.
func TestPoolClaimQueue(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 0, 2, 2
	env, out := poolEnv(t, pol)
	claim := func(lease string, prio int, at time.Duration) {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: lease, Priority: prio, At: env.Now()})
		}, at)
	}
	claim("lease-a", 0, time.Second)
	claim("lease-b", 5, 2*time.Second)
	claim("lease-c", 0, 3*time.Second)
	var queued pool.Status
	env.RegisterDelayedCallback(func() { queued = status(t, env) }, 4*time.Second)
	// Members come up one by one.
	for i, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
		id := []string{"p-t-1", "p-t-2"}[i]
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: id, Endpoint: "https://" + id})
		}, at)
	}
	var final pool.Status
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 10*time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	assert.Equal(t, []string{"lease-b", "lease-a", "lease-c"}, queued.Queue, "priority first, then age")
	assert.Equal(t, 2, queued.Creating, "capacity for the waiting claims, within maxClusters")
	assigned := map[string]string{}
	var failed []string
	for _, s := range *out {
		switch s.signal {
		case pool.SignalAssigned:
			a := s.arg.(pool.Assignment)
			_, twice := assigned[a.InstanceID]
			assert.False(t, twice, "instance %s assigned twice", a.InstanceID)
			assigned[a.InstanceID] = s.to
		case pool.SignalClaimFailed:
			failed = append(failed, s.to)
			assert.Equal(t, string(api.ReasonPoolExhausted), s.arg.(pool.ClaimFailure).Reason)
		}
	}
	assert.Equal(t, map[string]string{"p-t-1": "lease-b", "p-t-2": "lease-a"}, assigned)
	assert.Equal(t, []string{"lease-c"}, failed)
	assert.Equal(t, 2, final.Leased)
	assert.LessOrEqual(t, len(final.Members), pol.MaxClusters)
	assert.Empty(t, final.Queue)
}

// poolEnvRecordingTeardowns is a pool whose provisions succeed at once and whose teardowns
// record the instance they were given.
func poolEnvRecordingTeardowns() (*testsuite.TestWorkflowEnvironment, *[]string) {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	env.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	env.OnWorkflow(instance.ProvisionWorkflowName, mock.Anything, mock.Anything).Return(instance.ProvisionResult{}, nil)
	healthyMembers(env)
	var tornDown []string
	env.OnWorkflow(instance.TeardownWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in instance.TeardownInput) error {
			tornDown = append(tornDown, in.Spec.ID)
			return nil
		})
	return env, &tornDown
}

// An assignment the lease can no longer take (it ended) is torn down, never handed to another.
func TestPoolTearsDownAnAssignmentNobodyTook(t *testing.T) {
	pol := basePolicy()
	env, tornDown := poolEnvRecordingTeardowns()
	env.OnSignalExternalWorkflow(mock.Anything, "lease-gone", "", mock.Anything, mock.Anything).Return(errors.New("workflow not found"))
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://x"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-gone", At: env.Now()})
	}, 2*time.Second)
	var st pool.Status
	env.RegisterDelayedCallback(func() { st = status(t, env); env.CancelWorkflow() }, time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	assert.Equal(t, []string{"p-t-1"}, *tornDown)
	assert.Equal(t, 0, st.Ready, "p-1 was not put back for another lease")
}

// A lease released while Pending may end before its assignment reaches it: its cancel-claim
// then arrives after the pool assigned it a member. That member must be torn down, not stay
// Leased to a finished lease forever (the soak found such an instance outliving its pool).
func TestPoolTearsDownTheMemberOfACancelledClaim(t *testing.T) {
	pol := basePolicy()
	env, tornDown := poolEnvRecordingTeardowns()
	// The assignment signal is delivered: the lease was still running when it arrived.
	env.OnSignalExternalWorkflow(mock.Anything, "lease-1", "", mock.Anything, mock.Anything).Return(nil)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://x"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 2*time.Second)
	var leased pool.Status
	env.RegisterDelayedCallback(func() {
		leased = status(t, env)
		// …but the lease had been released meanwhile, and ends without reading it.
		env.SignalWorkflow(pool.SignalCancelClaim, "lease-1")
	}, 3*time.Second)
	var st pool.Status
	env.RegisterDelayedCallback(func() { st = status(t, env); env.CancelWorkflow() }, time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	assert.Equal(t, 1, leased.Leased, "p-1 was assigned to lease-1")
	assert.Equal(t, []string{"p-t-1"}, *tornDown, "the cancelled claim's member is torn down")
	assert.Equal(t, 0, st.Leased, "nothing stays leased to a finished lease")
}
