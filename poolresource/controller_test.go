package poolresource_test

import (
	"context"
	"encoding/json"
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
	"go.uber.org/zap/zaptest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/addons"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolresource"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
)

var clusterPools = schema.GroupVersionResource{Group: "kobe.kunobi.ninja", Version: "v1alpha1", Resource: "clusterpools"}

const poolName = "gitops"

// poolResource is the ClusterPool the test applies: one warm member of the local backend
// (kube-apiserver alone), with the lease TTL given.
func poolResource(ttl string) string {
	return `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: ` + poolName + `}
spec:
  size: 1
  ttl: ` + ttl + `
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
`
}

// The ClusterPool controller on real parts: the CRDs in a real kube-apiserver, kobe's API
// server with a real embedded Temporal and a real worker (the local backend). A ClusterPool
// applied with kubectl's field manager becomes the kobe pool of the same spec, through the same
// apply as PUT /v1/pools (one audit event, its actor the field manager), and its status
// reaches the warm target; the API refuses PUT and DELETE of it with managed_externally and
// shows who manages it and the applied manifest; a spec changed while no controller runs is
// applied once by the next leader, and nothing is applied twice; deleting the resource drains
// the pool behind the finalizer, then the resource goes.
func TestClusterPoolController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kine, kube-apiserver, Temporal and a local cluster; skipped with -short")
	}
	host := hostcluster.Start(t, hostcluster.Options{APIOnly: true})
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", st, t.TempDir())
	policy, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read]}\n"))
	require.NoError(t, err)
	srv := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "kobe", InsecureNoAuth: true, Policy: policy, Secrets: acts.Secrets}
	h := srv.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()

	var crds []string
	files, err := filepath.Glob("../deploy/crds/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		crds = append(crds, string(data))
	}
	require.NoError(t, addons.Apply(ctx, host.Config, poolspec.Addon{Name: "kobe-crds", Manifest: strings.Join(crds, "\n")}, nil))
	dyn, err := dynamic.NewForConfig(host.Config)
	require.NoError(t, err)
	resources := dyn.Resource(clusterPools)

	// startController runs a controller as a kobe server does, until stop is called (or the
	// test ends: it logs to the test, so it stops before the test is over).
	startController := func(identity string) (stop func()) {
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- poolresource.Run(cctx, poolresource.Options{Config: host.Config, Server: srv, Identity: identity,
				Logger: zaptest.NewLogger(t).Named(identity)})
		}()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				ccancel()
				select {
				case err := <-done:
					assert.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Error("the controller did not stop within 30s")
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	kubectlApplyNamed := func(name, manifest string) {
		js, err := yaml.YAMLToJSON([]byte(manifest))
		require.NoError(t, err)
		_, err = resources.Patch(ctx, name, types.ApplyPatchType, js, metav1.PatchOptions{FieldManager: "kubectl", FieldValidation: "Strict"})
		require.NoError(t, err)
	}
	kubectlApply := func(manifest string) { kubectlApplyNamed(poolName, manifest) }
	resourceNamed := func(name string) *v1alpha1.ClusterPool {
		u, err := resources.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		var cp v1alpha1.ClusterPool
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cp))
		return &cp
	}
	resource := func() *v1alpha1.ClusterPool { return resourceNamed(poolName) }
	call := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body)))
		return rec
	}
	eventsOf := func(pool, action string) []store.Event {
		evs, err := st.ListEvents(ctx, store.EventFilter{Action: action, Pool: pool})
		require.NoError(t, err)
		var requested []store.Event
		for _, e := range evs {
			if e.Result == "requested" {
				requested = append(requested, e)
			}
		}
		return requested
	}
	events := func(action string) []store.Event { return eventsOf(poolName, action) }
	storedTTL := func() string {
		p, err := st.GetPool(ctx, poolName)
		if err != nil {
			return ""
		}
		m, err := poolspec.Parse(p.Spec)
		require.NoError(t, err)
		return string(m.Spec.TTL)
	}

	stop := startController("kobe-a")

	// A spec only kobe refuses (spec.resources on the local backend, a trait of the backend the
	// CRD cannot know): the status says why, no pool is made, nothing is audited, and a delete
	// releases the resource at once.
	kubectlApplyNamed("refused", `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: refused}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  resources: {limits: {cpu: "2"}}
`)
	require.Eventually(t, func() bool {
		cp := resourceNamed("refused")
		c := meta.FindStatusCondition(cp.Status.Conditions, poolresource.ConditionApplied)
		return cp.Status.ObservedGeneration == cp.Generation && c != nil && c.Reason == poolresource.ReasonRefused
	}, time.Minute, 250*time.Millisecond, "the refusal is in the status")
	assert.Contains(t, meta.FindStatusCondition(resourceNamed("refused").Status.Conditions, poolresource.ConditionApplied).Message,
		"spec.resources is not supported by this version of kobe")
	_, err = st.GetPool(ctx, "refused")
	assert.ErrorIs(t, err, store.ErrNotFound, "no pool of a refused spec")
	assert.Empty(t, eventsOf("refused", "pool.apply"), "a refusal changes nothing and records no change")
	require.NoError(t, resources.Delete(ctx, "refused", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := resources.Get(ctx, "refused", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 250*time.Millisecond, "a resource without a pool is released at once")

	t0 := time.Now()
	kubectlApply(poolResource("10m"))
	// The apply's outcome is written at once, before the pool has a member.
	require.Eventually(t, func() bool {
		cp := resource()
		return cp.Status.ObservedGeneration == cp.Generation &&
			meta.IsStatusConditionTrue(cp.Status.Conditions, poolresource.ConditionApplied) && cp.Status.Creating+cp.Status.Ready >= 1
	}, time.Minute, 250*time.Millisecond, "the resource is applied and its status shows the pool's member")
	t.Logf("kubectl apply → applied, a member creating: %s", time.Since(t0).Round(time.Millisecond))
	cp := resource()
	assert.Contains(t, cp.Finalizers, poolresource.Finalizer)

	// The kobe pool is the resource's: same spec, managed by it.
	rec := call("GET", "/v1/pools/"+poolName+"?manifest=true", "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	want, err := cp.Manifest()
	require.NoError(t, err)
	got, err := poolspec.Parse(rec.Body.Bytes())
	require.NoError(t, err)
	assert.Equal(t, want, got, "the applied manifest is the resource's")
	rec = call("GET", "/v1/pools/"+poolName, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var view api.PoolView
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &view))
	assert.Equal(t, "ClusterPool/"+poolName, view.ManagedBy)

	// One source of truth: the API refuses to change or delete it.
	for _, method := range []string{"PUT", "DELETE"} {
		rec := call(method, "/v1/pools/"+poolName, poolResource("1h"))
		require.Equal(t, http.StatusConflict, rec.Code, "%s: %s", method, rec.Body.String())
		var eb api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
		assert.Equal(t, api.ReasonManagedExternally, eb.Reason, method)
		assert.Contains(t, eb.Detail, "ClusterPool/"+poolName, "%s: the refusal names the resource", method)
	}
	assert.Equal(t, "10m", storedTTL(), "the refused PUT changed nothing")

	applies := events("pool.apply")
	require.Len(t, applies, 1, "applied once, however often the controller looked")
	assert.Equal(t, "kubectl", applies[0].Actor, "the actor is the resource's last writer")

	// A restart in the middle: the spec changes while no controller runs; the next leader
	// applies it once, and applies nothing that was applied already.
	stop()
	kubectlApply(poolResource("20m"))
	time.Sleep(3 * time.Second)
	assert.Equal(t, "10m", storedTTL(), "no controller ran")
	stop = startController("kobe-b")
	require.Eventually(t, func() bool {
		cp := resource()
		return cp.Status.ObservedGeneration == cp.Generation && storedTTL() == "20m"
	}, time.Minute, 250*time.Millisecond, "the new leader applies the changed spec")
	assert.Equal(t, int64(2), resource().Status.ObservedGeneration)
	time.Sleep(3 * time.Second) // a poll or two more
	assert.Len(t, events("pool.apply"), 2, "one apply per generation, across the restart")

	// The status follows the pool to its warm target.
	var last v1alpha1.ClusterPoolStatus
	if !assert.Eventually(t, func() bool {
		last = resource().Status
		return last.Ready >= 1 && meta.IsStatusConditionTrue(last.Conditions, poolresource.ConditionReady)
	}, 5*time.Minute, 250*time.Millisecond, "the status reaches the warm target") {
		t.Fatalf("the last status: %+v", last)
	}
	cp = resource()
	t.Logf("kubectl apply → status at the warm target: %s (phase %s)", time.Since(t0).Round(time.Millisecond), cp.Status.Phase)
	assert.Equal(t, "Healthy", cp.Status.Phase)
	assert.Len(t, events("pool.apply"), 2, "still one apply per generation")

	// Deleting the resource drains the pool behind the finalizer, then the resource goes.
	t0 = time.Now()
	require.NoError(t, resources.Delete(ctx, poolName, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := resources.Get(ctx, poolName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, 250*time.Millisecond, "the resource goes once its pool has drained")
	t.Logf("kubectl delete → resource gone: %s", time.Since(t0).Round(time.Millisecond))
	_, err = st.GetPool(ctx, poolName)
	assert.ErrorIs(t, err, store.ErrNotFound, "the kobe pool is gone before the resource")
	deletes := events("pool.delete")
	require.Len(t, deletes, 1, "one drain asked for")
	assert.Equal(t, "kubectl", deletes[0].Actor)
	stop()
}
