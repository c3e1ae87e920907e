package readiness_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/addons"
	"github.com/kunobi-ninja/kobe/internal/readiness"
	"github.com/kunobi-ninja/kobe/poolspec"
)

const kubeVersion = "v1.37.2"

// The addon a pool author would write: a namespace, a service account, a CRD and one of its
// custom resources (after the CRD in the manifest on purpose: Apply waits for it), a Deployment
// and a DaemonSet. Out of order on purpose: Apply must put the Namespace and the CRD first.
const demoAddon = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: agent
      containers: [{name: web, image: nginx}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: first, namespace: demo}
spec: {size: 3}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: agent, namespace: demo}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: demo}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec: {containers: [{name: agent, image: busybox}]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: v1
kind: Namespace
metadata: {name: demo}
`

// A stand-in for cluster DNS: the local backend runs no DNS, and kwok's pods never answer a
// query, but the Service and its ready endpoints are what DNSHealthy looks at.
const fakeDNSAddon = `
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec:
  selector: {k8s-app: kube-dns}
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec: {containers: [{name: coredns, image: coredns/coredns}]}
`

// startInstance starts a real local instance with a scheduler, a controller-manager and one
// kwok node, and returns its admin client config.
func startInstance(t *testing.T) *rest.Config {
	t.Helper()
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	b, err := local.New(local.Config{StateDir: t.TempDir(), HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	ctx := context.Background()
	id := "gates"
	t.Cleanup(func() { _ = b.Delete(context.Background(), id) })
	_, err = b.Create(ctx, backends.InstanceSpec{ID: id, Pool: "readiness", KubernetesVersion: kubeVersion,
		Options: []byte(`{"components":["apiserver","controller-manager","scheduler","kwok"],"nodes":1}`)})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	_, err = b.WaitReady(wctx, id, nil)
	require.NoError(t, err)
	t.Logf("instance ready (1 kwok node) in %s", time.Since(t0).Round(time.Millisecond))
	cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(t, err)
	return cfg
}

// passWithin checks a gate until it passes (failing the test after a generous deadline) and
// returns how long that took, and the reasons reported while it had not passed.
func passWithin(t *testing.T, cfg *rest.Config, g poolspec.ReadinessGate) (time.Duration, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	var reasons []string
	for {
		err := readiness.Check(ctx, cfg, g)
		if err == nil {
			return time.Since(t0), reasons
		}
		if len(reasons) == 0 || reasons[len(reasons)-1] != err.Error() {
			reasons = append(reasons, err.Error())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not pass: %v", readiness.Describe(g), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestGatesOnARealCluster applies addons to a real local instance and checks every gate type
// against it, the way Provision does before a member joins its pool.
func TestGatesOnARealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real control-plane processes; skipped with -short")
	}
	cfg := startInstance(t)
	ctx := context.Background()

	// DNSHealthy before there is any DNS: a clear reason, not a pass.
	dnsGate := poolspec.ReadinessGate{Type: "DNSHealthy", Namespace: "default"}
	err := readiness.Check(ctx, cfg, dnsGate)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no kube-dns or coredns service in kube-system")

	// A URL fetched addon, from a test server.
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/dns.yaml" {
			_, _ = rw.Write([]byte(fakeDNSAddon))
		}
	}))
	defer srv.Close()

	t0 := time.Now()
	demo := poolspec.Addon{Name: "demo", Manifest: demoAddon}
	require.NoError(t, addons.Apply(ctx, cfg, demo, nil))
	t.Logf("addon demo applied (namespace, CRD established, custom resource, SA, deployment, daemonset) in %s",
		time.Since(t0).Round(time.Millisecond))
	t1 := time.Now()
	require.NoError(t, addons.Apply(ctx, cfg, poolspec.Addon{Name: "dns", URL: srv.URL + "/dns.yaml"}, nil))
	t.Logf("addon dns (from a URL) applied in %s", time.Since(t1).Round(time.Millisecond))

	// Checked in turn right after the addons, as Provision does; each gate's time is from the
	// end of the addons.
	gates := []poolspec.ReadinessGate{
		{Type: "CRDExists", Name: "widgets.example.com"},
		{Type: "NodesReady", Count: 1},
		{Type: "InClusterToken", Namespace: "demo", ServiceAccount: "agent"},
		{Type: "DeploymentReady", Namespace: "demo", Name: "web"},
		{Type: "DaemonSetReady", Namespace: "demo", Name: "node-agent"},
		{Type: "SchedulingProbe", Namespace: "demo"},
		{Type: "URLHealthy", URL: srv.URL + "/dns.yaml"},
		dnsGate,
	}
	start := time.Now()
	for _, g := range gates {
		took, reasons := passWithin(t, cfg, g)
		since := time.Since(start).Round(time.Millisecond)
		if len(reasons) > 0 {
			t.Logf("%-40s passed after %s, %s after the addons (until then: %s)", readiness.Describe(g),
				took.Round(time.Millisecond), since, strings.Join(reasons, " → "))
		} else {
			t.Logf("%-40s passed at its first check (%s), %s after the addons", readiness.Describe(g), took.Round(time.Millisecond), since)
		}
	}

	// DeploymentReady was not vacuous: the pod runs on the kwok node.
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	webPods, err := kube.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, webPods.Items, 1)
	assert.Equal(t, corev1.PodRunning, webPods.Items[0].Status.Phase)
	assert.NotEmpty(t, webPods.Items[0].Spec.NodeName)

	// Applying again is harmless, and the custom resource is there as written, owned by kobe.
	t0 = time.Now()
	require.NoError(t, addons.Apply(ctx, cfg, demo, nil))
	t.Logf("addon demo applied again in %s", time.Since(t0).Round(time.Millisecond))
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	w, err := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).
		Namespace("demo").Get(ctx, "first", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(3), w.Object["spec"].(map[string]any)["size"])
	assert.Equal(t, addons.FieldManager, w.GetManagedFields()[0].Manager)

	// WaitAll agrees, at once.
	t0 = time.Now()
	require.NoError(t, readiness.WaitAll(ctx, cfg, gates, time.Second, nil))
	t.Logf("WaitAll of the %d gates, all passing: %s", len(gates), time.Since(t0).Round(time.Millisecond))

	// The scheduling probe leaves no pod behind.
	require.Eventually(t, func() bool {
		pods, err := kube.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "kobe.kunobi.ninja/probe=scheduling"})
		return err == nil && len(pods.Items) == 0
	}, time.Minute, 250*time.Millisecond, "probe pods deleted")

	// A gate on a deployment nobody created fails, and says why.
	missing := poolspec.ReadinessGate{Type: "DeploymentReady", Namespace: "demo", Name: "missing"}
	err = readiness.Check(ctx, cfg, missing)
	require.Error(t, err)
	assert.Equal(t, "deployment demo/missing: not found", err.Error())
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var pending []string
	err = readiness.WaitAll(wctx, cfg, append(gates[:2:2], missing), 500*time.Millisecond, func(p string) { pending = append(pending, p) })
	require.Error(t, err)
	assert.Equal(t, "1 of 3 readiness gates not passed: DeploymentReady demo/missing: deployment demo/missing: not found", err.Error())
	require.NotEmpty(t, pending)
	assert.Equal(t, "DeploymentReady demo/missing: deployment demo/missing: not found", pending[0])

	// A deployment whose pods can never be placed: the gate says how many are available.
	require.NoError(t, addons.Apply(ctx, cfg, poolspec.Addon{Name: "stuck", Manifest: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec:
      nodeSelector: {disk: none-has-it}
      containers: [{name: c, image: nginx}]
`}, nil))
	stuck := poolspec.ReadinessGate{Type: "DeploymentReady", Namespace: "demo", Name: "stuck"}
	var last error
	require.Eventually(t, func() bool {
		last = readiness.Check(ctx, cfg, stuck)
		return last != nil && last.Error() == "deployment demo/stuck: 0/2 replicas available"
	}, 2*time.Minute, 250*time.Millisecond, "last: %v", &last)

	// A cordoned node: the scheduling probe reports the scheduler's reason.
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	_, err = kube.CoreV1().Nodes().Patch(ctx, nodes.Items[0].Name, types.MergePatchType,
		[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	err = readiness.Check(ctx, cfg, poolspec.ReadinessGate{Type: "SchedulingProbe", Namespace: "demo"})
	require.Error(t, err)
	t.Logf("cordoned: %v", err)
	assert.Contains(t, err.Error(), "scheduling probe in demo: unschedulable: 0/1 nodes are available")

	// An InClusterToken gate on an account no addon created says so.
	err = readiness.Check(ctx, cfg, poolspec.ReadinessGate{Type: "InClusterToken", Namespace: "demo", ServiceAccount: "nobody"})
	require.Error(t, err)
	assert.Equal(t, "serviceaccount demo/nobody: not found (an addon must create it)", err.Error())

	// An addon the API server refuses names the addon and the object.
	err = addons.Apply(ctx, cfg, poolspec.Addon{Name: "bad", Manifest: `
apiVersion: v1
kind: ConfigMap
metadata: {name: ok, namespace: demo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: no-selector, namespace: demo}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
`}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `addon "bad": Deployment demo/no-selector: `)
	assert.ErrorIs(t, err, addons.ErrInvalid, "refused as written: retrying will not help")
}
