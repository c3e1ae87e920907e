package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
)

// kobeCLI runs the kobe CLI with the context `kobe dev` wrote (no --server, no --token).
func kobeCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(kobeBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

// The CI one-liner against a real `kobe dev`: `kobe run dev -- kubectl get ns` leases a warm
// cluster, runs kubectl with KUBECONFIG set, and releases the lease; Ctrl-C during `kobe run`
// releases it too; every mutation shows in `kobe audit`. The CLI finds the server and its admin
// token through the context `kobe dev` wrote.
func TestKobeRunAgainstDev(t *testing.T) {
	d := startCLIDev(t, true) // the default "dev" pool, two warm clusters
	env, dev := d.env, d.dev
	require.Eventually(t, func() bool {
		out, _, code := kobeCLI(t, env, "pool", "get", "dev", "-o", "json")
		var pv api.PoolView
		return code == 0 && json.Unmarshal([]byte(out), &pv) == nil && pv.Ready == 2
	}, 3*time.Minute, time.Second, "the dev pool warms up; kobe dev output: %v", func() string { o, e := dev.output(t); return o + e }())

	// The one-liner.
	out, errOut, code := kobeCLI(t, env, "run", "dev", "--ttl", "10m", "--", "kubectl", "get", "ns")
	require.Equal(t, 0, code, "kobe run: %s\n%s", out, errOut)
	assert.Contains(t, out, "kube-system", "kubectl listed the cluster's namespaces")
	active := func() []api.Lease {
		out, _, code := kobeCLI(t, env, "lease", "list", "-o", "json")
		require.Equal(t, 0, code, out)
		var ls []api.Lease
		require.NoError(t, json.Unmarshal([]byte(out), &ls), out)
		return ls
	}
	// The list reads the store, which the lease workflow updates a moment after the release.
	require.Eventually(t, func() bool { return len(active()) == 0 }, 30*time.Second, 100*time.Millisecond,
		"the lease was released when kubectl exited")

	// Ctrl-C while the command runs.
	run := exec.Command(kobeBin, "run", "dev", "--", "sleep", "120")
	run.Env = append(os.Environ(), env...)
	require.NoError(t, run.Start())
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	var held api.Lease
	require.Eventually(t, func() bool {
		ls := active()
		if len(ls) == 1 && ls[0].Phase == "Bound" {
			held = ls[0]
			return true
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // sleep has started under kobe run
	require.NoError(t, run.Process.Signal(syscall.SIGINT))
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("kobe run did not exit after SIGINT")
	}
	assert.NotEqual(t, 0, run.ProcessState.ExitCode(), "interrupted")
	require.Eventually(t, func() bool { return len(active()) == 0 }, 30*time.Second, 100*time.Millisecond, "Ctrl-C released the lease")
	out, _, code = kobeCLI(t, env, "lease", "get", held.ID, "-o", "json")
	require.Equal(t, 0, code, out)
	var after api.Lease
	require.NoError(t, json.Unmarshal([]byte(out), &after))
	assert.Contains(t, []api.LeasePhase{api.LeaseReleased, api.LeaseBound}, after.Phase) // Bound until the workflow handles the signal
	require.Eventually(t, func() bool {
		out, _, _ := kobeCLI(t, env, "lease", "get", held.ID, "-o", "json")
		return json.Unmarshal([]byte(out), &after) == nil && after.Phase == "Released"
	}, time.Minute, 200*time.Millisecond)

	// Every mutation of this test is in the audit log.
	out, _, code = kobeCLI(t, env, "audit", "--pool", "dev", "-o", "json")
	require.Equal(t, 0, code, out)
	var evs []api.AuditEvent
	var wrapped api.AuditList
	if json.Unmarshal([]byte(out), &evs) != nil {
		require.NoError(t, json.Unmarshal([]byte(out), &wrapped), out)
		evs = wrapped.Items
	}
	counts := map[string]int{}
	for _, e := range evs {
		counts[e.Action]++
	}
	assert.Equal(t, 2, counts["lease.create"], "%v", counts)
	assert.Equal(t, 2, counts["lease.release"], "%v", counts)
	assert.Equal(t, 2, counts["lease.bound"], "%v", counts)
	assert.Equal(t, 2, counts["lease.released"], "%v", counts)
}
