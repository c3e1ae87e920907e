package instance_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"

	"github.com/kunobi-ninja/kobe/instance"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// The addon and gate activities are mocked here (they are proven against a real cluster in
// internal/readiness); what is tested is the workflow: order, queue, deadline, cleanup.

var (
	testAddons = []poolspec.Addon{{Name: "demo", Manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n"}}
	testGates  = []poolspec.ReadinessGate{{Type: "DeploymentReady", Namespace: "demo", Name: "web"}}
)

type calls struct {
	mu    sync.Mutex
	steps []string // activity@taskqueue, in order
	gates instance.GatesRequest
}

func (c *calls) add(ctx context.Context, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, name+"@"+activity.GetInfo(ctx).TaskQueue)
}

func mockAddonsAndGates(env *testsuite.TestWorkflowEnvironment, gateErr error) *calls {
	c := &calls{}
	env.OnActivity("ApplyAddons", mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req instance.AddonsRequest) error {
			c.add(ctx, "ApplyAddons")
			return nil
		})
	env.OnActivity("WaitReadinessGates", mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req instance.GatesRequest) error {
			c.add(ctx, "WaitReadinessGates")
			c.mu.Lock()
			c.gates = req
			c.mu.Unlock()
			return gateErr
		})
	return c
}

func TestProvisionAppliesAddonsThenWaitsForGates(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}}
	env, s := provisionEnv(t, fb)
	c := mockAddonsAndGates(env, nil)
	start := env.Now()
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "fake", Spec: spec,
		Addons: testAddons, Gates: testGates})
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, []string{"ApplyAddons@kobe-host-h1", "WaitReadinessGates@kobe-host-h1"}, c.steps,
		"addons first, then gates, both on the instance's host")
	assert.Equal(t, testGates, c.gates.Gates)
	assert.Equal(t, "i1", c.gates.InstanceID)
	assert.WithinDuration(t, start.Add(5*time.Minute), c.gates.Deadline, time.Minute, "default gates timeout is 5m")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceReady, row.Phase)
	assert.Equal(t, 0, fb.Deletes)
}

func TestProvisionWithoutAddonsOrGatesSkipsThem(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}}
	env, _ := provisionEnv(t, fb)
	c := mockAddonsAndGates(env, nil)
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "fake", Spec: spec})
	require.NoError(t, env.GetWorkflowError())
	assert.Empty(t, c.steps)
}

// A member that fails its gates never becomes Ready: it is torn down and the provision fails
// with the gate's reason.
func TestProvisionGateFailureTearsDown(t *testing.T) {
	fb := &workflowtest.Backend{Created: map[string]bool{}}
	env, s := provisionEnv(t, fb)
	gateErr := temporal.NewNonRetryableApplicationError(
		"instance i1: 1 of 1 readiness gates not passed: DeploymentReady demo/web: deployment demo/web: not found",
		instance.ErrGatesNotPassed, nil)
	c := mockAddonsAndGates(env, gateErr)
	env.ExecuteWorkflow(instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "fake", Spec: spec,
		Gates: testGates, GatesTimeout: time.Minute})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was cleaned up")
	assert.Contains(t, err.Error(), "deployment demo/web: not found")
	assert.Equal(t, []string{"WaitReadinessGates@kobe-host-h1"}, c.steps, "no addons: straight to the gates, tried once")
	assert.Equal(t, 1, fb.Deletes)
	assert.Empty(t, fb.Created, "nothing left in the backend")
	_, err = s.GetInstance(context.Background(), "i1")
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing left in the store")
}
