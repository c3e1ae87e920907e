package doctor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

func newEnv(t *testing.T, s store.Store) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(doctor.Doctor, workflow.RegisterOptions{Name: doctor.WorkflowName})
	acts := worker.NewActivities(s, zap.NewNop())
	acts.RegisterActivities(env)
	return env
}

func TestDoctorWithoutHold(t *testing.T) {
	s := workflowtest.MemoryStore(t)
	env := newEnv(t, s)
	env.ExecuteWorkflow(doctor.WorkflowName, doctor.Input{ProbeID: "p1"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res doctor.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, "sqlite", res.Probe.StoreDriver)
	assert.Nil(t, res.AfterHold)
	assert.Zero(t, res.Held)
	_, err := s.ReadProbe(context.Background(), "p1")
	assert.NoError(t, err, "the activity wrote the probe to the store")
}

// A long hold completes in test time (time skipping), and the progress query reports the hold.
func TestDoctorHoldIsADurableTimer(t *testing.T) {
	env := newEnv(t, workflowtest.MemoryStore(t))
	var during doctor.Progress
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(doctor.ProgressQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 30*time.Minute)
	env.ExecuteWorkflow(doctor.WorkflowName, doctor.Input{ProbeID: "p2", Hold: time.Hour})
	require.NoError(t, env.GetWorkflowError())
	var res doctor.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, time.Hour, res.Held)
	require.NotNil(t, res.AfterHold)
	assert.Equal(t, "holding", during.Stage)
	assert.False(t, during.HoldUntil.IsZero())
}

// A store that keeps failing makes the activity retry, then the run fails with the cause.
func TestDoctorReportsAFailingStore(t *testing.T) {
	s := workflowtest.MemoryStore(t)
	require.NoError(t, s.Close()) // every call now fails: "sql: database is closed"
	env := newEnv(t, s)
	env.ExecuteWorkflow(doctor.WorkflowName, doctor.Input{ProbeID: "p3"})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "store write")
	assert.Contains(t, err.Error(), "database is closed")
	assert.False(t, errors.Is(err, context.Canceled))
}
