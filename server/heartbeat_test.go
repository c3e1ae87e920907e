package server_test

import (
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// A heartbeat reaches only a lease with an idle timeout: any other lease answers 204 without a
// signal, so that its history does not grow; an ended lease answers 410. Real Temporal, real
// workers, real store.
func TestHeartbeatOnlyForLeasesWithAnIdleTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp, st, s := serverWithHeldPool(t, "hb", nil)
	h := s.Handler()
	for id, idle := range map[string]time.Duration{"lease-idle": 10 * time.Minute, "lease-plain": 0} {
		require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: id, Pool: "hb", Principal: "anonymous", Phase: api.LeasePending, TTL: time.Hour}))
		_, err := lease.Start(ctx, tmp.Client, "hb", lease.Input{LeaseID: id, Pool: "hb", Principal: "anonymous",
			LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour}, IdleTimeout: idle}, false)
		require.NoError(t, err)
	}
	beat := func(id string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/leases/"+id+"/heartbeat", nil))
		return rec.Code
	}
	for range 3 {
		assert.Equal(t, http.StatusNoContent, beat("lease-idle"))
		assert.Equal(t, http.StatusNoContent, beat("lease-plain"))
	}
	assert.Equal(t, 3, heartbeatSignals(t, tmp.Client, "lease-idle"))
	assert.Equal(t, 0, heartbeatSignals(t, tmp.Client, "lease-plain"), "no signal for a lease without an idle timeout")

	// Released: the heartbeat says the lease has ended.
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, "lease-plain", "", lease.SignalReleaseLease, nil))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, "lease-plain", "").Get(ctx, nil))
	assert.Equal(t, http.StatusGone, beat("lease-plain"))
}

// serverWithHeldPool starts a real Temporal, a store, a worker on queue and a server, with a held
// doctor run standing in for the pool named queue: it takes the leases' claims and never
// answers, so that they stay Pending. configure, if not nil, sets the server's options.
func serverWithHeldPool(t *testing.T, queue string, configure func(*server.Server)) (*testsuite.Temporal, store.Store, *server.Server) {
	t.Helper()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	testsuite.StartWorker(t, tmp.Client, queue, st)
	_, err := tmp.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: pool.WorkflowID(queue), TaskQueue: queue},
		doctor.WorkflowName, doctor.Input{ProbeID: queue, Hold: time.Hour})
	require.NoError(t, err)
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}\n"))
	require.NoError(t, err)
	s := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: queue, InsecureNoAuth: true, Policy: pol}
	if configure != nil {
		configure(s)
	}
	return tmp, st, s
}

func heartbeatSignals(t *testing.T, c client.Client, id string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == lease.SignalHeartbeat {
			n++
		}
	}
	return n
}
