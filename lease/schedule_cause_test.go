package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease"
)

// scheduled sends the sleep (asleep) or wake Update as a pool's schedule does
// (ChangeLeaseSleep): the request says it comes from the schedule.
func (le *leaseEnv) scheduled(results map[string]string, name string, asleep bool) {
	update, arg := lease.UpdateWake, any(lease.WakeRequest{ResumeTimeout: time.Minute, Cause: lease.SleepCauseSchedule})
	if asleep {
		update, arg = lease.UpdateSleep, lease.SleepRequest{Cause: lease.SleepCauseSchedule}
	}
	le.env.UpdateWorkflow(update, name, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { results[name] = err.Error() }, OnAccept: func() {},
		OnComplete: func(_ interface{}, err error) {
			results[name] = "ok"
			if err != nil {
				results[name] = err.Error()
			}
		},
	}, arg)
}

// A pool's sleep and wake schedules are not the holder's activity: a lease with a 10-minute idle
// timeout, put to sleep by its pool's schedule at minute 8 and woken by it at minute 9, still
// ends 10 minutes after it was bound (nobody used it), not 10 minutes after the schedule's wake.
// Its scheduled sleep is counted with cause "schedule", not "request".
func TestScheduledSleepIsNotTheHoldersActivity(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	le.assignAfter(0)
	in := input
	in.IdleTimeout = 10 * time.Minute
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { le.scheduled(results, "sleep", true) }, 8*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.scheduled(results, "wake", false) }, 9*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, in)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))

	assert.Equal(t, map[string]string{"sleep": "ok", "wake": "ok"}, results)
	assert.Equal(t, api.ReasonIdleTimeout, final.Reason)
	assert.Equal(t, 10*time.Minute, le.env.Now().Sub(final.BoundAt).Round(time.Minute),
		"the idle timeout counts from the bind: the schedule's sleep and wake are not activity")
	assert.Equal(t, int64(1), le.metrics.count(lease.MetricLeaseSleeps+",cause=schedule,profile=p"))
	assert.Zero(t, le.metrics.count(lease.MetricLeaseSleeps+",cause=request,profile=p"))
}
