package instance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
	"github.com/kunobi-ninja/kobe/worker"
)

// sleepyBackend is the scripted fake with the Sleeper capability; ResumeErr fails every Resume.
type sleepyBackend struct {
	*workflowtest.Backend
	sleeps, resumes int
	ResumeErr       error
}

func (b *sleepyBackend) Sleep(context.Context, string) error { b.sleeps++; return nil }
func (b *sleepyBackend) Resume(context.Context, string) error {
	b.resumes++
	return b.ResumeErr
}

func sleepEnv(t *testing.T, b backends.RuntimeBackend) (*testsuite.TestWorkflowEnvironment, store.Store) {
	s := workflowtest.MemoryStore(t)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(instance.Sleep, workflow.RegisterOptions{Name: instance.SleepWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Wake, workflow.RegisterOptions{Name: instance.WakeWorkflowName})
	acts := worker.NewActivities(s, zap.NewNop())
	acts.Backends["fake"] = b
	acts.RegisterActivities(env)
	return env, s
}

var sleepInput = instance.SleepInput{Backend: "fake", Spec: backends.InstanceSpec{ID: "i1", Pool: "p"}, LeaseID: "lease-1",
	ResumeTimeout: time.Minute}

func lastEvent(t *testing.T, s store.Store) store.Event {
	events, err := s.ListEvents(context.Background(), store.EventFilter{Target: "i1"})
	require.NoError(t, err)
	require.NotEmpty(t, events)
	return events[len(events)-1]
}

func TestSleepRecordsSleepingInstance(t *testing.T) {
	b := &sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}}
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.SleepWorkflowName, sleepInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 1, b.sleeps)
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceSleeping, row.Phase)
	assert.Equal(t, instance.ActionInstanceSleep, lastEvent(t, s).Action)
}

func TestWakeRecordsReadyInstance(t *testing.T) {
	b := &sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}}
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	require.NoError(t, env.GetWorkflowError())
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceReady, row.Phase)
	assert.Equal(t, instance.ActionInstanceWake, lastEvent(t, s).Action)
}

// A wake that cannot bring the instance back within its resume timeout breaks it.
func TestWakePastResumeTimeoutBreaksTheInstance(t *testing.T) {
	b := &sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}, ResumeErr: errors.New("port taken")}
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, instance.ErrWakeFailed, ae.Type())
	assert.Greater(t, b.resumes, 1, "retried within the resume timeout")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceUnhealthy, row.Phase)
	assert.Equal(t, instance.ActionInstanceWakeFailed, lastEvent(t, s).Action)
}

// A backend without the capability: refused, nothing recorded, nothing broken.
func TestSleepUnsupportedChangesNothing(t *testing.T) {
	env, s := sleepEnv(t, &workflowtest.Backend{Created: map[string]bool{"i1": true}})
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &ae)
	assert.Equal(t, instance.ErrCannotSleep, ae.Type())
	_, err := s.GetInstance(context.Background(), "i1")
	assert.ErrorIs(t, err, store.ErrNotFound)
}
