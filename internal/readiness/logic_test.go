package readiness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// The decision logic of each gate on fabricated objects; the real test (real_test.go) proves
// the same gates against a running cluster.

func fakeChecker(objs ...runtime.Object) *checker {
	return &checker{kube: fake.NewClientset(objs...), dyn: dynfake.NewSimpleDynamicClient(runtime.NewScheme())}
}

func deployment(gen, observed int64, replicas, updated, total, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: total,
			UpdatedReplicas: updated, AvailableReplicas: available},
	}
}

func TestDeploymentReady(t *testing.T) {
	gate := poolspec.ReadinessGate{Type: "DeploymentReady", Namespace: "demo", Name: "web"}
	cases := map[string]struct {
		obj  runtime.Object
		want string // "" passes
	}{
		"missing":          {nil, "deployment demo/web: not found"},
		"not observed":     {deployment(2, 1, 1, 1, 1, 1), "generation 2 not yet observed"},
		"no pods yet":      {deployment(1, 1, 1, 0, 0, 0), "0/1 replicas updated"},
		"not available":    {deployment(1, 1, 2, 2, 2, 1), "deployment demo/web: 1/2 replicas available"},
		"old pods remain":  {deployment(1, 1, 1, 1, 2, 1), "1 replicas of an older revision remain"},
		"rollout complete": {deployment(3, 3, 2, 2, 2, 2), ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c *checker
			if tc.obj == nil {
				c = fakeChecker()
			} else {
				c = fakeChecker(tc.obj)
			}
			err := c.check(context.Background(), gate)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDaemonSetReady(t *testing.T) {
	gate := poolspec.ReadinessGate{Type: "DaemonSetReady", Namespace: "kube-system", Name: "agent"}
	ds := func(desired, updated, ready, available int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", Generation: 1},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: desired,
				UpdatedNumberScheduled: updated, NumberReady: ready, NumberAvailable: available},
		}
	}
	err := fakeChecker(ds(0, 0, 0, 0)).check(context.Background(), gate)
	assert.ErrorContains(t, err, "no pods desired yet")
	err = fakeChecker(ds(2, 2, 1, 1)).check(context.Background(), gate)
	assert.ErrorContains(t, err, "daemonset kube-system/agent: 1/2 pods ready")
	assert.NoError(t, fakeChecker(ds(2, 2, 2, 2)).check(context.Background(), gate))
}

func TestNodesReady(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	c := fakeChecker(node("a", corev1.ConditionTrue), node("b", corev1.ConditionFalse))
	assert.NoError(t, c.check(context.Background(), poolspec.ReadinessGate{Type: "NodesReady", Count: 1}))
	err := c.check(context.Background(), poolspec.ReadinessGate{Type: "NodesReady", Count: 2})
	assert.ErrorContains(t, err, "nodes: 1/2 Ready (2 registered)")
}

func TestDNSHealthy(t *testing.T) {
	gate := poolspec.ReadinessGate{Type: "DNSHealthy", Namespace: "default"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"}}
	slice := func(ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-x", Namespace: "kube-system",
				Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}
	}
	assert.ErrorContains(t, fakeChecker().check(context.Background(), gate), "dns: namespace default: not found")
	assert.ErrorContains(t, fakeChecker(ns).check(context.Background(), gate), "no kube-dns or coredns service")
	assert.ErrorContains(t, fakeChecker(ns, svc, slice(false)).check(context.Background(), gate), "0/1 endpoints ready")
	assert.NoError(t, fakeChecker(ns, svc, slice(true)).check(context.Background(), gate))
}

func TestInClusterTokenNeedsTheServiceAccount(t *testing.T) {
	err := fakeChecker().check(context.Background(), poolspec.ReadinessGate{Type: "InClusterToken", Namespace: "demo", ServiceAccount: "agent"})
	assert.ErrorContains(t, err, "serviceaccount demo/agent: not found (an addon must create it)")
}

func TestCRDExistsMissing(t *testing.T) {
	err := Check(context.Background(), &rest.Config{Host: "http://127.0.0.1:1"}, poolspec.ReadinessGate{Type: "CRDExists", Name: "widgets.example.com"})
	assert.ErrorContains(t, err, "crd widgets.example.com")
}

func TestURLHealthy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/moved":
			http.Redirect(w, r, "/nowhere", http.StatusFound) // 3xx passes; not followed
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: "http://127.0.0.1:1"} // URLHealthy never talks to the cluster
	ctx := context.Background()
	assert.NoError(t, Check(ctx, cfg, poolspec.ReadinessGate{Type: "URLHealthy", URL: srv.URL + "/ok"}))
	assert.NoError(t, Check(ctx, cfg, poolspec.ReadinessGate{Type: "URLHealthy", URL: srv.URL + "/moved"}))
	err := Check(ctx, cfg, poolspec.ReadinessGate{Type: "URLHealthy", URL: srv.URL + "/down"})
	assert.ErrorContains(t, err, "503 Service Unavailable")
}

func TestWaitAllListsWhatIsPending(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/late" && !healthy.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	gates := []poolspec.ReadinessGate{
		{Type: "URLHealthy", URL: srv.URL + "/ok"},
		{Type: "URLHealthy", URL: srv.URL + "/late"},
	}

	// A gate that passes later: WaitAll reports it pending, then returns nil.
	var reports []string
	err := WaitAll(context.Background(), cfg, gates, time.Millisecond, func(p string) {
		reports = append(reports, p)
		healthy.Store(true)
	})
	require.NoError(t, err)
	require.Len(t, reports, 1)
	assert.Equal(t, "URLHealthy "+srv.URL+"/late: url "+srv.URL+"/late: 503 Service Unavailable", reports[0])

	// A gate that never passes: the error names it and its reason when ctx ends.
	healthy.Store(false)
	gates = append(gates, poolspec.ReadinessGate{Type: "URLHealthy", URL: srv.URL + "/late"})
	ctx, cancel := context.WithCancel(context.Background())
	err = WaitAll(ctx, cfg, gates, time.Millisecond, func(string) { cancel() })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 of 3 readiness gates not passed")
	assert.Contains(t, err.Error(), "/late: 503 Service Unavailable")

	err = WaitAll(context.Background(), cfg, []poolspec.ReadinessGate{{Type: "Telepathy"}}, time.Millisecond, nil)
	assert.ErrorIs(t, err, ErrUnsupported, "an unknown gate fails at once")
}

func TestDescribe(t *testing.T) {
	assert.Equal(t, "DeploymentReady kube-system/coredns", Describe(poolspec.ReadinessGate{Type: "DeploymentReady", Namespace: "kube-system", Name: "coredns"}))
	assert.Equal(t, "NodesReady 3", Describe(poolspec.ReadinessGate{Type: "NodesReady", Count: 3}))
	assert.Equal(t, "InClusterToken demo/agent", Describe(poolspec.ReadinessGate{Type: "InClusterToken", Namespace: "demo", ServiceAccount: "agent"}))
}
