package testsuite_test

import (
	"context"
	"encoding/json"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// The review's item 5 on real parts: a lease of a real local cluster, bound the slow way (so
// that each extension issues its credential through the cluster's API server, as a lease bound
// from the queue does), is put to sleep. Through kobe's API, its extension and its kubeconfig
// answer 409 sleeping within seconds, saying how to wake it, and the lease expires at its TTL.
// Before the fix the extension was accepted and its credential's issuance retried against the
// stopped API server for 10 minutes: the PATCH got no answer (here: 503 when the request's
// 30 s ran out), and the lease did not expire while the issuance ran.
func TestSleepingLeaseRefusesExtendAndKubeconfigThroughTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("a real cluster; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: drowsy}
spec:
  ttl: 10m
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
  scaling: {minReady: 1, maxClusters: 2, resumeTimeout: 2m}
`)
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("drowsy"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "drowsy").Ready == 1 }, 3*time.Minute, 200*time.Millisecond)

	// The principal is the one kobe's API gives a request without authentication. The TTL
	// leaves time for the bind and the sleep, and is short enough to wait for.
	const id = "lease-drowsy"
	const ttl = 90 * time.Second
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"}, lease.WorkflowName,
		lease.Input{LeaseID: id, Pool: "drowsy", Principal: "anonymous",
			LeaseTerms: poolspec.LeaseTerms{TTL: ttl, MaxTTL: 10 * time.Minute, MaxExtensions: 2}})
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, id); return lv.Phase == api.LeaseBound }, time.Minute, 20*time.Millisecond)
	expiresAt := lv.ExpiresAt
	var asleep lease.View
	require.Eventually(t, func() bool { // not_ready a moment after Bound: asked again
		h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateSleep,
			Args: []any{lease.SleepRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, &asleep)
		}
		if reason, refused := lease.IsSleepRejection(err); refused && reason == api.ReasonNotReady {
			return false
		}
		require.NoError(t, err)
		return true
	}, time.Minute, 50*time.Millisecond)
	require.True(t, asleep.Sleeping)
	require.True(t, time.Now().Before(expiresAt.Add(-20*time.Second)), "the sleep took too long for the test: %s left", time.Until(expiresAt))

	accessPolicy, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read]}\n"))
	require.NoError(t, err)
	h := (&server.Server{Store: s, Temporal: tmp.Client, TaskQueue: "kobe", InsecureNoAuth: true, Policy: accessPolicy,
		Secrets: acts.Secrets}).Handler()
	call := func(method, path, body string) (*httptest.ResponseRecorder, time.Duration) {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second) // a client that gives up
		defer rcancel()
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(rctx, method, path, strings.NewReader(body)))
		return rec, time.Since(start)
	}
	refusedSleeping := func(what string, rec *httptest.ResponseRecorder, took time.Duration) {
		t.Helper()
		t.Logf("%s: %d after %s: %s", what, rec.Code, took.Round(time.Millisecond), rec.Body.String())
		require.Equal(t, http.StatusConflict, rec.Code, "%s: %s", what, rec.Body.String())
		var eb api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
		assert.Equal(t, api.ReasonSleeping, eb.Reason, what)
		assert.Contains(t, eb.Detail, "kobe lease wake "+id, "%s: the detail says how to wake it", what)
		assert.Less(t, took, 5*time.Second, "%s: at once", what)
	}

	rec, took := call("PATCH", "/v1/leases/"+id, `{"extendTtl":"5m"}`)
	refusedSleeping("PATCH (extend)", rec, took)
	rec, took = call("GET", "/v1/leases/"+id+"/kubeconfig", "")
	refusedSleeping("GET kubeconfig", rec, took)
	rec, _ = call("GET", "/v1/leases/"+id, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var l api.Lease
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	assert.True(t, l.Sleeping)
	assert.Equal(t, []string{server.CapRelease}, l.Capabilities, "asleep, it can only be released (or woken)")

	// The lease expires at its TTL, asleep, and is torn down.
	var final lease.View
	require.NoError(t, tmp.Client.GetWorkflow(ctx, id, "").Get(ctx, &final))
	ended := time.Now()
	t.Logf("the lease ended %s after its expiry", ended.Sub(expiresAt).Round(time.Millisecond))
	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.Equal(t, 0, final.Extensions, "the refused extension changed nothing")
	assert.True(t, expiresAt.Equal(final.ExpiresAt), "%s, %s", expiresAt, final.ExpiresAt)
	assert.Less(t, ended.Sub(expiresAt), 10*time.Second, "the lease ended at its TTL")
	row, err := s.GetLease(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, api.LeaseExpired, row.Phase)
}
