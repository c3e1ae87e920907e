package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/workflows"
)

func newEnv(t *testing.T, s store.Store) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.Doctor, workflow.RegisterOptions{Name: workflows.DoctorWorkflowName})
	acts := activities.New(s, zap.NewNop())
	env.RegisterActivity(acts)
	return env
}

func memoryStore(t *testing.T) store.Store {
	s, err := store.Open(context.Background(), "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDoctorWithoutHold(t *testing.T) {
	s := memoryStore(t)
	env := newEnv(t, s)
	env.ExecuteWorkflow(workflows.DoctorWorkflowName, workflows.DoctorInput{ProbeID: "p1"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.DoctorResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, "sqlite", res.Probe.StoreDriver)
	assert.Nil(t, res.AfterHold)
	assert.Zero(t, res.Held)
	_, err := s.ReadProbe(context.Background(), "p1")
	assert.NoError(t, err, "the activity wrote the probe to the store")
}

// A long hold completes in test time (time skipping), and the progress query reports the hold.
func TestDoctorHoldIsADurableTimer(t *testing.T) {
	env := newEnv(t, memoryStore(t))
	var during workflows.DoctorProgress
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.DoctorProgressQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 30*time.Minute)
	env.ExecuteWorkflow(workflows.DoctorWorkflowName, workflows.DoctorInput{ProbeID: "p2", Hold: time.Hour})
	require.NoError(t, env.GetWorkflowError())
	var res workflows.DoctorResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, time.Hour, res.Held)
	require.NotNil(t, res.AfterHold)
	assert.Equal(t, "holding", during.Stage)
	assert.False(t, during.HoldUntil.IsZero())
}

// A store that keeps failing makes the activity retry, then the run fails with the cause.
func TestDoctorReportsAFailingStore(t *testing.T) {
	s := memoryStore(t)
	require.NoError(t, s.Close()) // every call now fails: "sql: database is closed"
	env := newEnv(t, s)
	env.ExecuteWorkflow(workflows.DoctorWorkflowName, workflows.DoctorInput{ProbeID: "p3"})
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "store write")
	assert.Contains(t, err.Error(), "database is closed")
	assert.False(t, errors.Is(err, context.Canceled))
}
