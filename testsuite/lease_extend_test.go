package testsuite_test

import (
	"context"
	"encoding/json"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/worker"
)

// slowCluster stands in for the instances of a pool: it issues each lease credential after the
// delay set for its lease (none by default), and counts them.
type slowCluster struct {
	mu     sync.Mutex
	delay  map[string]time.Duration // lease id → how long an issuance takes
	issued map[string]int
}

func (*slowCluster) Name() string                                            { return "slow" }
func (*slowCluster) Validate(backends.InstanceSpec) error                    { return nil }
func (*slowCluster) RevokeCredentials(context.Context, string, string) error { return nil }
func (*slowCluster) Delete(context.Context, string) error                    { return nil }
func (*slowCluster) Create(_ context.Context, s backends.InstanceSpec) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: s.ID, Phase: backends.PhaseReady}, nil
}
func (*slowCluster) Status(_ context.Context, id string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady}, nil
}
func (*slowCluster) WaitReady(_ context.Context, id string, _ func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady}, nil
}
func (c *slowCluster) Credentials(ctx context.Context, _ string, r backends.CredentialRequest) (backends.Credential, error) {
	c.mu.Lock()
	d := c.delay[r.User]
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return backends.Credential{}, ctx.Err()
	case <-time.After(d):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.issued[r.User]++
	return backends.Credential{Kubeconfig: []byte("apiVersion: v1\nkind: Config\n"), User: r.User, ExpiresAt: time.Now().Add(r.TTL)}, nil
}

func (c *slowCluster) set(leaseID string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delay[leaseID] = d
}

// standInPool answers every claim at once with an instance of its own (the pool's part in a
// lease's life, without members): the lease issues its credential per extension, as a lease
// bound from the queue does.
func standInPool(ctx workflow.Context, queue string) error {
	claims := workflow.GetSignalChannel(ctx, pool.SignalClaim)
	for {
		var r pool.ClaimRequest
		claims.Receive(ctx, &r)
		_ = workflow.SignalExternalWorkflow(ctx, leasestart.WorkflowID(r.LeaseID), "", pool.SignalAssigned, pool.Assignment{
			InstanceID: "i-" + r.LeaseID, Backend: "slow", Placement: instance.HostAssignment{HostID: "h", TaskQueue: queue},
			Endpoint: "https://stand-in"}).Get(ctx, nil)
	}
}

// leaseExtendEnv is a real Temporal server and a worker running the lease workflow, a stand-in
// pool, stand-in sleep and wake workflows (a sleep always works) and the real activities over a
// real store, with slowCluster for a backend; and kobe's API on them, without authentication
// (its principal is "anonymous").
func leaseExtendEnv(t *testing.T, queue string) (*testsuite.Temporal, *slowCluster, http.Handler) {
	t.Helper()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	cluster := &slowCluster{delay: map[string]time.Duration{}, issued: map[string]int{}}
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["slow"] = cluster
	acts.Secrets = secretbox.Random()
	w := sdkworker.New(tmp.Client, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	w.RegisterWorkflowWithOptions(standInPool, workflow.RegisterOptions{Name: pool.WorkflowName})
	w.RegisterWorkflowWithOptions(func(workflow.Context, instance.SleepInput) error { return nil },
		workflow.RegisterOptions{Name: instance.SleepWorkflowName})
	w.RegisterWorkflowWithOptions(func(workflow.Context, instance.SleepInput) (instance.WakeResult, error) {
		return instance.WakeResult{Duration: time.Second}, nil
	}, workflow.RegisterOptions{Name: instance.WakeWorkflowName})
	acts.RegisterActivities(w)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	_, err := tmp.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: pool.WorkflowID("p"), TaskQueue: queue},
		pool.WorkflowName, queue)
	require.NoError(t, err)
	accessPolicy, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read]}\n"))
	require.NoError(t, err)
	h := (&server.Server{Store: st, Temporal: tmp.Client, TaskQueue: queue, InsecureNoAuth: true, Policy: accessPolicy,
		Secrets: acts.Secrets}).Handler()
	return tmp, cluster, h
}

// startBoundLease starts a lease of the stand-in pool and returns its view once it is Bound.
func startBoundLease(t *testing.T, ctx context.Context, c client.Client, queue string, in lease.Input) lease.View {
	t.Helper()
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: leasestart.WorkflowID(in.LeaseID), TaskQueue: queue}, lease.WorkflowName, in)
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, c, in.LeaseID); return lv.Phase == api.LeaseBound }, 30*time.Second, 20*time.Millisecond)
	return lv
}

// extendLease sends the extend Update and returns its outcome and how long it took to come.
func extendLease(ctx context.Context, c client.Client, id string, by time.Duration) (lease.ExtendResult, time.Duration, error) {
	start := time.Now()
	var res lease.ExtendResult
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateExtend,
		Args: []any{lease.ExtendRequest{By: by}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	return res, time.Since(start), err
}

// replayLease replays the lease's (single) run against today's code and, with
// KOBE_RECORD_HISTORIES=1, records it into worker/testdata/histories/name (when absent: a
// recorded history is never replaced).
func replayLease(t *testing.T, ctx context.Context, c client.Client, id, name string) {
	t.Helper()
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, e)
	}
	replayer := sdkworker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	require.NoError(t, replayer.ReplayWorkflowHistory(nil, hist), "the lease's history replays")
	if os.Getenv("KOBE_RECORD_HISTORIES") == "1" {
		file := filepath.Join("..", "worker", "testdata", "histories", name)
		if _, err := os.Stat(file); os.IsNotExist(err) {
			writeHistory(t, ctx, c, id, file)
		}
	}
}

