package service_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// An extension of a lease whose cluster died under it (found by the soak in CI: the extend
// reached IssueLeaseCredentials just as the member's kube-apiserver was killed) is refused with
// the cause — 409 health_failed, naming the broken instance — and changes nothing. It used to
// answer 503 degraded, which says kobe itself failed and asks the caller to retry, forever.
//
// The lease is bound through the queue (the pool creates its member on demand), so it has no
// prepared credential and its extension issues a new one from the instance.
func TestExtendOfALeaseWhoseClusterDied(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	c := devConfig(t)
	p := start(t, c, config.ModeDev)
	token, err := os.ReadFile(p.AdminTokenFile)
	require.NoError(t, err)
	admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(token))}

	status, eb, _ := admin.do("PUT", "/v1/pools/ondemand", `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: ondemand}
spec:
  ttl: 30m
  maxExtensions: 3
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 0, maxClusters: 1}
`, nil)
	require.Contains(t, []int{200, 201, 202}, status, "%+v", eb)

	var l api.Lease
	status, eb, _ = admin.do("POST", "/v1/leases", `{"pool":"ondemand","ttl":"30m"}`, &l)
	require.Equal(t, 202, status, "no warm member: the lease queues: %+v", eb)
	deadline := time.Now().Add(3 * time.Minute)
	for l.Phase == api.LeasePending && time.Now().Before(deadline) {
		status, eb, _ = admin.do("GET", "/v1/leases/"+l.ID+"?wait=20s", nil, &l)
		require.Equal(t, 200, status, "%+v", eb)
	}
	require.Equal(t, api.LeaseBound, l.Phase)
	require.NotNil(t, l.ExpiresAt)
	expires := *l.ExpiresAt

	// Its kube-apiserver dies, as a crash would kill it.
	// (Its instance directory, …/instances/<id>/, is in every argument list of its processes.)
	apiserver := func() []leaks.Process {
		return leaks.Named(leaks.ProcessesNaming("/"+l.ClusterName+"/"), "kube-apiserver")
	}
	require.Len(t, apiserver(), 1, "the lease's kube-apiserver (instance %s)", l.ClusterName)
	require.NoError(t, syscall.Kill(apiserver()[0].PID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return len(apiserver()) == 0 }, 30*time.Second, 50*time.Millisecond)

	status, eb, hdr := admin.do("PATCH", "/v1/leases/"+l.ID, `{"extendTtl":"10m"}`, nil)
	assert.Equal(t, 409, status, "the extension cannot be made: %+v", eb)
	assert.Equal(t, api.ReasonHealthFailed, eb.Reason)
	assert.Contains(t, eb.Detail, l.ClusterName, "the answer names the broken cluster")
	assert.Empty(t, hdr.Get("Retry-After"), "nothing to retry")

	// Nothing changed: the expiry stands and no extension was spent.
	var after api.Lease
	status, _, _ = admin.do("GET", "/v1/leases/"+l.ID, nil, &after)
	require.Equal(t, 200, status)
	require.NotNil(t, after.ExpiresAt)
	assert.True(t, after.ExpiresAt.Equal(expires), "expiry %s, was %s", after.ExpiresAt, expires)
}
