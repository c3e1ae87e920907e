package instance_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
)

// CheckHealth against a real local instance: healthy while its kube-apiserver serves; once the
// process is killed the check fails saying why, and a lease credential asked of it fails at
// once (non-retryable) instead of being retried for minutes.
func TestHealthOfARealInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control-plane processes; skipped with -short")
	}
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	stateDir := t.TempDir()
	b, err := local.New(local.Config{StateDir: stateDir, HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	ctx := context.Background()
	id := "health"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	_, err = b.Create(ctx, backends.InstanceSpec{ID: id, Pool: "p", KubernetesVersion: "v1.37.2"})
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
	acts.Secrets = secretbox.Random()
	acts.RegisterActivities(env)
	check := func() instance.HealthResult {
		v, err := env.ExecuteActivity("CheckHealth", instance.HealthRequest{Backend: "local", InstanceIDs: []string{id}})
		require.NoError(t, err)
		var res []instance.HealthResult
		require.NoError(t, v.Get(&res))
		require.Len(t, res, 1)
		return res[0]
	}
	assert.Equal(t, instance.HealthResult{InstanceID: id, Healthy: true}, check())

	apiservers := leaks.Named(leaks.ProcessesNaming(filepath.Join(leaks.InstancesDir(stateDir), id)+"/"), "kube-apiserver")
	require.Len(t, apiservers, 1)
	require.NoError(t, syscall.Kill(apiservers[0].PID, syscall.SIGKILL))
	var res instance.HealthResult
	require.Eventually(t, func() bool { res = check(); return !res.Healthy }, time.Minute, 200*time.Millisecond)
	// Either the backend saw the process die or the API stopped answering first.
	assert.Regexp(t, `apiserver|/readyz`, res.Message)
	t.Logf("health check after the kill: %s", res.Message)

	t0 := time.Now()
	_, err = env.ExecuteActivity("IssueLeaseCredentials", lease.CredentialRequest{LeaseID: "lease-x", Backend: "local",
		InstanceID: id, ExpiresAt: time.Now().Add(time.Hour)})
	nonRetryable(t, err, lease.ErrInstanceBroken)
	t.Logf("credential refused in %s: %v", time.Since(t0).Round(time.Millisecond), err)

	// Revoking a credential of the broken instance does not wait for it: the sealed kubeconfig
	// is forgotten and the lease moves on to give the instance back.
	t0 = time.Now()
	_, err = env.ExecuteActivity("RevokeLeaseCredentials", lease.CredentialRequest{LeaseID: "lease-x", Backend: "local", InstanceID: id})
	require.NoError(t, err)
	t.Logf("revoke on the broken instance returned in %s", time.Since(t0).Round(time.Millisecond))
}
