package server_test

import (
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
)

// A pool deleted and applied again at once, over and over, through the API, on a real Temporal
// and the real pool workflow: after every round the pool exists, in the store and as a running,
// serving workflow. An empty pool drains in an instant, so its workflow ends while the next
// apply is on its way: the moment where, before, the apply could land in a run that ended
// without reading it (a pool row with no workflow), or its row could be deleted after it was
// written. The deterministic form of that race is in pool/recreate_test.go.
func TestPoolDeletedAndAppliedAgainAlwaysEndsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	w := worker.New(tmp.Client, "recreate", worker.NewActivities(st, zap.NewNop()))
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}\n"))
	require.NoError(t, err)
	s := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "recreate", InsecureNoAuth: true, Policy: pol}
	h := s.Handler()
	call := func(method, path, body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec.Code
	}
	const manifest = `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"again"},
		"spec":{"size":0,"ttl":"10m","backend":{"type":"local"},"cluster":{"version":"v1.37.2"}}}`
	serving := func() string {
		if _, err := st.GetPool(ctx, "again"); err != nil {
			return "store: " + err.Error()
		}
		desc, err := tmp.Client.DescribeWorkflowExecution(ctx, pool.WorkflowID("again"), "")
		if err != nil {
			return "workflow: " + err.Error()
		}
		if s := desc.GetWorkflowExecutionInfo().GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return "workflow " + s.String()
		}
		v, err := tmp.Client.QueryWorkflow(ctx, pool.WorkflowID("again"), "", pool.QueryPoolStatus)
		if err != nil {
			return "query: " + err.Error()
		}
		var ps pool.Status
		if err := v.Get(&ps); err != nil {
			return "query: " + err.Error()
		}
		if ps.Phase == api.PoolDraining {
			return "draining"
		}
		return ""
	}

	require.Equal(t, http.StatusCreated, call("PUT", "/v1/pools/again", manifest))
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for round := 0; round < 25; round++ {
		code := call("DELETE", "/v1/pools/again", "")
		require.Contains(t, []int{http.StatusAccepted, http.StatusNoContent}, code, "round %d: delete", round)
		time.Sleep(time.Duration(rng.Intn(30)) * time.Millisecond)
		code = call("PUT", "/v1/pools/again", manifest)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, code, "round %d: apply again", round)
		why := serving()
		for deadline := time.Now().Add(30 * time.Second); why != "" && time.Now().Before(deadline); why = serving() {
			time.Sleep(50 * time.Millisecond)
		}
		require.Empty(t, why, "round %d: the pool applied again serves", round)
	}

	// The last delete ends it: the row goes with its pool.deleted event, and the workflow ends.
	require.Equal(t, http.StatusAccepted, call("DELETE", "/v1/pools/again", ""))
	require.Eventually(t, func() bool {
		_, err := st.GetPool(ctx, "again")
		return err != nil
	}, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, http.StatusNotFound, call("GET", "/v1/pools/again", ""))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, pool.WorkflowID("again"), "").Get(ctx, nil))
	events, err := st.ListEvents(ctx, store.EventFilter{Action: "pool.deleted"})
	require.NoError(t, err)
	assert.NotEmpty(t, events)
}
