package instance_test

import (
	"context"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
)

// The two activities against a real local instance, reached the way Provision reaches it: by
// backend name and instance id, the admin kubeconfig coming from the backend.
func TestAddonsAndGatesActivitiesOnARealInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control-plane processes; skipped with -short")
	}
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	b, err := local.New(local.Config{StateDir: t.TempDir(), HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	ctx := context.Background()
	id := "acts"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	_, err = b.Create(ctx, backends.InstanceSpec{ID: id, Pool: "readiness", KubernetesVersion: "v1.37.2",
		Options: []byte(`{"components":["apiserver","controller-manager","scheduler","kwok"],"nodes":1}`)})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	acts := worker.NewActivities(nil, zap.NewNop())
	acts.Backends["local"] = b
	acts.RegisterActivities(env)

	_, err = env.ExecuteActivity("ApplyAddons", instance.AddonsRequest{Backend: "local", InstanceID: id,
		Addons: []poolspec.Addon{{Name: "agent", Manifest: `
apiVersion: v1
kind: ServiceAccount
metadata: {name: agent, namespace: tools}
---
apiVersion: v1
kind: Namespace
metadata: {name: tools}
`}}})
	require.NoError(t, err)

	gates := []poolspec.ReadinessGate{
		{Type: "NodesReady", Count: 1},
		{Type: "InClusterToken", Namespace: "tools", ServiceAccount: "agent"},
		{Type: "SchedulingProbe", Namespace: "default"},
	}
	_, err = env.ExecuteActivity("WaitReadinessGates", instance.GatesRequest{Backend: "local", InstanceID: id,
		Gates: gates, Deadline: time.Now().Add(3 * time.Minute)})
	require.NoError(t, err)

	// A gate that cannot pass: at the deadline, a final error naming it and why.
	_, err = env.ExecuteActivity("WaitReadinessGates", instance.GatesRequest{Backend: "local", InstanceID: id,
		Gates:    append(gates, poolspec.ReadinessGate{Type: "DeploymentReady", Namespace: "tools", Name: "absent"}),
		Deadline: time.Now().Add(5 * time.Second)})
	nonRetryable(t, err, instance.ErrGatesNotPassed)
	assert.Contains(t, err.Error(), "instance acts: 1 of 4 readiness gates not passed: DeploymentReady tools/absent: deployment tools/absent: not found")
}
