package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/instance"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// TestWorkerKilledDuringCreate kills -9 the kobe worker while a local instance is being created,
// starts it again, and checks that the instance ends up ready and recorded — then tears it down
// and checks that nothing is left: no process, no directory, no store row.
func TestWorkerKilledDuringCreate(t *testing.T) {
	tmp := testsuite.StartTemporal(t)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	dsn := "sqlite://" + filepath.Join(dir, "kobe.db")
	s, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer s.Close()

	workerArgs := []string{"worker", "--temporal-address", tmp.Address, "--store", dsn,
		"--state-dir", stateDir, "--metrics-address", "127.0.0.1:0", "--log-level", "warn"}
	w1 := startKobe(t, nil, workerArgs...)

	id := "crash-1"
	spec := backends.InstanceSpec{ID: id, Pool: "e2e", KubernetesVersion: "v1.37.2"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: instance.WorkflowID(id), TaskQueue: "kobe",
	}, instance.ProvisionWorkflowName, instance.ProvisionInput{Backend: "local", Spec: spec})
	require.NoError(t, err)

	// Kill the worker as soon as the instance's processes exist: mid-creation.
	instDir := filepath.Join(stateDir, "local", "instances", id)
	require.Eventually(t, func() bool { return len(leaks.ProcessesNaming(instDir+"/")) > 0 }, 2*time.Minute, 20*time.Millisecond)
	require.NoError(t, w1.cmd.Process.Signal(syscall.SIGKILL))
	<-w1.done
	row, err := s.GetInstance(ctx, id)
	require.NoError(t, err, "the instance was recorded before it was created")
	t.Logf("killed the worker with the instance %s; processes running: %v", row.Phase, leaks.ProcessesNaming(instDir+"/"))

	startKobe(t, nil, workerArgs...)
	var res instance.ProvisionResult
	require.NoError(t, run.Get(ctx, &res), "provisioning completes after the restart")
	assert.Equal(t, backends.PhaseReady, res.Status.Phase)

	row, err = s.GetInstance(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, api.InstanceReady, row.Phase)
	assert.Equal(t, res.Status.Endpoint, row.Endpoint)
	assert.Equal(t, res.Placement.HostID, row.Host)
	procs := leaks.ProcessesNaming(instDir + "/")
	assert.Len(t, leaks.Named(procs, "kube-apiserver"), 1, "one API server, adopted, not duplicated: %v", procs)

	// Tear down: verified gone everywhere.
	td, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "teardown-" + id, TaskQueue: "kobe"},
		instance.TeardownWorkflowName, instance.TeardownInput{Backend: "local", Spec: spec, Placement: res.Placement})
	require.NoError(t, err)
	require.NoError(t, td.Get(ctx, nil))
	assert.Empty(t, leaks.ProcessesNaming(instDir+"/"))
	_, err = os.Stat(instDir)
	assert.True(t, os.IsNotExist(err))
	_, err = s.GetInstance(ctx, id)
	assert.True(t, errors.Is(err, store.ErrNotFound))
	events, err := s.ListEvents(ctx, store.EventFilter{Target: id})
	require.NoError(t, err)
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
	}
	assert.Equal(t, []string{"instance.Creating", "instance.Ready", "instance.Deleting", "instance.deleted"}, actions)
}
