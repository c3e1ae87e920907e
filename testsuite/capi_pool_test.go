package testsuite_test

import (
	"context"
	"errors"
	"github.com/kunobi-ninja/kobe/poolspec"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/capi"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/capimgmt"
)

// TestCAPIPoolLeaseSurvivesACAPDRestart runs kobe's real pool and lease workflows on the capi
// backend against real Cluster API controllers: a warm member comes up (ClusterClass topology,
// in-memory machines), a lease binds to it, the infrastructure provider's manager (CAPD) is
// stopped and started again in the middle of the lease (its workload API is down meanwhile),
// the lease is released cleanly, and deleting the pool leaves no Cluster API object and no
// Secret of any member behind.
func TestCAPIPoolLeaseSurvivesACAPDRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("real Cluster API controllers; skipped with -short")
	}
	m := capimgmt.Start(t)
	m.Apply(t, capimgmt.FastClassManifest("default"))
	m.WaitClassReconciled(t, "default", capimgmt.FastClass)
	// The workers' capi backend reaches this management cluster.
	t.Setenv(capi.KubeconfigEnv, m.KubeconfigPath)

	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	acts := testsuite.StartHostWorker(t, tmp.Client, "kobe", s, t.TempDir())
	b, err := capi.New(capi.Config{REST: m.Config})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// Applied through the API, a spec the management cluster cannot serve is refused with what
	// is wrong, judged by the worker's capi backend against the real controllers' CRDs and
	// ClusterClass; nothing is recorded, started or created.
	srv := &server.Server{Store: s, Temporal: tmp.Client, TaskQueue: "kobe", InsecureNoAuth: true}
	h := srv.Handler()
	for name, tc := range map[string]struct{ section, want string }{
		"unknown-kind": {`{"infrastructureApiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","infrastructureKind":"NoSuchCluster",
			"infrastructureSpec":{"backend":{"inMemory":{}}},
			"controlPlane":{"machineTemplateSpec":` + capimgmt.FastMachineTemplateSpec + `}}`,
			"spec.backend.capi.infrastructureKind: the management cluster serves no NoSuchCluster"},
		"missing-class": {`{"topology":{"class":"no-such-class"}}`, "no-such-class"},
		"bad-variable":  {`{"topology":{"class":"kobe-fast","variables":[{"name":"flavour","value":"purple"}]}}`, "flavour"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/pools/"+name, strings.NewReader(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1",
			"kind":"ClusterPool","metadata":{"name":"`+name+`"},"spec":{"size":1,"backend":{"type":"capi","capi":`+tc.section+`},
			"cluster":{"version":"v1.37.0"}}}`)))
		assert.Equal(t, 400, rec.Code, "%s: %s", name, rec.Body.String())
		assert.Contains(t, rec.Body.String(), tc.want, name)
		_, err := s.GetPool(ctx, name)
		assert.ErrorIs(t, err, store.ErrNotFound, "%s: no pool recorded", name)
		_, err = tmp.Client.DescribeWorkflowExecution(ctx, pool.WorkflowID(name), "")
		assert.Error(t, err, "%s: no pool workflow", name)
	}
	clusters, err := m.Dynamic.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}).
		Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, clusters.Items, "a refused apply creates no Cluster")

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: capi}
spec:
  size: 1
  ttl: 20m
  backend:
    type: capi
    capi:
      topology:
        class: kobe-fast
        variables: [{name: flavour, value: large}]
        controlPlane: {replicas: 1}
  cluster: {version: v1.37.0}
`)
	t0 := time.Now()
	_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("capi"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, tmp.Client, "capi").Ready == 1 }, 5*time.Minute, time.Second, "a warm member")
	t.Logf("pool warm in %s", time.Since(t0).Round(time.Second))

	run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lease-capi", TaskQueue: "kobe"},
		lease.WorkflowName, lease.Input{LeaseID: "lease-capi", Pool: "capi", Principal: "alice",
			LeaseTerms: poolspec.LeaseTerms{TTL: pol.TTL, MaxTTL: pol.MaxTTL, MaxExtensions: pol.MaxExtensions}})
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, tmp.Client, "lease-capi"); return lv.Phase == api.LeaseBound },
		2*time.Minute, 50*time.Millisecond)
	member := lv.InstanceID
	t.Logf("lease bound to %s", member)

	cred, err := s.GetLeaseCredential(ctx, "lease-capi")
	require.NoError(t, err)
	kc, err := acts.Secrets.Open(cred.Sealed, []byte("lease-capi"))
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cfg.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
	require.NoError(t, err, "the lease's kubeconfig works")

	// CAPD stops in the middle of the lease: its workload API servers go with it.
	m.StopManager(t, "capd")
	_, err = kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.Error(t, err, "the workload API is down while CAPD is")
	m.StartManager(t, "capd")
	require.Eventually(t, func() bool {
		_, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err == nil
	}, 3*time.Minute, time.Second, "the workload API serves again after CAPD's restart")
	st, err := b.WaitReady(ctx, member, nil)
	require.NoError(t, err)
	assert.Equal(t, backends.PhaseReady, st.Phase)
	assert.Equal(t, api.LeaseBound, leaseView(t, tmp.Client, "lease-capi").Phase, "the lease is still bound")

	// The lease ends cleanly: revoked, torn down, verified gone.
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, "lease-capi", "", lease.SignalReleaseLease, nil))
	require.NoError(t, run.Get(ctx, &lv))
	assert.Equal(t, api.LeaseReleased, lv.Phase)
	require.Eventually(t, func() bool {
		_, err := b.Status(ctx, member)
		return errors.Is(err, backends.ErrNotFound)
	}, 3*time.Minute, time.Second, "the released member's Cluster is gone")
	left, err := m.ObjectsNamedFor(ctx, member)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing of the released member remains")

	// Deleting the pool drains it: nothing of any member remains.
	require.NoError(t, tmp.Client.SignalWorkflow(ctx, pool.WorkflowID("capi"), "", pool.SignalDeletePool, nil))
	require.NoError(t, tmp.Client.GetWorkflow(ctx, pool.WorkflowID("capi"), "").Get(ctx, nil), "the pool drains and ends")
	clusters, err = m.Dynamic.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}).
		Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, clusters.Items, "no Cluster remains")
	left, err = m.ObjectsNamedFor(ctx, "capi")
	require.NoError(t, err)
	assert.Empty(t, left, "no Cluster API object and no Secret of the pool's members remains")
}
