package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/workflows"
)

// leaseEnv runs the Lease workflow alone: its pool is played by the test (signals to the pool
// are recorded, the assignment is signalled in), the backend is the scripted fake, the store real.
type leaseEnv struct {
	env      *testsuite.TestWorkflowEnvironment
	store    store.Store
	fb       *fakeBackend
	toPool   []string
	released []workflows.ReleaseRequest
}

func newLeaseEnv(t *testing.T) *leaseEnv {
	le := &leaseEnv{store: memoryStore(t), fb: &fakeBackend{created: map[string]bool{"i1": true}}}
	var suite testsuite.WorkflowTestSuite
	le.env = suite.NewTestWorkflowEnvironment()
	le.env.RegisterWorkflowWithOptions(workflows.Lease, workflow.RegisterOptions{Name: workflows.LeaseWorkflowName})
	acts := activities.New(le.store, zap.NewNop())
	acts.Backends["fake"] = le.fb
	acts.Secrets = secretbox.Random()
	le.env.RegisterActivity(acts)
	le.env.OnSignalExternalWorkflow(mock.Anything, "pool-p", "", mock.Anything, mock.Anything).Return(
		func(_, _, _, signal string, arg any) error {
			le.toPool = append(le.toPool, signal)
			if r, ok := arg.(workflows.ReleaseRequest); ok {
				le.released = append(le.released, r)
			}
			return nil
		})
	return le
}

var input = workflows.LeaseInput{LeaseID: "lease-1", Pool: "p", Principal: "alice", TTL: time.Hour, MaxTTL: 3 * time.Hour, MaxExtensions: 2}

func (le *leaseEnv) assignAfter(d time.Duration) {
	le.env.RegisterDelayedCallback(func() {
		le.env.SignalWorkflow(workflows.SignalAssigned, workflows.Assignment{InstanceID: "i1", Backend: "fake",
			Placement: activities.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}, Endpoint: "https://fake"})
	}, d)
}

func (le *leaseEnv) view(t *testing.T) workflows.LeaseView {
	v, err := le.env.QueryWorkflow(workflows.QueryLease)
	require.NoError(t, err)
	var lv workflows.LeaseView
	require.NoError(t, v.Get(&lv))
	return lv
}

// extend sends the extend Update; the outcome lands in results[name] when the environment
// delivers it ("ok" for success).
func (le *leaseEnv) extend(results map[string]string, name string, by time.Duration) {
	le.env.UpdateWorkflow(workflows.UpdateExtend, name, &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			r, _ := workflows.IsExtendRejection(err)
			results[name] = r
		},
		OnAccept: func() {},
		OnComplete: func(_ interface{}, err error) {
			if err == nil {
				results[name] = "ok"
			} else {
				results[name] = err.Error()
			}
		},
	}, workflows.ExtendRequest{By: by})
}

// A long TTL expires in test time: the instance goes back to the pool for teardown.
func TestLeaseExpiresAtTTL(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(time.Second)
	var boundView workflows.LeaseView
	le.env.RegisterDelayedCallback(func() { boundView = le.view(t) }, time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final workflows.LeaseView
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, workflows.LeaseBound, boundView.Phase)
	assert.Equal(t, workflows.LeaseExpired, final.Phase)
	assert.Equal(t, time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	require.Len(t, le.released, 1)
	assert.Equal(t, "i1", le.released[0].InstanceID)
	assert.Equal(t, []string{workflows.SignalClaim, workflows.SignalRelease}, le.toPool)
	row, err := le.store.GetLease(context.Background(), "lease-1")
	require.NoError(t, err)
	assert.Equal(t, workflows.LeaseExpired, row.Phase)
	_, err = le.store.GetLeaseCredential(context.Background(), "lease-1")
	assert.ErrorIs(t, err, store.ErrNotFound, "the credential is revoked and forgotten")
}

// Extensions: within budget they move the expiry; the third is over budget; one past the
// ceiling is refused.
func TestLeaseExtendBudgetAndCeiling(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(time.Second)
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { le.extend(results, "past ceiling", 3*time.Hour) }, 10*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "first", 30*time.Minute) }, 11*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "second", 30*time.Minute) }, 12*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "third", time.Minute) }, 13*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "zero", 0) }, 14*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(workflows.SignalReleaseLease, nil) }, 15*time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final workflows.LeaseView
	require.NoError(t, le.env.GetWorkflowResult(&final))

	assert.Equal(t, workflows.ReasonMaxTTLCeiling, results["past ceiling"])
	assert.Equal(t, "ok", results["first"])
	assert.Equal(t, "ok", results["second"])
	assert.Equal(t, workflows.ReasonExtensionBudgetExhausted, results["third"])
	assert.Equal(t, workflows.ReasonInvalidRequest, results["zero"])
	assert.Equal(t, workflows.LeaseReleased, final.Phase)
	assert.Equal(t, 2, final.Extensions)
	assert.Equal(t, 2*time.Hour, final.ExpiresAt.Sub(final.BoundAt))
}

