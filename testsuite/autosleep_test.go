package testsuite_test

import (
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// TestLeaseAutoSleep: a pool with spec.sleep.afterInactivity of 10 seconds and three leases of
// real local clusters. The idle one sleeps (its processes stop) although kobe health-checks its
// cluster all along; the one whose holder keeps using its kubeconfig stays awake, and sleeps
// once the use stops; the one an exclusion matches stays awake, idle. The leases' inputs come
// from the pool's policy as the API makes them (poolspec.Policy.LeaseTerms). With
// KOBE_RECORD_HISTORIES=1 it records the active and the idle lease's histories (when absent).
func TestLeaseAutoSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	// Mostly waiting (on a timer of the cluster's or the lease's), on its own Temporal, store and
	// state dir: it runs beside the package's other waiting test, not after it.
	t.Parallel()
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	stateDir := t.TempDir()
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", s, stateDir)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: dozy}
spec:
  ttl: 30m
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
  scaling: {minReady: 3, maxClusters: 3, resumeTimeout: 2m}
  sleep:
    afterInactivity: 10s
    exclude: [{metadata: {keep: awake}}]
`)
	const after = 10 * time.Second
	require.Equal(t, after, pol.Sleep.AfterInactivity)
	_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("dozy"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "dozy").Ready == 3 }, 5*time.Minute, 200*time.Millisecond)

	// The principal is the one kobe's API gives a request without authentication, so that the
	// API can read the leases below.
	start := func(id string, metadata map[string]string) lease.View {
		in := lease.Input{LeaseID: id, Pool: "dozy", Principal: "anonymous",
			LeaseTerms: pol.LeaseTerms(poolspec.LeaseAsk{Owner: "anonymous", Metadata: metadata})}
		_, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"}, lease.WorkflowName, in)
		require.NoError(t, err)
		var lv lease.View
		require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, id); return lv.Phase == api.LeaseBound }, 2*time.Minute, 50*time.Millisecond)
		return lv
	}
	const idle, active, excluded = "lease-idle", "lease-active", "lease-excluded"
	activeView := start(active, nil)
	kube := leaseKube(t, s, acts, active)
	// The holder uses its cluster every 200 ms: 50 requests per inactivity period, so that even
	// a machine that stalls for seconds leaves it clearly active.
	var served atomic.Int64
	useCtx, stopUse := context.WithCancel(ctx)
	var using sync.WaitGroup
	using.Add(1)
	go func() {
		defer using.Done()
		for useCtx.Err() == nil {
			if _, err := kube.CoreV1().ConfigMaps("default").List(useCtx, metav1.ListOptions{}); err == nil {
				served.Add(1)
			}
			select {
			case <-useCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	defer func() { stopUse(); using.Wait() }()
	require.Eventually(t, func() bool { return served.Load() > 0 }, time.Minute, 50*time.Millisecond, "the active lease's kubeconfig works")

	idleView := start(idle, nil)
	excludedView := start(excluded, map[string]string{"keep": "awake"})
	assert.Equal(t, after, idleView.AfterInactivity)
	assert.Zero(t, excludedView.AfterInactivity, "the exclusion matched")

	// The idle lease sleeps by itself, for inactivity; its processes stop.
	idleDir := filepath.Join(stateDir, "local", "instances", idleView.InstanceID)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, idle); return lv.Sleeping }, 3*time.Minute, 200*time.Millisecond,
		"the idle lease sleeps after %s", after)
	requireCondition(t, lv, lease.ConditionSleeping, "True", api.ReasonInactive)
	assert.Equal(t, api.LeaseBound, lv.Phase, "a sleeping lease stays Bound")
	pids, _ := processesUnder(t, idleDir)
	assert.Empty(t, pids, "the idle lease's cluster has no process left")

	// For three more periods the active lease is used and stays awake, as does the excluded one.
	sleptAt := time.Now()
	before := served.Load()
	for time.Since(sleptAt) < 3*after {
		assert.False(t, leaseView(t, tmp.Client, active).Sleeping, "the active lease is awake")
		assert.False(t, leaseView(t, tmp.Client, excluded).Sleeping, "the excluded lease is awake")
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the active lease served %d requests in %s while the idle one slept", served.Load()-before, time.Since(sleptAt).Round(time.Second))
	require.Greater(t, served.Load()-before, int64(3), "the active lease was in use all along")

	// Once its holder stops, the active lease sleeps too: what kept it awake was its use.
	stopUse()
	using.Wait()
	stopped := time.Now()
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, active); return lv.Sleeping }, 3*time.Minute, 200*time.Millisecond)
	requireCondition(t, lv, lease.ConditionSleeping, "True", api.ReasonInactive)
	t.Logf("the active lease slept %s after its last request (afterInactivity %s)", time.Since(stopped).Round(100*time.Millisecond), after)
	assert.False(t, leaseView(t, tmp.Client, excluded).Sleeping, "the excluded lease never sleeps by itself")
	assert.Equal(t, activeView.InstanceID, lv.InstanceID)

	// Woken by hand, the idle lease is kept awake by its holder reading it through kobe's API
	// alone (GET /v1/leases/{id}: the signal activity), and sleeps again once the reads stop.
	h, err := tmp.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: idle, UpdateName: lease.UpdateWake,
		Args: []any{lease.WakeRequest{ResumeTimeout: pol.ResumeTimeout}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	lv = lease.View{}
	require.NoError(t, h.Get(ctx, &lv))
	require.False(t, lv.Sleeping)
	accessPolicy, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read]}\n"))
	require.NoError(t, err)
	apiHandler := (&server.Server{Store: s, Temporal: tmp.Client, TaskQueue: "kobe", InsecureNoAuth: true, Policy: accessPolicy,
		Secrets: acts.Secrets}).Handler()
	woke := time.Now()
	for time.Since(woke) < 3*after {
		rec := httptest.NewRecorder()
		apiHandler.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/leases/"+idle, nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.False(t, leaseView(t, tmp.Client, idle).Sleeping, "read through the API, the lease is awake")
		time.Sleep(time.Second)
	}
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, idle); return lv.Sleeping }, 3*time.Minute, 200*time.Millisecond)
	requireCondition(t, lv, lease.ConditionSleeping, "True", api.ReasonInactive)

	// The audit log holds the lease's own requests and nothing of kobe's: the idle cluster,
	// health-checked by kobe all along and never used by its lease, has none.
	idleLog, err := os.ReadFile(filepath.Join(idleDir, "logs", "lease-audit.log")) // the API server creates it at its start
	require.NoError(t, err)
	assert.Empty(t, string(idleLog), "kobe's own requests are not recorded")
	activeLog, err := os.ReadFile(filepath.Join(stateDir, "local", "instances", activeView.InstanceID, "logs", "lease-audit.log"))
	require.NoError(t, err)
	events := strings.Split(strings.TrimSpace(string(activeLog)), "\n")
	for _, e := range events {
		require.Contains(t, e, `"username":"kobe:lease:`+active+`"`, "only the lease's requests are recorded")
	}
	t.Logf("the active lease's audit log: %d events for %d requests served, %d bytes (%d per event)",
		len(events), served.Load(), len(activeLog), len(activeLog)/len(events))

	for _, id := range []string{idle, active, excluded} {
		require.NoError(t, tmp.Client.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
		require.NoError(t, tmp.Client.GetWorkflow(ctx, id, "").Get(ctx, &lv))
		assert.Equal(t, api.LeaseReleased, lv.Phase)
	}
	if os.Getenv("KOBE_RECORD_HISTORIES") == "1" {
		// The active lease: checks that found its cluster in use, then its sleep; the idle one:
		// a sleep, a wake, the API's activity signals, a sleep again.
		for name, id := range map[string]string{"lease-autosleep-": active, "lease-autosleep-woken-": idle} {
			file := filepath.Join("..", "worker", "testdata", "histories", name+recordVersion+".json")
			if _, err := os.Stat(file); os.IsNotExist(err) { // a recorded history is never replaced
				writeHistory(t, ctx, tmp.Client, id, file)
			}
		}
	}
}
