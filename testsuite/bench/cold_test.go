package bench

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends/local"
)

// The memory baseline of a warm instance: a real etcd + kube-apiserver started the envtest way,
// kept, paused (no CPU while paused), measured after it runs again, and gone after Stop.
func TestEnvtestPairKeptPausedAndMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real etcd and kube-apiserver processes; skipped with -short")
	}
	tools := local.Tools{Dir: local.DefaultToolsDir()}
	etcd, err := tools.Newest("etcd", "etcd")
	require.NoError(t, err, "etcd is built by `make tools` (KOBE_TOOLS_DIR=%s)", tools.Dir)
	version := NewestVersion(tools.KubernetesVersions())
	require.NotEmpty(t, version, "no kube-apiserver built under %s: run `make tools`", tools.Dir)
	apiserver, err := tools.Kubernetes(version, "kube-apiserver")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "envtest")
	e, d, err := StartEnvtest(ctx, etcd, apiserver, dir)
	require.NoError(t, err)
	defer e.Stop()
	assert.Positive(t, d)
	pids := e.PIDs()
	require.Contains(t, pids, "etcd")
	require.Contains(t, pids, "kube-apiserver")

	require.NoError(t, e.Pause())
	for name, pid := range pids {
		assert.Equal(t, "T", procState(t, pid), "%s is stopped while paused", name)
	}
	cpu0 := cpuOf(t, pids)
	time.Sleep(2 * time.Second)
	assert.Equal(t, cpu0, cpuOf(t, pids), "no CPU used while paused")

	m, err := MeasureEnvtest(ctx, e, time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, m.Instances)
	assert.Equal(t, []string{"etcd", "kube-apiserver"}, m.Components)
	// A real kube-apiserver holds tens of MiB at least; the sum is its parts.
	assert.Greater(t, m.RSSMiBByComponent["kube-apiserver"], 50.0)
	assert.Greater(t, m.RSSMiBByComponent["etcd"], 5.0)
	assert.InDelta(t, m.RSSMiB, m.RSSMiBByComponent["etcd"]+m.RSSMiBByComponent["kube-apiserver"], 0.2)
	assert.Positive(t, m.PSSMiB)
	for name, pid := range pids {
		assert.Equal(t, "T", procState(t, pid), "%s is paused again after the measurement", name)
	}

	e.Stop()
	for name, pid := range pids {
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "%s (pid %d) is gone after Stop", name, pid)
	}
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "Stop removes the directory")
	e.Stop() // twice is harmless
}

// procState is a process's state letter (R, S, T for stopped…).
func procState(t *testing.T, pid int) string {
	t.Helper()
	state, err := ReadState(pid)
	require.NoError(t, err)
	return state
}

func cpuOf(t *testing.T, pids map[string]int) time.Duration {
	t.Helper()
	var total time.Duration
	for _, pid := range pids {
		d, err := ReadCPU(pid)
		require.NoError(t, err)
		total += d
	}
	return total
}