// An extension re-arms the TTL timer: the lease outlives its original expiry.
func TestLeaseExtensionDelaysExpiry(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(0)
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { le.extend(results, "hour", time.Hour) }, 50*time.Minute)
	var at90 workflows.LeaseView
	le.env.RegisterDelayedCallback(func() { at90 = le.view(t) }, 90*time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final workflows.LeaseView
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, "ok", results["hour"])
	assert.Equal(t, workflows.LeaseBound, at90.Phase, "still bound after the original hour")
	assert.Equal(t, workflows.LeaseExpired, final.Phase)
}

// A claim the pool cannot serve fails with the pool's reason, and nothing is handed back.
func TestLeaseClaimFailure(t *testing.T) {
	le := newLeaseEnv(t)
	le.env.RegisterDelayedCallback(func() {
		le.env.SignalWorkflow(workflows.SignalClaimFailed, workflows.ClaimFailure{Reason: workflows.ReasonPoolExhausted})
	}, 5*time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final workflows.LeaseView
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, workflows.LeaseFailed, final.Phase)
	assert.Equal(t, workflows.ReasonPoolExhausted, final.Reason)
	assert.Empty(t, le.released)
}

// Released while still queued: the claim is withdrawn from the pool.
func TestLeaseReleasedWhilePending(t *testing.T) {
	le := newLeaseEnv(t)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(workflows.SignalReleaseLease, nil) }, time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final workflows.LeaseView
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, workflows.LeaseReleased, final.Phase)
	assert.Equal(t, []string{workflows.SignalClaim, workflows.SignalCancelClaim}, le.toPool)
}

// With an idle timeout, heartbeats keep the lease; once they stop, it ends early (Expired,
// idle_timeout) and the instance goes back, long before the TTL.
func TestLeaseIdleTimeout(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(time.Second)
	in := input
	in.IdleTimeout = 5 * time.Minute
	// Heartbeats every 3 minutes for 30 minutes, then silence.
	for at := 3 * time.Minute; at <= 30*time.Minute; at += 3 * time.Minute {
		le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(workflows.SignalHeartbeat, nil) }, at)
	}
	var at20 workflows.LeaseView
	le.env.RegisterDelayedCallback(func() { at20 = le.view(t) }, 20*time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, in)
	require.NoError(t, le.env.GetWorkflowError())
	var final workflows.LeaseView
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, workflows.LeaseBound, at20.Phase, "heartbeats keep it")
	assert.Equal(t, workflows.LeaseExpired, final.Phase)
	assert.Equal(t, workflows.ReasonIdleTimeout, final.Reason)
	assert.Equal(t, 35*time.Minute, le.env.Now().Sub(final.BoundAt).Round(time.Minute), "5 min after the last heartbeat")
	require.Len(t, le.released, 1)
}

// The wait-bound update returns once the lease is Bound (how clients wait without polling).
func TestLeaseWaitBoundUpdate(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(10 * time.Second)
	var got workflows.LeaseView
	var gotErr error
	le.env.RegisterDelayedCallback(func() {
		le.env.UpdateWorkflow(workflows.UpdateWaitBound, "w1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { gotErr = err },
			OnAccept: func() {},
			OnComplete: func(v interface{}, err error) {
				gotErr = err
				if lv, ok := v.(workflows.LeaseView); ok {
					got = lv
				}
			},
		})
	}, time.Second)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(workflows.SignalReleaseLease, nil) }, time.Minute)
	le.env.ExecuteWorkflow(workflows.LeaseWorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	require.NoError(t, gotErr)
	assert.Equal(t, workflows.LeaseBound, got.Phase)
	assert.Equal(t, "i1", got.InstanceID)
}
