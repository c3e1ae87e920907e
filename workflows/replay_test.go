package workflows_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/workflows"
)

// TestReplayRecordedHistories replays every history recorded from real runs (see
// testsuite/record_test.go) against today's workflow code. A change that breaks determinism for
// runs already in flight fails here: guard it with workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories: run KOBE_RECORD_HISTORIES=1 go test ./testsuite -run TestRecordHistories")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := os.Stat(f)
			require.NoError(t, err)
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(workflows.Doctor, workflow.RegisterOptions{Name: workflows.DoctorWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.Provision, workflow.RegisterOptions{Name: workflows.ProvisionWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.Teardown, workflow.RegisterOptions{Name: workflows.TeardownWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.Pool, workflow.RegisterOptions{Name: workflows.PoolWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.Lease, workflow.RegisterOptions{Name: workflows.LeaseWorkflowName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
