package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// bindingPool stands in for a pool's workflow whose prepared member takes every warm bind: its
// pool.UpdateClaim answers Bound to the member instanceID, as the pool's ClaimNow does. It does
// not start the lease's workflow (the pool starts it as a child a moment after its Update
// answers; on a loaded engine, seconds later): the test does, when it chooses. A lease's claim
// signal (the slow path) is left unanswered.
func bindingPool(ctx workflow.Context, instanceID string) error {
	if err := workflow.SetUpdateHandler(ctx, pool.UpdateClaim, func(ctx workflow.Context, req pool.BindRequest) (pool.BindResult, error) {
		return pool.BindResult{Bound: true, Assignment: pool.Assignment{InstanceID: instanceID, Backend: "local",
			Placement: instance.HostAssignment{HostID: "h", TaskQueue: "nowhere"}, Endpoint: "https://127.0.0.1:1",
			At: workflow.Now(ctx), Seq: 1, Prepared: true}}, nil
	}); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

// The review's item 2, second half: a warm bind whose pool bound the lease but whose kubeconfig
// the API cannot mint (here the member's signer is not in the store; in life: the signer cannot
// be opened, the store is busy) answered 200 Bound without a kubeconfig while the store row
// stayed Pending. The answer must be the lease as the store has it: 202 Pending, its workflow
// binds it and mints the kubeconfig (the client polls GET). A release right after must not be
// answered 204 "ended" while the lease can still start: 503 (try again) until the workflow
// runs, then it reaches the workflow. Real Temporal, real store, real worker.
func TestAWarmBindWhoseKubeconfigCannotBeMintedAnswersPending(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	const queue = "wb"
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	testsuite.StartWorker(t, tmp.Client, queue, st)
	stubs := sdkworker.New(tmp.Client, queue+"-pool", sdkworker.Options{})
	stubs.RegisterWorkflowWithOptions(bindingPool, workflow.RegisterOptions{Name: pool.WorkflowName})
	require.NoError(t, stubs.Start())
	t.Cleanup(stubs.Stop)
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID(queue), TaskQueue: queue + "-pool"},
		pool.WorkflowName, "wb-1")
	require.NoError(t, err)
	spec := `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"` + queue +
		`"},"spec":{"size":1,"backend":{"type":"local"},"cluster":{"version":"v1.37.2"}}}`
	require.NoError(t, st.UpsertPool(ctx, store.Pool{Name: queue, Backend: "local", Spec: json.RawMessage(spec)}))
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}\n"))
	require.NoError(t, err)
	// The API can seal and open credentials, but the member wb-1 has no signer in the store.
	s := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: queue, InsecureNoAuth: true, Policy: pol,
		Secrets: secretbox.Random(), LeaseStartGrace: 300 * time.Millisecond}
	h := s.Handler()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/leases", strings.NewReader(`{"pool":"wb","ttl":"1h"}`)))
	var l api.Lease
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l), rec.Body.String())
	require.NotEmpty(t, l.ID, rec.Body.String())
	assert.False(t, rec.Code == http.StatusOK && l.Kubeconfig == "", "never 200 Bound without a kubeconfig: %s", rec.Body.String())
	assert.Equal(t, http.StatusAccepted, rec.Code, "the lease as the store has it: %s", rec.Body.String())
	assert.Equal(t, api.LeasePending, l.Phase)
	assert.Empty(t, l.Kubeconfig)
	row, err := st.GetLease(ctx, l.ID)
	require.NoError(t, err)
	assert.Equal(t, api.LeasePending, row.Phase, "the store has it Pending: nothing was written")

	// A release before the lease's workflow runs: try again, never "ended".
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/leases/"+l.ID, nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a release the workflow cannot receive yet is not accepted: %s", rec.Body.String())
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	releaseOnceStarted(t, tmp, s, queue, l.ID)
}
