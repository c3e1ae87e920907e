package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// The new user's experiment of issue 11: `kobe dev`, a warm member's kube-apiserver stops
// answering, then lease. Before health checks the pool kept reporting the dead member Ready and
// handed it to a lease, which stayed Pending for 10 minutes of credential retries. Now the
// member is found by the pool's health check, recycled (health_failed, audited), replaced, and
// the leases that follow get working clusters.
func TestDeadWarmMemberIsReplaced(t *testing.T) {
	d := startCLIDev(t, false)
	env, stateDir := d.env, d.stateDir

	const interval, threshold = 5, 2
	pool := warmPoolOfTwo(t, d, "hc", "{intervalSeconds: 5, failureThreshold: 2}")

	// Stop one member's kube-apiserver (SIGSTOP), as a wedged process would: it still runs, so
	// its backend reports nothing (a killed one is found at once: the next test), and only the
	// health checks can find it.
	victim := signalOneAPIServer(t, stateDir, syscall.SIGSTOP)
	killed := time.Now()

	// The pool sees it: unhealthy, then recycled and its directory gone.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(leaks.InstancesDir(stateDir), victim))
		return os.IsNotExist(err)
	}, 3*time.Minute, 500*time.Millisecond, "the dead member is torn down")
	found := time.Since(killed)
	require.Eventually(t, func() bool { pv := pool(); return pv.Ready == 2 && pv.Unhealthy == 0 }, 4*time.Minute, time.Second,
		"the pool is back at its size")
	t.Logf("dead member %s torn down %s after the kill (interval %ds × threshold %d), pool back at size after %s",
		victim, found.Round(time.Second), interval, threshold, time.Since(killed).Round(time.Second))

	// The next leases get working clusters.
	for i := range 2 {
		out, errOut, code := kobeCLI(t, env, "run", "hc", "--ttl", "5m", "--", "kubectl", "get", "ns")
		require.Equal(t, 0, code, "lease %d: %s\n%s", i, out, errOut)
		assert.Contains(t, out, "kube-system")
	}

	unhealthy := unhealthyEvents(t, env, "hc", victim)
	require.Len(t, unhealthy, 1, "the recycle is audited")
	assert.True(t, strings.Contains(unhealthy[0].Detail["message"].(string), "health checks"), "%v", unhealthy[0].Detail)
}

// The new user's experiment of issue 39: a pool of 2 prepared members, kill -9 the
// kube-apiserver of one, then lease twice at once. A warm bind takes a Ready member without
// calling it, so before, the pool kept the dead member Ready until its health checks failed (an
// interval × threshold later) and the second lease got the dead cluster. Now the member's host
// tells the pool the moment the process exits; the health interval here is long, so only that
// report can be what finds it.
func TestAWarmBindNeverHandsOutAKilledMember(t *testing.T) {
	d := startCLIDev(t, false)
	env, stateDir := d.env, d.stateDir
	pool := warmPoolOfTwo(t, d, "down", "{intervalSeconds: 3600, failureThreshold: 2}")

	victim := signalOneAPIServer(t, stateDir, syscall.SIGKILL)
	killed := time.Now()

	// The pool stops counting it Ready long before a health check could (one an hour here).
	require.Eventually(t, func() bool { return pool().Ready < 2 }, 30*time.Second, 100*time.Millisecond,
		"the pool still counts the killed member Ready: a warm bind would hand it out")
	t.Logf("the pool let the killed member %s go %s after the kill", victim, time.Since(killed).Round(time.Millisecond))

	// Both leases get working clusters (the second waits for the replacement if it must).
	for i := range 2 {
		out, errOut, code := kobeCLI(t, env, "run", "down", "--ttl", "5m", "--", "kubectl", "get", "ns")
		require.Equal(t, 0, code, "lease %d: %s\n%s", i, out, errOut)
		assert.Contains(t, out, "kube-system")
	}

	unhealthy := unhealthyEvents(t, env, "down", victim)
	require.Len(t, unhealthy, 1, "the recycle is audited")
	assert.Contains(t, unhealthy[0].Detail["message"], "stopped serving")
}

// warmPoolOfTwo applies a local pool of 2 with the given spec.healthCheck on the dev and waits
// until both members are Ready; it returns a function that reads the pool's view.
func warmPoolOfTwo(t *testing.T, d *cliDev, name, healthCheck string) func() api.PoolView {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: `+name+`}
spec:
  size: 2
  ttl: 10m
  backend: {type: local}
  cluster: {version: v1.37.2}
  healthCheck: `+healthCheck+`
`), 0o644))
	out, errOut, code := kobeCLI(t, d.env, "pool", "apply", "-f", manifest)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	pool := func() api.PoolView {
		out, _, code := kobeCLI(t, d.env, "pool", "get", name, "-o", "json")
		var pv api.PoolView
		if code != 0 || json.Unmarshal([]byte(out), &pv) != nil {
			return api.PoolView{}
		}
		return pv
	}
	require.Eventually(t, func() bool { return pool().Ready == 2 }, 4*time.Minute, time.Second,
		"the pool warms up; kobe dev output: %v", func() string { o, e := d.dev.output(t); return o + e }())
	return pool
}

// signalOneAPIServer sends sig to the kube-apiserver of one of the dev's two instances and
// returns that instance's id.
func signalOneAPIServer(t *testing.T, stateDir string, sig syscall.Signal) string {
	t.Helper()
	dirs, err := os.ReadDir(leaks.InstancesDir(stateDir))
	require.NoError(t, err)
	require.Len(t, dirs, 2)
	victim := dirs[0].Name()
	apiservers := leaks.Named(leaks.ProcessesNaming(filepath.Join(leaks.InstancesDir(stateDir), victim)+"/"), "kube-apiserver")
	require.Len(t, apiservers, 1, "the victim's kube-apiserver")
	require.NoError(t, syscall.Kill(apiservers[0].PID, sig))
	return victim
}

// unhealthyEvents is the pool's audit events that recorded the instance Unhealthy.
func unhealthyEvents(t *testing.T, env []string, pool, instanceID string) []api.AuditEvent {
	t.Helper()
	out, _, code := kobeCLI(t, env, "audit", "--pool", pool, "-o", "json")
	require.Equal(t, 0, code, out)
	var evs []api.AuditEvent
	var wrapped api.AuditList
	if json.Unmarshal([]byte(out), &evs) != nil {
		require.NoError(t, json.Unmarshal([]byte(out), &wrapped), out)
		evs = wrapped.Items
	}
	var unhealthy []api.AuditEvent
	for _, e := range evs {
		if e.Action == "instance.Unhealthy" && e.Target == instanceID {
			unhealthy = append(unhealthy, e)
		}
	}
	return unhealthy
}