// The review's item 5, on a real Temporal server. A lease whose credential is issued per
// extension (bound from the queue) is put to sleep and extended: the extension is refused at
// once with sleeping, and through kobe's API the extension (PATCH) and the kubeconfig answer
// 409 sleeping at once, saying how to wake it. The extension used to be accepted and its
// issuance retried against the stopped cluster for 10 minutes, the lease neither expiring nor
// answering meanwhile. A lease whose expiry comes while an extension issues its credential
// expires on time: the extension is abandoned and answered, never awaited past the expiry.
// Each history replays; with KOBE_RECORD_HISTORIES=1 they are recorded.
func TestLeaseExtendRespectsSleepAndExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	const queue = "lease-extend"
	tmp, cluster, apiHandler := leaseExtendEnv(t, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("asleep", func(t *testing.T) {
		const id = "lease-extend-asleep"
		startBoundLease(t, ctx, tmp.Client, queue, lease.Input{LeaseID: id, Pool: "p", Principal: "anonymous",
			LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 3 * time.Hour, MaxExtensions: 2}})
		// The lease shows Bound a moment before it takes sleeps (not_ready until then): ask again.
		var lv lease.View
		require.Eventually(t, func() bool {
			h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateSleep,
				Args: []any{lease.SleepRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
			if err == nil {
				err = h.Get(ctx, &lv)
			}
			if reason, refused := lease.IsSleepRejection(err); refused && reason == api.ReasonNotReady {
				return false
			}
			require.NoError(t, err)
			return true
		}, 30*time.Second, 20*time.Millisecond)
		require.True(t, lv.Sleeping)
		// A stopped cluster's API refuses the issuance (it is retried for 10 minutes); this one
		// issues it in 2 s, so that a kobe that accepts the extension records its history.
		cluster.set(id, 2*time.Second)
		extCtx, extCancel := context.WithTimeout(ctx, 20*time.Second)
		_, took, extErr := extendLease(extCtx, tmp.Client, id, 30*time.Minute)
		extCancel()
		// Through kobe's API: 409 sleeping, for the extension and the kubeconfig, at once.
		apiCall := func(method, path, body string) (*httptest.ResponseRecorder, time.Duration) {
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			defer rcancel()
			rec := httptest.NewRecorder()
			start := time.Now()
			apiHandler.ServeHTTP(rec, httptest.NewRequestWithContext(rctx, method, path, strings.NewReader(body)))
			return rec, time.Since(start)
		}
		patch, patchTook := apiCall("PATCH", "/v1/leases/"+id, `{"extendTtl":"30m"}`)
		kubeconfig, kubeconfigTook := apiCall("GET", "/v1/leases/"+id+"/kubeconfig", "")
		require.NoError(t, tmp.Client.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
		var final lease.View
		require.NoError(t, tmp.Client.GetWorkflow(ctx, id, "").Get(ctx, &final))
		replayLease(t, ctx, tmp.Client, id, "lease-extend-asleep-"+recordVersion+".json")

		reason, refused := lease.IsExtendRejection(extErr)
		require.True(t, refused, "the extension of a sleeping lease is refused, not run: %v (after %s)", extErr, took)
		assert.Equal(t, api.ReasonSleeping, reason)
		assert.Less(t, took, 5*time.Second, "at once")
		for what, rec := range map[string]*httptest.ResponseRecorder{"PATCH": patch, "GET kubeconfig": kubeconfig} {
			assert.Equal(t, http.StatusConflict, rec.Code, "%s: %s", what, rec.Body.String())
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "%s: %s", what, rec.Body.String())
			assert.Equal(t, api.ReasonSleeping, eb.Reason, what)
			assert.Contains(t, eb.Detail, "kobe lease wake "+id, "%s: the detail says how to wake it", what)
		}
		assert.Less(t, patchTook, 5*time.Second, "PATCH at once")
		assert.Less(t, kubeconfigTook, 5*time.Second, "GET kubeconfig at once")
		assert.Equal(t, 0, final.Extensions)
		assert.Equal(t, api.LeaseReleased, final.Phase)
	})

	t.Run("expiry during an extension", func(t *testing.T) {
		const id = "lease-expire-extending"
		const ttl = 8 * time.Second
		lv := startBoundLease(t, ctx, tmp.Client, queue, lease.Input{LeaseID: id, Pool: "p", Principal: "alice",
			LeaseTerms: poolspec.LeaseTerms{TTL: ttl, MaxTTL: time.Hour, MaxExtensions: 2}})
		// The extension starts 3 s before the expiry and its issuance takes 20 s.
		cluster.set(id, 20*time.Second)
		time.Sleep(time.Until(lv.ExpiresAt.Add(-3 * time.Second)))
		_, took, extErr := extendLease(ctx, tmp.Client, id, time.Minute)
		var final lease.View
		require.NoError(t, tmp.Client.GetWorkflow(ctx, id, "").Get(ctx, &final))
		ended := time.Now()
		replayLease(t, ctx, tmp.Client, id, "lease-expire-extending-"+recordVersion+".json")

		assert.Equal(t, api.LeaseExpired, final.Phase)
		assert.Equal(t, 0, final.Extensions, "the abandoned extension changed nothing")
		assert.Equal(t, ttl, final.ExpiresAt.Sub(final.BoundAt))
		reason, refused := lease.IsExtendRejection(extErr)
		assert.True(t, refused, "the extension is answered: %v", extErr)
		assert.Equal(t, api.ReasonNotReady, reason)
		t.Logf("the extension was answered after %s; the lease ended %s after its expiry", took.Round(time.Millisecond),
			ended.Sub(lv.ExpiresAt).Round(time.Millisecond))
		assert.Less(t, took, 8*time.Second, "answered once the lease expired, not after its issuance")
		assert.Less(t, ended.Sub(lv.ExpiresAt), 5*time.Second, "the lease ended on time")
	})
}
