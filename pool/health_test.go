package pool_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
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

// brokenSet is the members a fake health check reports broken.
type brokenSet struct {
	mu     sync.Mutex
	broken map[string]bool
	// sync is what a healthy member's check says of its sync errors (nil: nothing).
	sync   map[string]*instance.SyncState
	checks int
}

func (b *brokenSet) setSync(id string, st *instance.SyncState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sync == nil {
		b.sync = map[string]*instance.SyncState{}
	}
	b.sync[id] = st
}

func (b *brokenSet) set(id string, broken bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.broken[id] = broken
}

// count is how many checks ran so far. A check cancelled with the workflow may still be running
// in the test environment's goroutine when ExecuteWorkflow returns, so it is read under the lock.
func (b *brokenSet) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checks
}

func (b *brokenSet) check(_ context.Context, req instance.HealthRequest) ([]instance.HealthResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checks++
	var out []instance.HealthResult
	for _, id := range req.InstanceIDs {
		r := instance.HealthResult{InstanceID: id, Healthy: !b.broken[id]}
		if !r.Healthy {
			r.Message = "kube-apiserver is not running"
		} else {
			r.Sync = b.sync[id]
		}
		out = append(out, r)
	}
	return out, nil
}

// healthEnv is a pool whose provisions succeed at once, whose teardowns are recorded with their
// reason, and whose health checks answer from a brokenSet.
func healthEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *brokenSet, *[]string, *[]sent) {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	env.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	env.OnWorkflow(instance.ProvisionWorkflowName, mock.Anything, mock.Anything).Return(instance.ProvisionResult{}, nil)
	var tornDown []string
	env.OnWorkflow(instance.TeardownWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in instance.TeardownInput) error {
			tornDown = append(tornDown, in.Spec.ID)
			return nil
		})
	b := &brokenSet{broken: map[string]bool{}}
	env.RegisterActivityWithOptions(b.check, activity.RegisterOptions{Name: "CheckHealth"})
	env.RegisterActivityWithOptions(func(context.Context, instance.Record) error { return nil },
		activity.RegisterOptions{Name: "RecordInstance"})
	var out []sent
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(
		func(_, to, _, signal string, arg any) error {
			out = append(out, sent{to, signal, arg})
			return nil
		})
	return env, b, &tornDown, &out
}

// A Ready member that fails failureThreshold health checks in a row is recycled with reason
// health_failed and replaced; from its first failure it is not handed to a claim, and the pool
// counts it unhealthy.
func TestPoolRecyclesAReadyMemberThatFailsHealthChecks(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 1, 3, 1
	pol.HealthCheckInterval, pol.HealthFailureThreshold = 10*time.Second, 3
	env, broken, tornDown, out := healthEnv(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://1"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { broken.set("p-t-1", true) }, 5*time.Second)
	var afterFirst pool.Status
	env.RegisterDelayedCallback(func() {
		afterFirst = status(t, env)
		// A claim now must not get the member known to be broken.
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 12*time.Second)
	var queued pool.Status
	env.RegisterDelayedCallback(func() { queued = status(t, env) }, 13*time.Second)
	for at := 15 * time.Second; at < 2*time.Minute; at += 5 * time.Second {
		env.RegisterDelayedCallback(func() {
			for _, m := range membersIn(status(t, env), pool.MemberCreating) {
				env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: m.ID, Endpoint: "https://" + m.ID})
			}
		}, at)
	}
	var final pool.Status
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 2*time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	assert.Equal(t, 1, afterFirst.Unhealthy, "one failed check: counted unhealthy")
	assert.Equal(t, 1, afterFirst.Creating, "a replacement starts at the first failure")
	assert.Equal(t, 1, queued.QueueDepth, "the claim waits rather than get the broken member")
	assert.Equal(t, []string{"p-t-1"}, *tornDown, "recycled after failureThreshold checks")
	var assigned []string
	for _, s := range *out {
		if a, ok := s.arg.(pool.Assignment); ok {
			assigned = append(assigned, a.InstanceID)
		}
	}
	assert.Equal(t, []string{"p-t-2"}, assigned, "the claim got the replacement")
	assert.Equal(t, 0, final.Unhealthy)
	require.Len(t, membersIn(final, pool.MemberReady), 1, "the warm target holds")
	assert.GreaterOrEqual(t, broken.count(), 3)
}

