package instance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/worker"
)

// BackendFreeze and BackendThaw against a real local instance: frozen, the backend reports it
// Frozen and its health check passes; thawed, Ready again. An unknown instance is a non-retryable InstanceNotFound.
func TestFreezeAndThawActivities(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control-plane processes; skipped with -short")
	}
	probe := filepath.Join(local.FreezerRoot, fmt.Sprintf("kobe-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("needs a writable cgroup v1 freezer at %s: %v", local.FreezerRoot, err)
	}
	_ = os.Remove(probe)
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	b, err := local.New(local.Config{StateDir: t.TempDir(), HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	ctx := context.Background()
	id := "freeze-activity"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	spec := backends.InstanceSpec{ID: id, Pool: "p", KubernetesVersion: "v1.37.2"}
	_, err = b.Create(ctx, spec)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["local"] = b
	acts.RegisterActivities(env)

	_, err = env.ExecuteActivity("BackendFreeze", instance.BackendRequest{Backend: "local", Spec: spec})
	require.NoError(t, err)
	got, err := b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseFrozen, got.Phase)
	// A frozen spare does not answer its API; its health check (the pool's, every 30 s) passes
	// on its processes being there instead of failing on a /readyz that cannot answer.
	res, err := env.ExecuteActivity("CheckHealth", instance.HealthRequest{Backend: "local", InstanceIDs: []string{id}})
	require.NoError(t, err)
	var health []instance.HealthResult
	require.NoError(t, res.Get(&health))
	require.Len(t, health, 1)
	assert.True(t, health[0].Healthy, "a frozen instance is healthy: %s", health[0].Message)

	_, err = env.ExecuteActivity("BackendThaw", instance.BackendRequest{Backend: "local", Spec: spec})
	require.NoError(t, err)
	got, err = b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseReady, got.Phase)

	_, err = env.ExecuteActivity("BackendThaw", instance.BackendRequest{Backend: "local", Spec: backends.InstanceSpec{ID: "no-such-instance"}})
	nonRetryable(t, err, "InstanceNotFound")
}

// A backend without the Freezer capability: BackendFreeze fails at once, non-retryable.
func TestFreezeOfABackendThatCannot(t *testing.T) {
	env := activityEnv(t)
	_, err := env.ExecuteActivity("BackendFreeze", instance.BackendRequest{Backend: "fake", Spec: backends.InstanceSpec{ID: "i1"}})
	nonRetryable(t, err, instance.ErrCannotFreeze)
	assert.Contains(t, err.Error(), `backend "fake" cannot freeze instances`)
}
