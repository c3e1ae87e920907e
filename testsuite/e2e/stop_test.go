package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	localbackend "github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// shutdownNoise are the log lines of a part that still talks to Temporal while it stops: a
// worker polling, or a client dialling a frontend that is gone.
var shutdownNoise = []string{"dial error", "connection refused", "Failed to poll", "graceful_stop"}

// noiseAfterSignal returns the shutdownNoise lines of a kobe log after its "shutting down".
func noiseAfterSignal(t *testing.T, log string) []string {
	lines := strings.Split(log, "\n")
	start := -1
	for i, l := range lines {
		if strings.Contains(l, "shutting down") {
			start = i
			break
		}
	}
	require.GreaterOrEqual(t, start, 0, "no 'shutting down' line in the log:\n%s", log)
	var noisy []string
	for _, l := range lines[start+1:] {
		for _, n := range shutdownNoise {
			if strings.Contains(l, n) {
				noisy = append(noisy, l)
				break
			}
		}
	}
	return noisy
}

// TestDevStopsCleanlyOnSIGINT: Ctrl-C of `kobe dev` stops its workers before the embedded
// Temporal, so nothing in the log after the signal is a worker or client failing to reach it,
// and the process exits 0.
func TestDevStopsCleanlyOnSIGINT(t *testing.T) {
	state := t.TempDir()
	ports := newDevPorts(t)
	env := ownCLIConfig(t)
	dev := startKobe(t, env, append(ports.args(state), "--ui-port", "0")...)
	waitReady(t, ports.apiURL(), 90*time.Second)

	// One doctor run: the worker has run workflow and activity tasks and its pollers are parked
	// in long polls when the signal comes. Its token is in the context dev wrote.
	out, errOut, code := kobeCLI(t, env, "doctor", "--server", ports.apiURL())
	require.Equal(t, 0, code, "doctor\nstdout:\n%s\nstderr:\n%s", out, errOut)

	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGINT))
	exit := dev.wait(t, 2*time.Minute)
	stdout, stderr := dev.output(t)
	require.Equal(t, 0, exit, "exit code after SIGINT\nstderr:\n%s", stderr)

	noisy := noiseAfterSignal(t, stderr)
	assert.Empty(t, noisy, "%d log lines after the signal show a part still talking to a stopped Temporal", len(noisy))
	assert.Contains(t, stderr, "\tstopped", "the log ends with the stop")
	// No local cluster was created: the stop says nothing keeps running.
	assert.NotContains(t, stdout, "keep running")
}

// TestDevDownDeletesEveryCluster is the life of a dev box's clusters across a stop: `kobe dev`
// with its default pool and one Bound lease; Ctrl-C says how many local clusters keep running
// (they do); `kobe dev --down` on the same state dir releases the lease, deletes the pool and
// waits until every cluster is torn down: no kube-apiserver or kine of the state dir remains
// and the store holds no instance, pool or active lease.
func TestDevDownDeletesEveryCluster(t *testing.T) {
	tools := localbackend.Tools{Dir: localbackend.DefaultToolsDir()}
	if len(tools.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` or set KOBE_TOOLS_DIR", tools.Dir)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	t.Cleanup(func() {
		if left := leaks.KillNaming(stateDir + "/"); len(left) > 0 {
			t.Logf("killed the clusters the test left: %v", left)
		}
	})
	ports := newDevPorts(t)
	args := []string{"dev", "--state-dir", stateDir, "--ui-port", "0",
		"--api-address", fmt.Sprintf("127.0.0.1:%d", ports.api), "--temporal-port", fmt.Sprint(ports.temporal)}
	env := []string{"KOBE_CONFIG=" + filepath.Join(t.TempDir(), "config.yaml"), "KOBE_SERVER=", "KOBE_TOKEN="}
	dev := startKobe(t, env, args...)
	waitReady(t, ports.apiURL(), 2*time.Minute)

	pool := func() api.PoolView {
		out, _, code := kobeCLI(t, env, "pool", "get", "dev", "-o", "json")
		var pv api.PoolView
		if code != 0 || json.Unmarshal([]byte(out), &pv) != nil {
			return api.PoolView{}
		}
		return pv
	}
	require.Eventually(t, func() bool { return pool().Ready == 2 }, 4*time.Minute, time.Second, "the dev pool warms up")
	out, errOut, code := kobeCLI(t, env, "lease", "create", "dev", "--wait", "--ttl", "1h", "-o", "json")
	require.Equal(t, 0, code, "lease create: %s\n%s", out, errOut)
	var lease api.Lease
	require.NoError(t, json.Unmarshal([]byte(out), &lease), out)
	require.Equal(t, api.LeaseBound, lease.Phase)
	// Settled: the pool refilled its warm capacity and creates nothing more.
	require.Eventually(t, func() bool { pv := pool(); return pv.Ready == 2 && pv.Leased == 1 && pv.Creating == 0 },
		4*time.Minute, time.Second, "the pool refills after the lease")

	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 0, dev.wait(t, 2*time.Minute))
	stdout, stderr := dev.output(t)
	assert.Empty(t, noiseAfterSignal(t, stderr), "the stop with clusters and a lease is clean too")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows := func() []store.Instance {
		s, err := store.Open(ctx, "sqlite://"+filepath.Join(stateDir, "kobe.db"))
		require.NoError(t, err)
		defer s.Close()
		ins, err := s.ListInstances(ctx, store.InstanceFilter{})
		require.NoError(t, err)
		return ins
	}
	kept := rows()
	require.Len(t, kept, 3, "two warm members and the leased one")
	assert.Contains(t, stdout, "3 local clusters keep running and are re-adopted at the next start; `kobe dev --down` deletes them")
	apiservers := func() []leaks.Process { return leaks.Named(leaks.ProcessesNaming(stateDir+"/"), "kube-apiserver") }
	kines := func() []leaks.Process { return leaks.Named(leaks.ProcessesNaming(stateDir+"/"), "kine") }
	assert.Len(t, apiservers(), 3, "the clusters outlive kobe dev")

	down := startKobe(t, env, "dev", "--state-dir", stateDir, "--down")
	downCode := down.wait(t, 10*time.Minute)
	dout, derr := down.output(t)
	require.Equal(t, 0, downCode, "kobe dev --down\nstdout:\n%s\nstderr:\n%s", dout, derr)
	t.Logf("kobe dev --down:\n%s", dout)
	assert.Contains(t, dout, "released lease "+lease.ID)
	assert.Contains(t, dout, "pool dev: deleted")
	assert.Contains(t, dout, "deleted 3 cluster(s) of 1 pool(s), released 1 lease(s)")

	assert.Empty(t, apiservers(), "no kube-apiserver of the state dir remains")
	assert.Empty(t, kines(), "no kine of the state dir remains")
	assert.Empty(t, rows(), "the store holds no instance")
	s, err := store.Open(ctx, "sqlite://"+filepath.Join(stateDir, "kobe.db"))
	require.NoError(t, err)
	defer s.Close()
	pools, err := s.ListPools(ctx)
	require.NoError(t, err)
	assert.Empty(t, pools, "the pool is deleted")
	l, err := s.GetLease(ctx, lease.ID)
	require.NoError(t, err)
	assert.Equal(t, api.LeaseReleased, l.Phase)
}