// A member that recovers before the threshold is kept: failures must come in a row.
func TestPoolKeepsAMemberThatRecovers(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters = 1, 1
	pol.HealthCheckInterval, pol.HealthFailureThreshold = 10*time.Second, 3
	env, broken, tornDown, _ := healthEnv(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://1"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { broken.set("p-t-1", true) }, 5*time.Second)
	env.RegisterDelayedCallback(func() { broken.set("p-t-1", false) }, 25*time.Second)
	env.RegisterDelayedCallback(func() { broken.set("p-t-1", true) }, 35*time.Second)
	env.RegisterDelayedCallback(func() { broken.set("p-t-1", false) }, 55*time.Second)
	var final pool.Status
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 2*time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	assert.Empty(t, *tornDown, "two failures, a success, two failures: never three in a row")
	assert.Equal(t, 1, final.Ready)
	assert.Equal(t, 0, final.Unhealthy)
}

// A Leased member that breaks is reported to its lease (instance-unhealthy) and stays with the
// lease; the pool keeps its warm target within maxClusters.
func TestPoolReportsABrokenLeasedMember(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 1, 2, 1
	pol.HealthCheckInterval, pol.HealthFailureThreshold = 10*time.Second, 2
	env, broken, tornDown, out := healthEnv(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://1"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { broken.set("p-t-1", true) }, 3*time.Second)
	var after pool.Status
	env.RegisterDelayedCallback(func() { after = status(t, env); env.CancelWorkflow() }, time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	var reports []pool.HealthReport
	for _, s := range *out {
		if r, ok := s.arg.(pool.HealthReport); ok && s.signal == pool.SignalInstanceUnhealthy {
			assert.Equal(t, "lease-1", s.to)
			reports = append(reports, r)
		}
	}
	require.Len(t, reports, 1, "reported once")
	assert.Equal(t, "p-t-1", reports[0].InstanceID)
	assert.Equal(t, pool.ReasonHealthFailed, reports[0].Reason)
	assert.Contains(t, reports[0].Message, "kube-apiserver is not running")
	assert.Empty(t, *tornDown, "the lease holds its member until it ends")
	assert.Equal(t, 1, after.Leased)
	assert.Equal(t, 1, after.Unhealthy)
	assert.Equal(t, 1, after.Creating, "the warm target is refilled beside the broken leased member")
	assert.LessOrEqual(t, len(after.Members), 2, "within maxClusters")
}

// A Leased member's sync errors go to its lease when they change (instance-sync): the first
// one, the same one again (nothing), every object synced again.
func TestPoolReportsALeasedMembersSyncErrors(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 1, 2, 1
	pol.HealthCheckInterval = 10 * time.Second
	env, checks, _, out := healthEnv(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://1"})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 2*time.Second)
	denied := &instance.SyncState{Reason: api.ReasonSyncDenied, Message: "Pod default/p: forbidden", Objects: 1}
	env.RegisterDelayedCallback(func() { checks.setSync("p-t-1", denied) }, 3*time.Second)
	env.RegisterDelayedCallback(func() { checks.setSync("p-t-1", &instance.SyncState{}) }, 45*time.Second)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 2*time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	var reports []pool.SyncReport
	for _, s := range *out {
		if r, ok := s.arg.(pool.SyncReport); ok && s.signal == pool.SignalInstanceSync {
			assert.Equal(t, "lease-1", s.to)
			reports = append(reports, r)
		}
	}
	require.Len(t, reports, 2, "one report a change: %+v", reports)
	assert.Equal(t, pool.SyncReport{InstanceID: "p-t-1", Reason: api.ReasonSyncDenied, Message: "Pod default/p: forbidden", Objects: 1,
		At: reports[0].At}, reports[0])
	assert.True(t, reports[1].Synced)
	assert.Empty(t, reports[1].Reason)
}
