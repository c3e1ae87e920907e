package worker_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
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
			r.RegisterWorkflowWithOptions(doctor.Doctor, workflow.RegisterOptions{Name: doctor.WorkflowName})
			r.RegisterWorkflowWithOptions(instance.Provision, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
			r.RegisterWorkflowWithOptions(instance.Teardown, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
			r.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
			r.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
			r.RegisterWorkflowWithOptions(instance.Preflight, workflow.RegisterOptions{Name: instance.PreflightWorkflowName})
			r.RegisterWorkflowWithOptions(pool.CertificateSweep, workflow.RegisterOptions{Name: pool.CertificateSweepWorkflowName})
			r.RegisterWorkflowWithOptions(instance.Sleep, workflow.RegisterOptions{Name: instance.SleepWorkflowName})
			r.RegisterWorkflowWithOptions(instance.Wake, workflow.RegisterOptions{Name: instance.WakeWorkflowName})
			r.RegisterWorkflowWithOptions(pool.WarmWindow, workflow.RegisterOptions{Name: pool.WarmWindowWorkflowName})
			r.RegisterWorkflowWithOptions(lease.ScheduledSleep, workflow.RegisterOptions{Name: pool.ScheduledSleepWorkflowName})
			r.RegisterWorkflowWithOptions(lease.ReapOrphans, workflow.RegisterOptions{Name: lease.OrphanReaperWorkflowName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// TestHistoriesCarryNoSecrets decodes every payload of the recorded histories (the lease's
// included) and checks that no key material or kubeconfig is in them: workflows carry
// references to sealed credentials, never the credentials.
func TestHistoriesCarryNoSecrets(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	payload := regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)
	decoded := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range payload.FindAllStringSubmatch(string(raw), -1) {
			data, err := base64.StdEncoding.DecodeString(m[1])
			if err != nil {
				continue
			}
			decoded++
			for _, secret := range []string{"PRIVATE KEY", "client-key-data", "client-certificate-data", "BEGIN CERTIFICATE"} {
				assert.NotContains(t, string(data), secret, "%s carries %s", f, secret)
			}
		}
	}
	assert.Greater(t, decoded, 20, "payloads were found and decoded")
}
