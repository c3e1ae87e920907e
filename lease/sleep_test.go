package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
	"github.com/kunobi-ninja/kobe/worker"
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

// The review's item 5. A lease whose credential is issued per extension is put to sleep, then
// extended: its stopped cluster cannot issue the credential. The extension is refused at once
// with sleeping, spends nothing, and the lease expires at its TTL. It used to be accepted: its
// issuance retried against the stopped cluster for 10 minutes, and the lease, which does not
// expire while an extension runs, outlived its TTL by as much.
func TestLeaseExtendWhileAsleepIsRefusedAtOnce(t *testing.T) {
	var runs []string
	le, cb, _ := newCredLeaseEnv(t, stubSleeps(&runs, nil))
	le.assignAfter(time.Second)
	results := map[string]string{}
	answered := map[string]time.Duration{}
	extend := func(name string, by time.Duration) {
		asked := le.env.Now()
		le.env.UpdateWorkflow(lease.UpdateExtend, name, &testsuite.TestUpdateCallback{
			OnReject: func(err error) {
				r, _ := lease.IsExtendRejection(err)
				results[name], answered[name] = string(r), le.env.Now().Sub(asked)
			},
			OnAccept: func() {},
			OnComplete: func(_ interface{}, err error) {
				results[name], answered[name] = "ok", le.env.Now().Sub(asked)
				if err != nil {
					results[name] = err.Error()
				}
			},
		}, lease.ExtendRequest{By: by})
	}
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "sleep", true) }, 10*time.Minute)
	le.env.RegisterDelayedCallback(func() {
		cb.set(true, 0) // asleep: nothing answers on the cluster's address
		extend("asleep", 30*time.Minute)
	}, 59*time.Minute+30*time.Second)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))

	assert.Equal(t, "ok", results["sleep"])
	assert.Equal(t, string(api.ReasonSleeping), results["asleep"], "the extension of a sleeping lease is refused")
	assert.Zero(t, answered["asleep"], "at once")
	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.Equal(t, 0, final.Extensions)
	assert.Equal(t, time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	assert.Equal(t, time.Hour, le.env.Now().Sub(final.BoundAt).Round(time.Second), "the lease ended at its TTL")
	assert.Equal(t, 1, cb.issuances(), "the bind's credential only")
}

// Expiry is checked whatever else the lease does: an extension whose credential is still being
// issued (its instance does not answer) when the lease's TTL comes does not hold the lease
// past it. The lease expires on time and gives its instance back; the extension is abandoned
// and answered not_ready, having changed nothing. It used to hold the lease until its issuance
// gave up, 10 minutes later.
func TestLeaseExpiresOnTimeDuringAnExtension(t *testing.T) {
	le, cb, _ := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	results := map[string]string{}
	var endedAt time.Duration
	le.env.RegisterDelayedCallback(func() {
		cb.set(true, 0) // the instance stops answering (it is not known to be broken)
		le.extend(results, "unanswered", 30*time.Minute)
	}, 59*time.Minute+30*time.Second)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	endedAt = le.env.Now().Sub(final.BoundAt)

	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.Equal(t, time.Hour, endedAt.Round(time.Second), "the lease ended at its TTL, not when the issuance gave up")
	assert.Equal(t, 0, final.Extensions)
	assert.Equal(t, time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	assert.Equal(t, string(api.ReasonNotReady), results["unanswered"], "the abandoned extension is answered")
	require.Len(t, le.released, 1, "the instance goes back")
	assert.Equal(t, "i1", le.released[0].InstanceID)
}

// asleepBackend is an instance whose backend says it is asleep: its API server is stopped, so
// every credential asked of it fails.
type asleepBackend struct{ *workflowtest.Backend }

func (asleepBackend) Status(_ context.Context, id string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseSleeping}, nil
}
func (asleepBackend) Credentials(context.Context, string, backends.CredentialRequest) (backends.Credential, error) {
	return backends.Credential{}, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
}
func (asleepBackend) RevokeCredentials(context.Context, string, string) error {
	return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
}

// A credential asked of a sleeping instance (a lease that fell asleep while an extension
// issued) is refused at once, not retried for 10 minutes against its stopped API server; a
// revocation of it forgets the credential without waiting for the instance (it is torn down
// with the lease).
func TestCredentialOfASleepingInstanceIsRefusedAtOnce(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	st := workflowtest.MemoryStore(t)
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["fake"] = asleepBackend{&workflowtest.Backend{Created: map[string]bool{"i1": true}}}
	acts.Secrets = secretbox.Random()
	acts.RegisterActivities(env)

	_, err := env.ExecuteActivity("IssueLeaseCredentials", lease.CredentialRequest{LeaseID: "lease-1", Backend: "fake",
		InstanceID: "i1", ExpiresAt: time.Now().Add(time.Hour)})
	require.Error(t, err)
	assert.True(t, lease.IsInstanceSleeping(err), "%v", err)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	assert.True(t, ae.NonRetryable(), "retrying cannot help until it wakes")

	_, err = env.ExecuteActivity("RevokeLeaseCredentials", lease.CredentialRequest{LeaseID: "lease-1", Backend: "fake", InstanceID: "i1"})
	assert.NoError(t, err, "a sleeping instance is not waited for")
}

// A warm-bound lease is Bound from its first event, while it still makes sure of its credential
// (the local activity EnsureLeaseBound): a sleep sent then, by a holder that was just answered
// Bound, is carried out once the lease holds its member, not refused not_ready (the soak saw
// 23 of 59 such sleeps refused).
func TestASleepRightAfterAWarmBindIsCarriedOut(t *testing.T) {
	var runs []string
	le := newLeaseEnv(t, stubSleeps(&runs, nil))
	le.env.OnActivity(lease.ActivityEnsureLeaseBound, mock.Anything, mock.Anything).Return(func(context.Context, lease.BoundLease) error {
		time.Sleep(300 * time.Millisecond) // the store is slow: the sleep arrives meanwhile
		return nil
	})
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { le.sleepOrWake(results, "sleep at once", true) }, 0)
	warm := input
	warm.Bound = &pool.Assignment{InstanceID: "i1", Backend: "fake", Prepared: true,
		Placement: instance.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}, Endpoint: "https://fake",
		At: le.env.Now()}
	le.env.ExecuteWorkflow(lease.WorkflowName, warm)
	require.NoError(t, le.env.GetWorkflowError())
	assert.Equal(t, map[string]string{"sleep at once": "ok"}, results)
	assert.Equal(t, []string{instance.SleepWorkflowID("i1", 1)}, runs, "the instance was put to sleep")
}
