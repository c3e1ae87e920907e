package server_test

import (
	"context"
	"encoding/json"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// A warm bind answers Bound before the lease's workflow exists (the pool starts it as a child a
// moment later; on a loaded engine, seconds later). A release sent in that window must not be
// answered 204 and dropped — `make bench` at 50 clients found a lease whose workflow started 19 s
// after its release was "accepted", holding its cluster for the whole TTL — nor a heartbeat be
// told the lease ended: both answer 503 (try again), and once the workflow runs, the release
// reaches it. Real Temporal, real worker, real store.
func TestARequestToABoundLeaseWaitsForItsWorkflowOrSaysTryAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp, st, s := serverWithHeldPool(t, "ls", func(s *server.Server) { s.LeaseStartGrace = 300 * time.Millisecond })
	h := s.Handler()
	const id = "lease-not-started"
	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: id, Pool: "ls", Principal: "anonymous", Phase: api.LeaseBound,
		TTL: time.Hour, InstanceID: "ls-1"}))
	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}

	rec := do("DELETE", "/v1/leases/"+id)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a release the workflow cannot receive yet is not accepted: %s", rec.Body.String())
	var eb api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
	assert.Equal(t, api.ReasonDegraded, eb.Reason)
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	rec = do("POST", "/v1/leases/"+id+"/heartbeat")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "the lease has not ended: %s", rec.Body.String())

	releaseOnceStarted(t, tmp, s, "ls", id)
}

// releaseOnceStarted starts the lease's workflow (as the pool's child would): the client's
// retried release reaches it, answered 204, and the workflow ends.
func releaseOnceStarted(t *testing.T, tmp *testsuite.Temporal, s *server.Server, poolName, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := lease.Start(ctx, tmp.Client, poolName, lease.Input{LeaseID: id, Pool: poolName, Principal: "anonymous",
		LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour}}, false)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/leases/"+id, nil))
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, tmp.Client.GetWorkflow(waitCtx, id, "").Get(waitCtx, nil), "the release reached the lease's workflow, which ended")
}

// The review's item 2: after a warm bind whose kubeconfig could not be minted the store row is
// still Pending while the pool starts the lease's workflow. A release in that window was
// answered 204 ("ended": NotFound read as not running) and lost; it must answer 503 (try
// again) and reach the workflow once it runs, as for a Bound row.
func TestAReleaseOfAPendingLeaseWithoutItsWorkflowSaysTryAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp, st, s := serverWithHeldPool(t, "lp", func(s *server.Server) { s.LeaseStartGrace = 300 * time.Millisecond })
	const id = "lease-pending-not-started"
	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: id, Pool: "lp", Principal: "anonymous", Phase: api.LeasePending,
		TTL: time.Hour}))
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/leases/"+id, nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a release the workflow cannot receive yet is not accepted: %s", rec.Body.String())
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	releaseOnceStarted(t, tmp, s, "lp", id)
}
