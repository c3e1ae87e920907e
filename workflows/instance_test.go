package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/workflows"
)

// fakeBackend is a scripted backend for the workflows' decision logic; the real backends are
// proven by the conformance suite and the e2e tests.
type fakeBackend struct {
	mu        sync.Mutex
	readyErr  error
	created   map[string]bool
	deletes   int
	deleteErr error
}

func (f *fakeBackend) Name() string                                            { return "fake" }
func (f *fakeBackend) Validate(backends.InstanceSpec) error                    { return nil }
func (f *fakeBackend) HostID() string                                          { return "h1" }
func (f *fakeBackend) RevokeCredentials(context.Context, string, string) error { return nil }
func (f *fakeBackend) Credentials(context.Context, string, backends.CredentialRequest) (backends.Credential, error) {
	return backends.Credential{}, nil
}
func (f *fakeBackend) Create(_ context.Context, s backends.InstanceSpec) (backends.InstanceStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created[s.ID] = true
	return backends.InstanceStatus{ID: s.ID, Phase: backends.PhaseCreating}, nil
}
func (f *fakeBackend) Status(_ context.Context, id string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady}, nil
}
func (f *fakeBackend) WaitReady(_ context.Context, id string, _ func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	if f.readyErr != nil {
		return backends.InstanceStatus{ID: id, Phase: backends.PhaseFailed}, f.readyErr
	}
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady, Endpoint: "https://fake"}, nil
}
func (f *fakeBackend) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes++
	if f.deleteErr != nil {
		return f.deleteErr
	}
	delete(f.created, id)
	return nil
}

func provisionEnv(t *testing.T, fb *fakeBackend) (*testsuite.TestWorkflowEnvironment, store.Store) {
	s := memoryStore(t)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.Provision, workflow.RegisterOptions{Name: workflows.ProvisionWorkflowName})
	env.RegisterWorkflowWithOptions(workflows.Teardown, workflow.RegisterOptions{Name: workflows.TeardownWorkflowName})
	acts := activities.New(s, zap.NewNop())
	acts.HostID, acts.HostQueue, acts.SharedQueue = "h1", "kobe-host-h1", "kobe"
	acts.Backends["fake"] = fb
	env.RegisterActivity(acts)
	return env, s
}

var spec = backends.InstanceSpec{ID: "i1", Pool: "p", KubernetesVersion: "v1"}

func TestProvisionRecordsReadyInstance(t *testing.T) {
	fb := &fakeBackend{created: map[string]bool{}}
	env, s := provisionEnv(t, fb)
	env.ExecuteWorkflow(workflows.ProvisionWorkflowName, workflows.ProvisionInput{Backend: "fake", Spec: spec})
	require.NoError(t, env.GetWorkflowError())
	var res workflows.ProvisionResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, "kobe-host-h1", res.Placement.TaskQueue, "a host-bound backend runs on its host's queue")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, "Ready", row.Phase)
	assert.Equal(t, "https://fake", row.Endpoint)
	assert.Equal(t, 0, fb.deletes)
}

func TestProvisionFailureCleansUp(t *testing.T) {
	fb := &fakeBackend{created: map[string]bool{}, readyErr: errors.New("apiserver crashed")}
	env, s := provisionEnv(t, fb)
	env.ExecuteWorkflow(workflows.ProvisionWorkflowName, workflows.ProvisionInput{Backend: "fake", Spec: spec, CreatingTimeout: time.Minute})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was cleaned up")
	assert.Equal(t, 1, fb.deletes)
	assert.Empty(t, fb.created, "nothing left in the backend")
	_, err = s.GetInstance(context.Background(), "i1")
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing left in the store")
}

func TestProvisionUnknownBackendFailsFast(t *testing.T) {
	fb := &fakeBackend{created: map[string]bool{}}
	env, _ := provisionEnv(t, fb)
	env.ExecuteWorkflow(workflows.ProvisionWorkflowName, workflows.ProvisionInput{Backend: "k9s", Spec: spec})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.backend.type: unknown backend "k9s"`)
}

func TestTeardownThatKeepsFailingQuarantines(t *testing.T) {
	fb := &fakeBackend{created: map[string]bool{"i1": true}, deleteErr: errors.New("process will not die")}
	env, s := provisionEnv(t, fb)
	env.ExecuteWorkflow(workflows.TeardownWorkflowName, workflows.TeardownInput{Backend: "fake", Spec: spec,
		Placement: activities.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}})
	require.Error(t, env.GetWorkflowError())
	assert.Greater(t, fb.deletes, 3, "delete is retried")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, "Quarantined", row.Phase)
	assert.Contains(t, string(row.Data), "process will not die")
}

// A teardown that gives up tells its pool (member-quarantined, with the reason), so the pool
// keeps the member as Quarantined instead of waiting for member-gone forever.
func TestTeardownThatKeepsFailingTellsThePool(t *testing.T) {
	fb := &fakeBackend{created: map[string]bool{"i1": true}, deleteErr: errors.New("process will not die")}
	env, _ := provisionEnv(t, fb)
	var told []workflows.MemberReport
	env.OnSignalExternalWorkflow(mock.Anything, "pool-p", "", workflows.SignalMemberQuarantined, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			told = append(told, arg.(workflows.MemberReport))
			return nil
		})
	env.ExecuteWorkflow(workflows.TeardownWorkflowName, workflows.TeardownInput{Backend: "fake", Spec: spec,
		Placement: activities.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}, NotifyPool: "pool-p"})
	require.Error(t, env.GetWorkflowError())
	require.Len(t, told, 1)
	assert.Equal(t, "i1", told[0].InstanceID)
	assert.Contains(t, told[0].Reason, "process will not die")
}
