package helm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/k3s"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
)

// monitoringGroup is the Prometheus Operator's API group (ServiceMonitor, PrometheusRule): a bare
// API server does not serve it. The operator's own CRD files are in no Go module the module proxy
// serves here (the prometheus-operator module is refused; its pkg/apis/monitoring module carries
// the Go types only), so the test generates the CRDs from those types with controller-gen, the
// generator upstream makes them with (hack/tools/monitoring-crds pins the version). Without
// controller-gen in the tools, objects of that group are left out of the dry-run, and said so.
const monitoringGroup = "monitoring.coreos.com"

// The chart on a real kube-apiserver (hostcluster: kwok nodes, pods reported Running, nothing
// executes), one for every subtest.
func TestChartOnAKubeAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver; skipped with -short")
	}
	requireHostClusterTools(t)
	host := hostcluster.Start(t, hostcluster.Options{Nodes: 1})
	t.Run("every rendered object passes a server-side dry-run", func(t *testing.T) { dryRunEveryObject(t, host) })
	t.Run("the vcluster rules let the worker install the vcluster chart", func(t *testing.T) { workerInstallsTheVclusterChart(t, host) })
	t.Run("the k3s rules let the worker run an instance", func(t *testing.T) { workerRunsAK3sInstance(t, host) })
}

// Every object of every value set passes a server-side dry-run (dryRun=All, strict field
// validation) in a namespace that enforces the restricted Pod Security profile: each pod
// template is also dry-run as a Pod there, which the API server's PodSecurity admission refuses
// if it is not restricted. No warning may come back.
func dryRunEveryObject(t *testing.T, host *hostcluster.Cluster) {
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(host.Config)
	cfg.WarningHandler = warnings
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(host.Client.Discovery()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	if _, err := host.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForDefaultServiceAccount(ctx, t, host)
	monitoringCRDs := installMonitoringCRDs(ctx, t, dyn)
	mapper.Reset()

	sets := valueSets(t)
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, sets[name])
			var skipped []string
			for _, o := range r.all() {
				what := o.GetKind() + " " + o.GetName()
				gvk := o.GroupVersionKind()
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if meta.IsNoMatchError(err) && gvk.Group == monitoringGroup {
					skipped = append(skipped, what)
					continue
				}
				if err != nil {
					t.Errorf("%s: the API server does not serve %s: %v", what, gvk, err)
					continue
				}
				if err := dryRunCreate(ctx, dyn, mapping, o, warnings); err != nil {
					t.Errorf("%s: %v", what, err)
				}
				if o.GetKind() == "Deployment" || o.GetKind() == "Job" {
					if err := dryRunCreate(ctx, dyn, podMapping, podOf(t, o), warnings); err != nil {
						t.Errorf("a pod of %s: %v", what, err)
					}
				}
			}
			if len(skipped) > 0 {
				t.Logf("not dry-run (%s): %s", monitoringCRDs, strings.Join(skipped, ", "))
			}
		})
	}
}

var podMapping = &meta.RESTMapping{
	Resource: corev1.SchemeGroupVersion.WithResource("pods"),
	Scope:    meta.RESTScopeNamespace,
}

// dryRunCreate creates o with dryRun=All and strict field validation: an unknown or duplicate
// field is an error, and so is any warning the API server sends back.
func dryRunCreate(ctx context.Context, dyn dynamic.Interface, mapping *meta.RESTMapping, o *unstructured.Unstructured, w *warningRecorder) error {
	ri := dyn.Resource(mapping.Resource)
	var client dynamic.ResourceInterface = ri
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		client = ri.Namespace(namespace)
	}
	w.reset()
	_, err := client.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		return err
	}
	if got := w.reset(); len(got) > 0 {
		return fmt.Errorf("warnings: %s", strings.Join(got, "; "))
	}
	return nil
}

