package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
)

// The sweep asks every pool in the store to check its certificates; a pool whose workflow does
// not run is listed as missed, and the others are still signalled.
func TestCertificateSweepSignalsEveryPool(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.CertificateSweep, workflow.RegisterOptions{Name: pool.CertificateSweepWorkflowName})
	env.RegisterActivityWithOptions(func(context.Context) ([]string, error) { return []string{"a", "gone", "b"}, nil },
		activity.RegisterOptions{Name: "ListPoolNames"})
	env.OnSignalExternalWorkflow("default-test-namespace", pool.WorkflowID("a"), "", pool.SignalCheckCertificates, nil).Return(nil)
	env.OnSignalExternalWorkflow("default-test-namespace", pool.WorkflowID("b"), "", pool.SignalCheckCertificates, nil).Return(nil)
	env.OnSignalExternalWorkflow("default-test-namespace", pool.WorkflowID("gone"), "", pool.SignalCheckCertificates, nil).Return(errors.New("workflow not found"))
	env.ExecuteWorkflow(pool.CertificateSweepWorkflowName)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res pool.SweepResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, []string{"a", "b"}, res.Signalled)
	assert.Equal(t, []string{"gone"}, res.Missed)
}

// The pool workflow on the certificate workflow's signal: it checks its members on their host
// queue, recycles the warm member whose certificates expire within recycleBefore (reason
// cert_expiry, audited), keeps the one whose certificates are valid, and replaces what it
// recycled.
func TestPoolRecyclesAWarmMemberBeforeItsCertificatesExpire(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 2, 4, 2
	pol.RecycleBefore = 2 * time.Minute
	env, _, tornDown, _ := healthEnv(t)
	var audited []instance.CertificateEvent
	env.RegisterActivityWithOptions(func(_ context.Context, e instance.CertificateEvent) error {
		audited = append(audited, e)
		return nil
	}, activity.RegisterOptions{Name: "RecordCertificateEvent"})
	checks := 0
	env.RegisterActivityWithOptions(func(_ context.Context, req instance.CertificatesRequest) ([]instance.CertificateState, error) {
		checks++
		var out []instance.CertificateState
		for _, id := range req.InstanceIDs {
			e := backends.CertificateExpiry{CA: env.Now().Add(24 * time.Hour), Serving: env.Now().Add(time.Hour), Client: env.Now().Add(time.Hour)}
			if id == "p-t-1" {
				e.Serving = env.Now().Add(90 * time.Second) // within recycleBefore, not expired yet
			}
			out = append(out, instance.CertificateState{InstanceID: id, Expiry: e, CanReissue: true})
		}
		return out, nil
	}, activity.RegisterOptions{Name: "CheckCertificates"})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-1", Endpoint: "https://1"})
		env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: "p-t-2", Endpoint: "https://2"})
	}, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalCheckCertificates, nil) }, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		for _, m := range membersIn(status(t, env), pool.MemberCreating) {
			env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: m.ID, Endpoint: "https://" + m.ID})
		}
	}, 20*time.Second)
	var final pool.Status
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	assert.Equal(t, 1, checks, "one check per host queue per request")
	assert.Equal(t, []string{"p-t-1"}, *tornDown, "the member expiring within recycleBefore is recycled before it expires")
	require.Len(t, audited, 1)
	assert.Equal(t, "p-t-1", audited[0].InstanceID)
	assert.Equal(t, "recycled", audited[0].Decision)
	assert.Len(t, membersIn(final, pool.MemberReady), 2, "the warm target holds")
}
