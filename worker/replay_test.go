package worker_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// workflows are the workflow types kobe registers, by name.
var workflows = map[string]any{
	doctor.WorkflowName:               doctor.Doctor,
	instance.ProvisionWorkflowName:    instance.Provision,
	instance.TeardownWorkflowName:     instance.Teardown,
	pool.WorkflowName:                 pool.Pool,
	lease.WorkflowName:                lease.Lease,
	instance.PreflightWorkflowName:    instance.Preflight,
	pool.CertificateSweepWorkflowName: pool.CertificateSweep,
	instance.SleepWorkflowName:        instance.Sleep,
	instance.WakeWorkflowName:         instance.Wake,
	pool.WarmWindowWorkflowName:       pool.WarmWindow,
	pool.ScheduledSleepWorkflowName:   lease.ScheduledSleep,
	lease.OrphanReaperWorkflowName:    lease.ReapOrphans,
}

// TestReplayRecordedHistories replays every history recorded from real runs (see
// testsuite/record_test.go) against today's workflow code: those of every release in the
// supported window (buildinfo.OldestSupported on; v0.1.0 is the baseline, the only one). A
// change that breaks determinism for runs already in flight fails here: guard it with a
// version marker named after the release that adds it (docs/architecture.md, "Releases and
// workflow versions").
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories: run KOBE_RECORD_HISTORIES=1 go test ./testsuite -run TestRecordHistories")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := os.Stat(f)
			require.NoError(t, err)
			r := worker.NewWorkflowReplayer()
			for name, w := range workflows {
				r.RegisterWorkflowWithOptions(w, workflow.RegisterOptions{Name: name})
			}
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// TestHistoriesCoverTheSupportedWindow: every history is named after the release it was
// recorded on (name-<release>.json), within the supported window; every workflow type has a
// history of this release.
func TestHistoriesCoverTheSupportedWindow(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	named := regexp.MustCompile(`-(v\d+\.\d+\.\d+)\.json$`)
	typeName := regexp.MustCompile(`"workflowType":\s*\{\s*"name":\s*"([^"]+)"`)
	current := map[string]bool{}
	for _, f := range files {
		m := named.FindStringSubmatch(filepath.Base(f))
		require.NotNil(t, m, "%s is not named after its release (name-vX.Y.Z.json)", f)
		assert.GreaterOrEqual(t, store.CompareReleases(m[1], buildinfo.OldestSupported), 0,
			"%s was recorded on %s, before the supported window (%s on): remove it", f, m[1], buildinfo.OldestSupported)
		assert.LessOrEqual(t, store.CompareReleases(m[1], buildinfo.Release), 0, "%s is named after a release after this one", f)
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		tm := typeName.FindSubmatch(raw)
		require.NotNil(t, tm, "%s has no workflow type", f)
		require.Contains(t, workflows, string(tm[1]), "%s is of a workflow kobe does not register", f)
		if m[1] == buildinfo.Release {
			current[string(tm[1])] = true
		}
	}
	for name := range workflows {
		assert.True(t, current[name], "no history of %s recorded on %s", name, buildinfo.Release)
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
