package pool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
)

// The pool hands its addons and gates to each member's provision.
func TestPoolPassesAddonsAndGatesToMembers(t *testing.T) {
	pol := basePolicy()
	addons := []poolspec.Addon{{Name: "demo", Manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n"}}
	gates := []poolspec.ReadinessGate{{Type: "DeploymentReady", Namespace: "demo", Name: "web"}}
	pol.Addons, pol.Gates = addons, gates
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	env.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	var got []instance.ProvisionInput
	env.OnWorkflow(instance.ProvisionWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in instance.ProvisionInput) (instance.ProvisionResult, error) {
			got = append(got, in)
			return instance.ProvisionResult{}, nil
		})
	env.OnWorkflow(instance.TeardownWorkflowName, mock.Anything, mock.Anything).Return(nil)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})
	require.NotEmpty(t, got)
	assert.Equal(t, addons, got[0].Addons)
	assert.Equal(t, gates, got[0].Gates)
}
