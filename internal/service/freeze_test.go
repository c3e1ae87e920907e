package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// TestFrozenSparesOnDev: a pool of 3 warm local clusters keeping 1 running freezes the other 2
// (their processes in a FROZEN freezer cgroup, using no CPU); a lease binds the running one at
// once (200 Bound, a kubeconfig that works), and the pool then thaws a spare off the bind's
// path, so that one member runs again.
func TestFrozenSparesOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	probe := filepath.Join(local.FreezerRoot, fmt.Sprintf("kobe-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("needs a writable cgroup v1 freezer at %s: %v", local.FreezerRoot, err)
	}
	_ = os.Remove(probe)
	c := devConfig(t)
	p := start(t, c, config.ModeDev)
	token, err := os.ReadFile(p.AdminTokenFile)
	require.NoError(t, err)
	admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(token))}
	status, eb, _ := admin.do("PUT", "/v1/pools/frz", `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: frz}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 3, maxClusters: 5, thawedSpares: 1}
`, nil)
	require.Equal(t, 201, status, "%+v", eb)

	poolStatus := func() pool.Status {
		var st pool.Status
		resp, err := p.Temporal.QueryWorkflow(context.Background(), pool.WorkflowID("frz"), "", pool.QueryPoolStatus)
		if err == nil {
			_ = resp.Get(&st)
		}
		return st
	}
	byFreeze := func(st pool.Status) (running, frozen []string) {
		for _, m := range st.Members {
			switch {
			case m.Phase == pool.MemberReady && m.Freeze == pool.Running:
				running = append(running, m.ID)
			case m.Phase == pool.MemberReady && m.Freeze == pool.Frozen:
				frozen = append(frozen, m.ID)
			}
		}
		return running, frozen
	}
	var running, frozen []string
	require.Eventually(t, func() bool {
		st := poolStatus()
		running, frozen = byFreeze(st)
		return st.Creating == 0 && len(running) == 1 && len(frozen) == 2 && st.Frozen == 2
	}, 6*time.Minute, 200*time.Millisecond, "3 Ready: 1 running, 2 frozen (%v)", poolStatus().Members)

	instanceDir := func(id string) string { return filepath.Join(p.StateDir, "local", "instances", id) + "/" }
	for _, id := range frozen {
		ps := leaks.ProcessesNaming(instanceDir(id))
		require.NotEmpty(t, ps, "the processes of %s", id)
		cpu0 := processCPU(t, ps)
		for _, proc := range ps {
			assert.Equal(t, "FROZEN", freezerStateOf(t, proc.PID), "%s's %s (pid %d)", id, proc.Name, proc.PID)
		}
		time.Sleep(time.Second) // a window in which a running apiserver always uses some CPU
		assert.Equal(t, cpu0, processCPU(t, ps), "a frozen member's processes use no CPU")
	}

	var l api.Lease
	status, eb, _ = admin.do("POST", "/v1/leases", `{"profile":"frz","ttl":"30m"}`, &l)
	require.Equal(t, 200, status, "a warm bind of the running member answers at once: %+v", eb)
	require.Equal(t, api.LeaseBound, l.Phase)
	assert.Equal(t, running[0], l.ClusterName, "the claim took the running member, not a frozen one")
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(l.Kubeconfig))
	require.NoError(t, err)
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.Discovery().ServerVersion()
	require.NoError(t, err, "the kubeconfig works on its first request")

	// Off the bind's path, the pool thaws one of the two frozen spares.
	require.Eventually(t, func() bool {
		r, _ := byFreeze(poolStatus())
		for _, id := range r {
			if slices.Contains(frozen, id) {
				return true
			}
		}
		return false
	}, 3*time.Minute, 100*time.Millisecond, "a frozen spare thawed after the claim (%v)", poolStatus().Members)
}

// freezerStateOf is the freezer.state of the cgroup pid is in.
func freezerStateOf(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "freezer" {
			state, err := os.ReadFile(filepath.Join(local.FreezerRoot, f[2], "freezer.state"))
			require.NoError(t, err)
			return strings.TrimSpace(string(state))
		}
	}
	t.Fatalf("pid %d is in no freezer cgroup: %s", pid, data)
	return ""
}

// processCPU is the CPU time (utime + stime, in clock ticks) the processes used so far.
func processCPU(t *testing.T, ps []leaks.Process) []string {
	t.Helper()
	var out []string
	for _, proc := range ps {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", proc.PID))
		require.NoError(t, err)
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		require.Greater(t, len(f), 12)
		out = append(out, f[11]+"+"+f[12])
	}
	return out
}
