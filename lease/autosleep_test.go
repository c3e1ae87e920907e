package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
)

// usageBackend is the fake backend with a scripted record of the lease's use of its cluster
// (backends.ActivityReporter); it counts how often it is asked.
type usageBackend struct {
	*workflowtest.Backend
	mu   sync.Mutex
	last time.Time
	asks int
}

func (b *usageBackend) LastActivity(context.Context, string) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asks++
	return b.last, nil
}

func (b *usageBackend) used(at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = at
}

func (b *usageBackend) asked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asks
}

// A lease used through its kubeconfig until minute 25 (the backend saw it) and asked about
// through kobe at minute 5 stays awake while it is used, sleeps 10 minutes after the last use,
// for inactivity; woken by hand, it sleeps again 10 minutes after the wake. Its backend is asked
// only when what kobe saw is 10 minutes old, not on a fast poll.
func TestLeaseSleepsAfterInactivity(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	usage := &usageBackend{Backend: le.fb}
	le.setBackend(usage)
	le.assignAfter(0)
	in := input
	in.AfterInactivity = 10 * time.Minute
	for _, at := range []time.Duration{12 * time.Minute, 19 * time.Minute, 25 * time.Minute} {
		le.env.RegisterDelayedCallback(func() { usage.used(le.env.Now()) }, at)
	}
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalActivity, nil) }, 5*time.Minute)
	views := map[string]lease.View{}
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { views["used"] = le.view(t) }, 34*time.Minute)
	le.env.RegisterDelayedCallback(func() { views["inactive"] = le.view(t) }, 36*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "wake", false) }, 40*time.Minute)
	le.env.RegisterDelayedCallback(func() { views["woken"] = le.view(t) }, 49*time.Minute)
	le.env.RegisterDelayedCallback(func() { views["again"] = le.view(t) }, 51*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, in)
	require.NoError(t, le.env.GetWorkflowError())

	assert.Equal(t, map[string]string{"wake": "ok"}, results)
	assert.False(t, views["used"].Sleeping, "used at minute 25: awake until 35")
	assert.True(t, views["inactive"].Sleeping)
	assert.Equal(t, api.ReasonInactive, condition(views["inactive"], lease.ConditionSleeping).Reason)
	assert.Contains(t, condition(views["inactive"], lease.ConditionSleeping).Message, "after 10m0s without activity")
	assert.False(t, views["woken"].Sleeping, "a wake counts as activity")
	assert.True(t, views["again"].Sleeping)
	assert.Equal(t, []string{instance.SleepWorkflowID("i1", 1), instance.WakeWorkflowID("i1", 2), instance.SleepWorkflowID("i1", 3)}, runs)
	// Checks at 15 (kobe's activity at 5), 22 (use at 12), 29 (19), 35 (25: sleeps) and 50.
	assert.Equal(t, 5, usage.asked(), "the backend is asked once per period of what kobe saw, not polled")
	assert.Equal(t, int64(2), le.metrics.count(lease.MetricLeaseSleeps+",cause=inactivity,profile=p"))
}

// A backend that cannot observe the cluster's use leaves what kobe saw: heartbeats keep the
// lease awake, and it sleeps one period after the last.
func TestLeaseInactivityWithoutTheBackendsRecord(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	le.assignAfter(0)
	in := input
	in.AfterInactivity = 10 * time.Minute
	for at := 4 * time.Minute; at <= 20*time.Minute; at += 4 * time.Minute {
		le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalHeartbeat, nil) }, at)
	}
	var at29, at31 lease.View
	le.env.RegisterDelayedCallback(func() { at29 = le.view(t) }, 29*time.Minute)
	le.env.RegisterDelayedCallback(func() { at31 = le.view(t) }, 31*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, in)
	require.NoError(t, le.env.GetWorkflowError())
	assert.False(t, at29.Sleeping, "the last heartbeat was at 20")
	assert.True(t, at31.Sleeping)
	assert.Equal(t, []string{instance.SleepWorkflowID("i1", 1)}, runs)
}

// A lease without AfterInactivity (no policy, or excluded) never sleeps by itself.
func TestLeaseWithoutAfterInactivityStaysAwake(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	le.assignAfter(0)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.False(t, final.Sleeping)
	assert.Empty(t, runs)
}

// The lease's activity survives continue-as-new: the next run starts from it.
func TestLeaseInactivityAcrossContinueAsNew(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	le.assignAfter(0)
	in := input
	in.AfterInactivity = 10 * time.Minute
	in.ContinueAsNewAfter = 20
	for at := time.Minute; at <= 30*time.Minute; at += time.Minute {
		le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalActivity, nil) }, at)
	}
	le.env.ExecuteWorkflow(lease.WorkflowName, in)
	next := continuedAs(t, le.env.GetWorkflowError())
	require.NotNil(t, next.Resume)
	assert.Equal(t, 10*time.Minute, next.AfterInactivity)
	assert.False(t, next.Resume.LastActive.IsZero(), "the activity signals' time is carried over")
	assert.WithinDuration(t, le.env.Now(), next.Resume.LastActive, time.Minute, "the newest signal's time")
	assert.Empty(t, runs, "continually active: never slept")
}

// The decision alone: inactive once the newest activity of any kind is `after` old.
func TestInactiveFor(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	inactive, at := lease.InactiveFor(t0.Add(9*time.Minute), 10*time.Minute, t0, time.Time{}, t0.Add(-time.Hour))
	assert.False(t, inactive)
	assert.Equal(t, t0.Add(10*time.Minute), at)
	inactive, _ = lease.InactiveFor(t0.Add(10*time.Minute), 10*time.Minute, t0, t0.Add(-time.Hour))
	assert.True(t, inactive, "exactly one period: inactive")
	inactive, at = lease.InactiveFor(t0.Add(10*time.Minute), 10*time.Minute, t0, t0.Add(5*time.Minute))
	assert.False(t, inactive, "the newest kind counts")
	assert.Equal(t, t0.Add(15*time.Minute), at)
}
