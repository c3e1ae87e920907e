package instance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

func provisionEnv(t *testing.T, fb *workflowtest.Backend) (*testsuite.TestWorkflowEnvironment, store.Store) {
	s := workflowtest.MemoryStore(t)
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	acts := worker.NewActivities(s, zap.NewNop())
	acts.HostID, acts.HostQueue, acts.SharedQueue = "h1", "kobe-host-h1", "kobe"
	acts.Backends["fake"] = fb
	acts.RegisterActivities(env)
	return env, s
}

var spec = backends.InstanceSpec{ID: "i1", Pool: "p", KubernetesVersion: "v1"}

func TestProvisionRecordsReadyInstance(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}}
	env, s := provisionEnv(t, fb)
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "fake", Spec: spec})
	require.NoError(t, env.GetWorkflowError())
	var res instance.ProvisionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, "kobe-host-h1", res.Placement.TaskQueue, "a host-bound backend runs on its host's queue")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceReady, row.Phase)
	assert.Equal(t, "https://fake", row.Endpoint)
	assert.Equal(t, 0, fb.Deletes)
}

func TestProvisionFailureCleansUp(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}, ReadyErr: errors.New("apiserver crashed")}
	env, s := provisionEnv(t, fb)
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "fake", Spec: spec, CreatingTimeout: time.Minute})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was cleaned up")
	assert.Equal(t, 1, fb.Deletes)
	assert.Empty(t, fb.Created, "nothing left in the backend")
	_, err = s.GetInstance(context.Background(), "i1")
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing left in the store")
}

func TestProvisionUnknownBackendFailsFast(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}}
	env, _ := provisionEnv(t, fb)
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "k9s", Spec: spec})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.backend.type: unknown backend "k9s"`)
}

func TestTeardownThatKeepsFailingQuarantines(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{"i1": true}, DeleteErr: errors.New("process will not die")}
	env, s := provisionEnv(t, fb)
	env.ExecuteWorkflow(instance.TeardownWorkflowName, instance.TeardownInput{Backend: "fake", Spec: spec,
		Placement: instance.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}})
	require.Error(t, env.GetWorkflowError())
	assert.Greater(t, fb.Deletes, 3, "delete is retried")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceQuarantined, row.Phase)
	assert.Contains(t, string(row.Data), "process will not die")
}

// A teardown that gives up tells its pool (member-quarantined, with the reason), so the pool
// keeps the member as Quarantined instead of waiting for member-gone forever.
func TestTeardownThatKeepsFailingTellsThePool(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{"i1": true}, DeleteErr: errors.New("process will not die")}
	env, _ := provisionEnv(t, fb)
	var told []instance.MemberReport
	env.OnSignalExternalWorkflow(mock.Anything, "pool-p", "", instance.SignalMemberQuarantined, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			told = append(told, arg.(instance.MemberReport))
			return nil
		})
	env.ExecuteWorkflow(instance.TeardownWorkflowName, instance.TeardownInput{Backend: "fake", Spec: spec,
		Placement: instance.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}, NotifyPool: "pool-p"})
	require.Error(t, env.GetWorkflowError())
	require.Len(t, told, 1)
	assert.Equal(t, "i1", told[0].InstanceID)
	assert.Contains(t, told[0].Reason, "process will not die")
}
