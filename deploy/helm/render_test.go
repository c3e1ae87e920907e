// Package helm_test tests kobe's Helm chart (deploy/helm/kobe) with the Helm Go SDK: lint, the
// objects rendered from several value sets, the values schema, the workers' RBAC against
// docs/deploy.md and the vcluster chart, and a server-side dry-run of every rendered object
// against a real kube-apiserver. The tests sit beside the chart so that a change to the chart
// and its test go together; docs/deploy.md, "The Helm chart", describes what they check.
package helm_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "kobe"
	releaseName = "kobe"
	namespace   = "kobe-system"
)

// kubeVersion is the Kubernetes the chart is rendered for: the one `make tools` builds.
var kubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}

// A sealing key: base64 of 32 bytes (all zero: a test value).
const testSealingKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

// minimalValues are the values an install cannot do without: the store, the sealing key,
// Temporal's address and the API's certificate (an existing Secret).
func minimalValues() map[string]any {
	return map[string]any{
		"store":    map[string]any{"dsn": "postgres://kobe:secret@postgres.db.svc:5432/kobe?sslmode=verify-full"},
		"sealing":  map[string]any{"key": testSealingKey},
		"temporal": map[string]any{"address": "temporal-frontend.temporal.svc:7233"},
		"api":      map[string]any{"tls": map[string]any{"existingSecret": "kobe-api-tls"}},
	}
}

// with returns values with more merged over them, as a second values file would be (a copy:
// the argument is left as it was).
func with(values map[string]any, more map[string]any) map[string]any {
	return chartutil.CoalesceTables(deepCopy(more), deepCopy(values))
}

func deepCopy(m map[string]any) map[string]any {
	b, err := yaml.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// rendered is one `helm install --dry-run` of the chart: the release's objects and its hooks.
type rendered struct {
	Objects []*unstructured.Unstructured
	Hooks   []*unstructured.Unstructured
	Notes   string
}

// all is every object, hooks first (the order Helm creates them in on install).
func (r rendered) all() []*unstructured.Unstructured {
	return append(append([]*unstructured.Unstructured{}, r.Hooks...), r.Objects...)
}

// find returns the object of a kind and name, among the objects and the hooks.
func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.all() {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r rendered) mustFind(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	o := r.find(kind, name)
	if o == nil {
		t.Fatalf("no %s %s among %s", kind, name, r.names())
	}
	return o
}

func (r rendered) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.all() {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r rendered) names() string {
	var out []string
	for _, o := range r.all() {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// render installs the chart client-side (no cluster: Helm's dry-run with its fake client), as
// `helm install --dry-run` does: the values are checked against values.schema.json, the
// templates rendered, the hooks set apart.
func render(t testing.TB, values map[string]any) (rendered, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.ClientOnly = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.KubeVersion = &kubeVersion
	rel, err := inst.Run(loadChart(t), values)
	if err != nil {
		return rendered{}, err
	}
	var out rendered
	out.Notes = rel.Info.Notes
	if out.Objects, err = decode(rel.Manifest); err != nil {
		return rendered{}, err
	}
	for _, h := range rel.Hooks {
		objs, err := decode(h.Manifest)
		if err != nil {
			return rendered{}, fmt.Errorf("hook %s: %w", h.Path, err)
		}
		out.Hooks = append(out.Hooks, objs...)
	}
	return out, nil
}

func mustRender(t testing.TB, values map[string]any) rendered {
	t.Helper()
	r, err := render(t, values)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return r
}

// decode splits a manifest into its objects, refusing a document that is not one.
func decode(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(manifest) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if strings.TrimSpace(string(js)) == "null" {
			continue // a template that rendered nothing
		}
		// UnmarshalJSON keeps integers as int64, as the API machinery's helpers expect.
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if o.GetKind() == "" || o.GetAPIVersion() == "" || o.GetName() == "" {
			return nil, fmt.Errorf("a document without kind, apiVersion or name:\n%s", doc)
		}
		out = append(out, o)
	}
	return out, nil
}

// podSpec is the pod template's spec of a Deployment or Job.
func podSpec(t testing.TB, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, ok, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if err != nil || !ok {
		t.Fatalf("%s %s has no pod template: %v", o.GetKind(), o.GetName(), err)
	}
	return spec
}

// containers are the containers and init containers of a pod spec.
func containers(spec map[string]any) []map[string]any {
	var out []map[string]any
	for _, field := range []string{"initContainers", "containers"} {
		list, _, _ := unstructured.NestedSlice(spec, field)
		for _, c := range list {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

// args are a container's arguments.
func args(t testing.TB, c map[string]any) []string {
	t.Helper()
	list, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		t.Fatalf("container %v: args: %v", c["name"], err)
	}
	return list
}

func str(m map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(m, path...)
	return s
}

func num(m map[string]any, path ...string) int64 {
	n, _, _ := unstructured.NestedInt64(m, path...)
	return n
}

func boolean(m map[string]any, path ...string) (value, set bool) {
	v, ok, _ := unstructured.NestedBool(m, path...)
	return v, ok
}