// podOf is a Pod with a workload's pod template, as its controller would make it. It runs as the
// namespace's default ServiceAccount: the chart's are not created by a dry-run, and the API
// server refuses a pod whose ServiceAccount does not exist.
func podOf(t testing.TB, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	tmpl, _, err := unstructured.NestedMap(o.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": tmpl["metadata"], "spec": tmpl["spec"]}}
	if pod.Object["metadata"] == nil {
		pod.Object["metadata"] = map[string]any{}
	}
	pod.SetName(o.GetName() + "-pod")
	unstructured.RemoveNestedField(pod.Object, "spec", "serviceAccountName")
	return pod
}

func waitForDefaultServiceAccount(ctx context.Context, t testing.TB, host *hostcluster.Cluster) {
	t.Helper()
	for {
		_, err := host.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespace %s got no default ServiceAccount: %v", namespace, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// installMonitoringCRDs generates the ServiceMonitor and PrometheusRule CRDs from the Prometheus
// Operator's API types with controller-gen and installs them, waiting until they are served. It
// returns why they are not there when it cannot (no controller-gen in the tools) and fails the
// test when they do not install.
func installMonitoringCRDs(ctx context.Context, t testing.TB, dyn dynamic.Interface) (absent string) {
	t.Helper()
	gen, err := local.Tools{Dir: local.DefaultToolsDir()}.Newest("controller-gen", "controller-gen")
	if err != nil {
		// In CI (.ci/run) controller-gen is one of the tools: the dry-run of the monitoring
		// objects is never left out there.
		if os.Getenv("KOBE_TEST_REQUIRE_CONTROLLER_GEN") == "1" {
			t.Fatalf("no controller-gen for the %s CRDs (KOBE_TEST_REQUIRE_CONTROLLER_GEN=1): %v", monitoringGroup, err)
		}
		return fmt.Sprintf("no %s CRDs: %v", monitoringGroup, err)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, gen, "crd", "paths="+monitoringTypes, "output:crd:dir="+out)
	cmd.Dir = "../../hack/tools/monitoring-crds"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen of the %s CRDs: %v\n%s", monitoringGroup, err, b)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, plural := range []string{"servicemonitors", "prometheusrules"} {
		data, err := os.ReadFile(filepath.Join(out, monitoringGroup+"_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decode(string(data))
		if err != nil || len(objs) != 1 {
			t.Fatalf("the %s CRD: %v (%d objects)", plural, err, len(objs))
		}
		if _, err := crds.Create(ctx, objs[0], metav1.CreateOptions{}); err != nil {
			t.Fatalf("installing the %s CRD: %v", plural, err)
		}
		for {
			got, err := crds.Get(ctx, objs[0].GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if established(got) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the %s CRD is not Established: %v", plural, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return ""
}

// monitoringTypes is the package of the ServiceMonitor and PrometheusRule types.
const monitoringTypes = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

func established(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		c := c.(map[string]any)
		if c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// requireHostClusterTools skips the test, naming what is missing, when `make tools` has not
// built what hostcluster.Start runs.
func requireHostClusterTools(t testing.TB) {
	t.Helper()
	tools := local.Tools{Dir: local.DefaultToolsDir()}
	if len(tools.KubernetesVersions()) == 0 {
		t.Skipf("no kube-apiserver in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools.Dir)
	}
	for _, tool := range []string{"kine", "kwok"} {
		if _, err := tools.Newest(tool, tool); err != nil {
			t.Skipf("%v", err)
		}
	}
}

// warningRecorder keeps the warnings the API server sends (rest.WarningHandler).
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// reset returns the warnings seen since the last reset.
func (w *warningRecorder) reset() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// The vcluster rules hold everything the vcluster chart's release grants: the worker's
// ClusterRole and binding are installed for real, then, as the worker's ServiceAccount, every
// object of the vcluster chart (rendered as the backend installs it) is created in an instance's
// namespace: its Role and ClusterRole for real, the rest with dryRun=All. The API server's RBAC
// refuses a Role or ClusterRole that grants what its creator does not hold, and a binding to
// one: this is the check Kubernetes makes at install.
func workerInstallsTheVclusterChart(t *testing.T, host *hostcluster.Cluster) {
	chartObjects := renderVclusterChart(t, "c0ffee")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(host.Client.Discovery()))
	installWorkerRBAC(ctx, t, host, "vc", "vcluster")

	if _, err := host.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vcluster.Namespace("c0ffee")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asWorker := rest.CopyConfig(host.Config)
	asWorker.Impersonate = rest.ImpersonationConfig{UserName: workerUser("vc")}
	worker := dynamic.NewForConfigOrDie(asWorker)
	// RBAC is cached by the API server's authorizer: the binding may take a moment to count.
	deadline := time.Now().Add(30 * time.Second)
	for _, o := range chartObjects {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		var client dynamic.ResourceInterface = worker.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			client = worker.Resource(mapping.Resource).Namespace(vcluster.Namespace("c0ffee"))
		}
		// The roles are created for real: the API server judges a binding by the rules of the
		// role it names, which must exist.
		opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			opts.DryRun = nil
		}
		for {
			_, err = client.Create(ctx, o, opts)
			if err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("the worker cannot create the vcluster chart's %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// The k3s rules are all the k3s backend needs: as the worker's ServiceAccount (a kubeconfig that
// impersonates it, the worker's --host-kubeconfig), the backend registered for k3s preflights,
// creates, reads, sleeps, resumes and deletes an instance (with an agent, a fixed NodePort and a
// claim per server) in a pool's namespace. The host is kwok's: the pods are reported Running and
// nothing runs, so the instance never answers, which this does not need.
func workerRunsAK3sInstance(t *testing.T, host *hostcluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	installWorkerRBAC(ctx, t, host, "k3s", "k3s")
	const poolNamespace = "k3s-pool"
	if _, err := host.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: poolNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := clientcmd.Load(host.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range kubeconfig.AuthInfos {
		auth.Impersonate = workerUser("k3s")
	}
	path := filepath.Join(t.TempDir(), "worker.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	factory, ok := backends.Lookup(k3s.Name)
	if !ok {
		t.Fatal("no k3s backend registered")
	}
	rb, err := factory.New(backends.Environment{StateDir: t.TempDir(), HostID: "helm-test", HostKubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	b := rb.(interface {
		backends.RuntimeBackend
		backends.Preflighter
		backends.Sleeper
		Leftovers(ctx context.Context, id string) ([]string, error)
	})
	spec := backends.InstanceSpec{ID: "rbac", Pool: "rbac", KubernetesVersion: "v1.33.1+k3s1", Options: json.RawMessage(`{"namespace":"` + poolNamespace + `",` +
		`"cluster":{"agents":1,"expose":{"exposeType":"NodePort","nodePort":30555},"persistence":{"storageType":"pvc","storageRequestSize":"1Gi"}}}`)}
	// The authorizer may take a moment to count a new binding.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = b.Preflight(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("preflight as the worker: %v", err)
	}
	if _, err := b.Create(ctx, spec); err != nil {
		t.Fatalf("create as the worker: %v", err)
	}
	for {
		st, err := b.Status(ctx, spec.ID)
		if err != nil {
			t.Fatalf("status as the worker: %v", err)
		}
		// The claims exist once the StatefulSet controller made them: then every object is there.
		pvcs, _ := host.Client.CoreV1().PersistentVolumeClaims(poolNamespace).List(ctx, metav1.ListOptions{})
		if len(pvcs.Items) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the instance's claim never came: %+v", st)
		case <-time.After(300 * time.Millisecond):
		}
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := b.Sleep(sctx, spec.ID); err != nil {
		t.Errorf("sleep as the worker: %v", err)
	}
	if err := b.Resume(ctx, spec.ID); err != nil {
		t.Errorf("resume as the worker: %v", err)
	}
	if err := b.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("delete as the worker: %v", err)
	}
	left, err := b.Leftovers(ctx, spec.ID)
	if err != nil || len(left) > 0 {
		t.Errorf("after delete as the worker: %v left, %v", left, err)
	}
}

// workerUser is the user name of a worker entry's ServiceAccount.
func workerUser(worker string) string {
	return "system:serviceaccount:" + namespace + ":kobe-worker-" + worker
}

// installWorkerRBAC installs for real the ServiceAccount, ClusterRole and ClusterRoleBinding the
// chart makes for a worker entry with one backend, in the release's namespace (made if absent).
func installWorkerRBAC(ctx context.Context, t testing.TB, host *hostcluster.Cluster, worker, backend string) {
	t.Helper()
	_, err := host.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r := mustRender(t, with(minimalValues(), map[string]any{"workers": []any{
		map[string]any{"name": worker, "hostClusterName": worker, "backends": []any{backend}},
	}}))
	admin := dynamic.NewForConfigOrDie(host.Config)
	name := "kobe-worker-" + worker
	for _, o := range []*unstructured.Unstructured{
		r.mustFind(t, "ServiceAccount", name),
		r.mustFind(t, "ClusterRole", namespace+"-"+name),
		r.mustFind(t, "ClusterRoleBinding", namespace+"-"+name),
	} {
		gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
		var client dynamic.ResourceInterface = admin.Resource(gvr)
		if o.GetKind() == "ServiceAccount" {
			client = admin.Resource(gvr).Namespace(namespace)
		}
		if _, err := client.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("installing %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
