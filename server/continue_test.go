package server_test

import (
	"context"
	"encoding/json"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

// stubCluster stands in for an instance: it issues lease credentials and counts them.
type stubCluster struct {
	mu     sync.Mutex
	issued int
}

func (*stubCluster) Name() string                                            { return "stub" }
func (*stubCluster) Validate(backends.InstanceSpec) error                    { return nil }
func (*stubCluster) RevokeCredentials(context.Context, string, string) error { return nil }
func (*stubCluster) Delete(context.Context, string) error                    { return nil }
func (*stubCluster) Create(_ context.Context, s backends.InstanceSpec) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: s.ID, Phase: backends.PhaseReady}, nil
}
func (*stubCluster) Status(_ context.Context, id string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady}, nil
}
func (*stubCluster) WaitReady(_ context.Context, id string, _ func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady}, nil
}
func (c *stubCluster) Credentials(_ context.Context, _ string, r backends.CredentialRequest) (backends.Credential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.issued++
	return backends.Credential{Kubeconfig: []byte("apiVersion: v1\nkind: Config\n"), User: r.User, ExpiresAt: time.Now().Add(r.TTL)}, nil
}

// A lease that continues as new behind the API, on a real Temporal server: heartbeats, the view,
// an extension and the release all reach the current run by the lease's workflow id, and the
// lease issues its credential once (plus once for the extension), not once per run.
func TestLeaseContinuesAsNewBehindTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	cluster := &stubCluster{}
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["stub"] = cluster
	acts.Secrets = secretbox.Random()
	w := worker.New(tmp.Client, "can", acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	// A held doctor run stands in for the pool: it takes the claim; the test assigns.
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("can"), TaskQueue: "can"},
		doctor.WorkflowName, doctor.Input{ProbeID: "can", Hold: time.Hour})
	require.NoError(t, err)
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}\n"))
	require.NoError(t, err)
	s := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "can", InsecureNoAuth: true, Policy: pol, Secrets: acts.Secrets}
	h := s.Handler()
	call := func(method, path, body string, out any) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		if out != nil && rec.Code < 300 {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out), rec.Body.String())
		}
		return rec.Code
	}

	const id = "lease-can"
	require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: id, Pool: "can", Principal: "anonymous", Phase: api.LeasePending, TTL: time.Hour}))
	_, err = lease.Start(ctx, tmp.Client, "can", lease.Input{LeaseID: id, Pool: "can", Principal: "anonymous",
		LeaseTerms:  poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 3 * time.Hour, MaxExtensions: 2},
		IdleTimeout: 10 * time.Minute, ContinueAsNewAfter: 60}, true)
	require.NoError(t, err)
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, id, "", pool.SignalAssigned, pool.Assignment{InstanceID: "i1",
		Backend: "stub", Placement: instance.HostAssignment{HostID: "h", TaskQueue: "can"}, Endpoint: "https://stub"}))
	var l api.Lease
	require.Equal(t, 200, call("GET", "/v1/leases/"+id+"?wait=30s", "", &l))
	require.Equal(t, api.LeaseBound, l.Phase)
	assert.Contains(t, l.Kubeconfig, "kind: Config")
	first := runID(t, tmp.Client, id)

	for range 60 {
		require.Equal(t, http.StatusNoContent, call("POST", "/v1/leases/"+id+"/heartbeat", "", nil))
	}
	require.Eventually(t, func() bool { return runID(t, tmp.Client, id) != first }, 30*time.Second, 50*time.Millisecond)
	desc, err := tmp.Client.DescribeWorkflowExecution(ctx, id, first)
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, desc.GetWorkflowExecutionInfo().GetStatus())

	require.Equal(t, 200, call("GET", "/v1/leases/"+id, "", &l))
	assert.Equal(t, api.LeaseBound, l.Phase, "the view comes from the current run")
	assert.Contains(t, l.Kubeconfig, "kind: Config")
	var ext api.ExtendResponse
	require.Equal(t, 200, call("PATCH", "/v1/leases/"+id, `{"extendTtl":"30m"}`, &ext))
	for range 30 {
		require.Equal(t, http.StatusNoContent, call("POST", "/v1/leases/"+id+"/heartbeat", "", nil))
	}
	require.Equal(t, http.StatusNoContent, call("DELETE", "/v1/leases/"+id, "", nil))

	var final lease.View
	require.NoError(t, tmp.Client.GetWorkflow(ctx, id, "").Get(ctx, &final))
	assert.Equal(t, api.LeaseReleased, final.Phase)
	assert.Equal(t, 1, final.Extensions)
	assert.True(t, ext.ExpiresAt.Equal(final.ExpiresAt), "%s, %s", ext.ExpiresAt, final.ExpiresAt)
	assert.Equal(t, 90*time.Minute, final.ExpiresAt.Sub(final.BoundAt))
	cluster.mu.Lock()
	assert.Equal(t, 2, cluster.issued, "the bind and the extension, not one per run")
	cluster.mu.Unlock()
	// Walk the chain of runs back from the last one.
	runs := 0
	// Every run replays against the code (the continue-as-new path, the resumed runs and the
	// atomic extension are deterministic).
	replayer := sdkworker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	for run := runID(t, tmp.Client, id); run != ""; runs++ {
		hist := &historypb.History{}
		it := tmp.Client.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			hist.Events = append(hist.Events, e)
		}
		require.NoError(t, replayer.ReplayWorkflowHistory(nil, hist), "run %s", run)
		run = hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	assert.GreaterOrEqual(t, runs, 3, "the lease continued as new several times")
	t.Logf("%d runs", runs)
	row, err := st.GetLease(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, api.LeaseReleased, row.Phase)
}

func runID(t *testing.T, c client.Client, id string) string {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}
