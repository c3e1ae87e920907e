package pool_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/pool"
)

// The sweep asks every pool in the store to check its certificates; a pool whose workflow does
// not run is listed as missed, and the others are still signalled.
func TestCertificateSweepSignalsEveryPool(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
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
