package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
)

// sleepOrWake sends the sleep (asleep) or wake Update; the outcome lands in results[name]: "ok",
// or the reason code of a refusal.
func (le *leaseEnv) sleepOrWake(results map[string]string, name string, asleep bool) {
	update, arg := lease.UpdateWake, any(lease.WakeRequest{ResumeTimeout: time.Minute})
	if asleep {
		update, arg = lease.UpdateSleep, lease.SleepRequest{}
	}
	outcome := func(err error) {
		if r, ok := lease.IsSleepRejection(err); ok {
			results[name] = string(r)
		} else if err != nil {
			results[name] = err.Error()
		} else {
			results[name] = "ok"
		}
	}
	le.env.UpdateWorkflow(update, name, &testsuite.TestUpdateCallback{
		OnReject: outcome, OnAccept: func() {}, OnComplete: func(_ interface{}, err error) { outcome(err) },
	}, arg)
}

// stubSleeps plays the instance's sleep and wake workflows (the fake backend cannot sleep);
// the ids of the runs land in runs, in order. wakeErr fails every wake.
func stubSleeps(runs *[]string, wakeErr error) func(*leaseEnv) {
	return func(le *leaseEnv) {
		le.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in instance.SleepInput) error {
			*runs = append(*runs, workflow.GetInfo(ctx).WorkflowExecution.ID)
			return nil
		}, workflow.RegisterOptions{Name: instance.SleepWorkflowName})
		le.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in instance.SleepInput) (instance.WakeResult, error) {
			*runs = append(*runs, workflow.GetInfo(ctx).WorkflowExecution.ID)
			return instance.WakeResult{Duration: 2 * time.Second}, wakeErr
		}, workflow.RegisterOptions{Name: instance.WakeWorkflowName})
	}
}

// Sleep and wake of a Bound lease: refused while Pending, idempotent, each a child workflow of
// its own, shown as the condition Sleeping; the TTL keeps running while the lease sleeps.
func TestLeaseSleepAndWakeUpdates(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	le.assignAfter(time.Minute)
	results := map[string]string{}
	views := map[string]lease.View{}
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "pending", true) }, 30*time.Second)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "wake awake", false) }, 5*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "sleep", true) }, 10*time.Minute)
	le.env.RegisterDelayedCallback(func() { views["asleep"] = le.view(t) }, 11*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "sleep again", true) }, 12*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "wake", false) }, 20*time.Minute)
	le.env.RegisterDelayedCallback(func() { views["awake"] = le.view(t) }, 21*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "sleep till the end", true) }, 30*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))

	assert.Equal(t, map[string]string{"pending": string(api.ReasonNotReady), "wake awake": "ok", "sleep": "ok",
		"sleep again": "ok", "wake": "ok", "sleep till the end": "ok"}, results)
	assert.Equal(t, []string{instance.SleepWorkflowID("i1", 1), instance.WakeWorkflowID("i1", 2), instance.SleepWorkflowID("i1", 3)}, runs,
		"one workflow per change; the idempotent requests ran none")
	assert.True(t, views["asleep"].Sleeping)
	assert.Equal(t, "True", condition(views["asleep"], lease.ConditionSleeping).Status)
	assert.False(t, views["awake"].Sleeping)
	assert.Equal(t, api.ReasonAwake, condition(views["awake"], lease.ConditionSleeping).Reason)
	assert.Equal(t, api.LeaseExpired, final.Phase, "a sleeping lease's TTL keeps running")
	assert.Equal(t, time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	assert.True(t, final.Sleeping)
	require.Len(t, le.released, 1, "the sleeping instance goes back to the pool")
}

// A wake that fails leaves the lease Bound and awake no more, its instance reported broken.
func TestLeaseWakeFailure(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, temporal.NewNonRetryableApplicationError("did not wake", instance.ErrWakeFailed, nil)))
	le.assignAfter(0)
	results := map[string]string{}
	var after lease.View
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "sleep", true) }, time.Minute)
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "wake", false) }, 2*time.Minute)
	le.env.RegisterDelayedCallback(func() { after = le.view(t) }, 3*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, 4*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	assert.Equal(t, map[string]string{"sleep": "ok", "wake": string(api.ReasonWakeFailed)}, results)
	assert.Equal(t, api.LeaseBound, after.Phase)
	assert.False(t, after.Sleeping)
	assert.Equal(t, api.ReasonWakeFailed, condition(after, lease.ConditionSleeping).Reason)
	assert.Equal(t, "False", condition(after, lease.ConditionInstanceHealthy).Status)
}

func condition(v lease.View, typ string) api.LeaseCondition {
	for _, c := range v.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.LeaseCondition{}
}
