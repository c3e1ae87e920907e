package helm_test

import (
	"context"
	"fmt"
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
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
)

// monitoringGroup is the Prometheus Operator's API group: a bare API server does not serve it,
// and its CRDs are not in any Go module the module proxy serves here (the prometheus-operator
// module is refused; its pkg/apis/monitoring module carries the Go types only), so objects of
// that group are left out of the dry-run and checked by the template tests only.
const monitoringGroup = "monitoring.coreos.com"

// Every object of every value set passes a server-side dry-run (dryRun=All, strict field
// validation) on a real kube-apiserver, in a namespace that enforces the restricted Pod
// Security profile: each pod template is also dry-run as a Pod there, which the API server's
// PodSecurity admission refuses if it is not restricted. No warning may come back.
func TestRenderedObjectsPassServerSideDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver; skipped with -short")
	}
	requireHostClusterTools(t)
	host := hostcluster.Start(t, hostcluster.Options{Nodes: 1})
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
				t.Logf("not dry-run (no %s CRDs on a bare API server): %s", monitoringGroup, strings.Join(skipped, ", "))
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
