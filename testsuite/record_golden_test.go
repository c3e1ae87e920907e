package testsuite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
	"github.com/kunobi-ninja/kobe/worker"
)

// TestRecordGoldenProvisionHistory records a Provision and its Teardown of a member of a pool
// with golden templates on the machine's PostgreSQL: the template's build (EnsureGoldenTemplate),
// the member created from it without its addons, and its teardown (which drops the template).
// Files are written only when absent: a recorded history is never replaced.
func TestRecordGoldenProvisionHistory(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	dir := filepath.Join("..", "worker", "testdata", "histories")
	provisionFile, teardownFile := filepath.Join(dir, "provision-golden-"+recordVersion+".json"), filepath.Join(dir, "teardown-golden-"+recordVersion+".json")
	if _, err := os.Stat(provisionFile); err == nil {
		t.Skipf("%s is recorded already", provisionFile)
	}
	state := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(state, "secrets", "pg"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(state, "secrets", "pg", datastore.DefaultSecretKey), []byte(dbtest.PostgresAdminURL(t)), 0o600))
	t.Setenv("KOBE_SECRETS_DIR", filepath.Join(state, "secrets"))
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	h, err := worker.StartHost(worker.HostConfig{Client: tmp.Client, Store: s, SharedQueue: "record", StateDir: state, Secrets: secretbox.Random()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.DeleteInstances() })
	t.Cleanup(h.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := backends.InstanceSpec{ID: "recgold-1", Pool: "recgold", KubernetesVersion: "v1.37.2",
		Options: []byte(`{"datastore":{"secretRef":"pg","goldenTemplates":true}}`)}
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-provision-golden", TaskQueue: "record"},
		instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "local", Spec: spec,
			Addons: []poolspec.Addon{{Name: "ns", Manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: golden}\n"}}})
	require.NoError(t, err)
	var res instance.ProvisionResult
	require.NoError(t, run.Get(ctx, &res))
	writeHistory(t, ctx, tmp.Client, "record-provision-golden", provisionFile)
	run, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "record-teardown-golden", TaskQueue: "record"},
		instance.TeardownWorkflowName, instance.TeardownInput{Backend: "local", Spec: spec, Placement: res.Placement})
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	writeHistory(t, ctx, tmp.Client, "record-teardown-golden", teardownFile)
}
