package helm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// permission is one verb on one resource of one API group ("" is the core group).
type permission struct{ group, resource, verb string }

func (p permission) String() string {
	g := p.group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s %s", g, p.resource, p.verb)
}

// permissions is a set of them: RBAC rules spelled out, one triple per group, resource and verb.
type permissions map[permission]bool

func (ps permissions) union(other permissions) permissions {
	out := permissions{}
	for p := range ps {
		out[p] = true
	}
	for p := range other {
		out[p] = true
	}
	return out
}

func (ps permissions) equal(other permissions) bool {
	return len(ps) == len(other) && len(ps.union(other)) == len(ps)
}

// diff says what one set has that the other lacks, both ways.
func (ps permissions) diff(want permissions) string {
	var b strings.Builder
	for _, p := range sorted(ps) {
		if !want[p] {
			fmt.Fprintf(&b, "  + %s (rendered, not documented)\n", p)
		}
	}
	for _, p := range sorted(want) {
		if !ps[p] {
			fmt.Fprintf(&b, "  - %s (documented, not rendered)\n", p)
		}
	}
	return b.String()
}

// covers reports whether the rules allow p, with RBAC's wildcards ("*" group, resource, verb).
func (ps permissions) covers(p permission) bool {
	for _, g := range []string{p.group, "*"} {
		for _, r := range []string{p.resource, "*"} {
			for _, v := range []string{p.verb, "*"} {
				if ps[permission{g, r, v}] {
					return true
				}
			}
		}
	}
	return false
}

func sorted(ps permissions) []permission {
	out := make([]permission, 0, len(ps))
	for p := range ps {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// permissionsOf spells out the rules of a Role or ClusterRole.
func permissionsOf(t testing.TB, role *unstructured.Unstructured) permissions {
	t.Helper()
	rules, _, err := unstructured.NestedSlice(role.Object, "rules")
	if err != nil {
		t.Fatalf("%s %s: rules: %v", role.GetKind(), role.GetName(), err)
	}
	out := permissions{}
	for _, r := range rules {
		r := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(r, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(r, "resources")
		verbs, _, _ := unstructured.NestedStringSlice(r, "verbs")
		if len(groups) == 0 || len(resources) == 0 || len(verbs) == 0 {
			t.Fatalf("%s %s: a rule without groups, resources or verbs: %v", role.GetKind(), role.GetName(), r)
		}
		for _, g := range groups {
			for _, res := range resources {
				for _, v := range verbs {
					out[permission{g, res, v}] = true
				}
			}
		}
	}
	return out
}

// docsSections map the headings of docs/deploy.md's RBAC tables to the backends they list.
var docsSections = map[string]string{
	"#### k3s and k0s": "k3s",
	"#### vcluster":    "vcluster",
	"#### capi":        "capi",
}

// rulesOfDocs reads the RBAC tables of docs/deploy.md: under each backend's heading, rows of
// | API groups | resources | verbs |, each cell a comma-separated list, `core` for the core group.
func rulesOfDocs(t testing.TB) map[string]permissions {
	t.Helper()
	f, err := os.Open("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]permissions{}
	current := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			current = docsSections[line]
			if current != "" {
				out[current] = permissions{}
			}
			continue
		}
		if current == "" || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/deploy.md: a row of the %s table without 3 cells: %s", current, line)
		}
		if first := strings.TrimSpace(cells[0]); first == "API group" || strings.HasPrefix(first, "---") {
			continue
		}
		for _, group := range cellList(cells[0]) {
			if group == "core" {
				group = ""
			}
			for _, res := range cellList(cells[1]) {
				for _, verb := range cellList(cells[2]) {
					out[current][permission{group, res, verb}] = true
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"k3s", "vcluster", "capi"} {
		if len(out[b]) == 0 {
			t.Fatalf("docs/deploy.md has no RBAC table for %s", b)
		}
	}
	return out
}

// cellList splits a table cell's comma-separated list.
func cellList(cell string) []string {
	var out []string
	for _, item := range strings.Split(cell, ",") {
		out = append(out, strings.Trim(strings.TrimSpace(item), "`"))
	}
	return out
}

// Each backend's rules in the chart are exactly the ones docs/deploy.md lists for it, and k0s
// has k3s's.
func TestWorkerRulesAreTheDocumentedOnes(t *testing.T) {
	docs := rulesOfDocs(t)
	for _, backend := range []string{"k3s", "k0s", "vcluster", "capi"} {
		t.Run(backend, func(t *testing.T) {
			r := mustRender(t, with(minimalValues(), map[string]any{"workers": []any{
				map[string]any{"name": "default", "backends": []any{backend}},
			}}))
			want := docs[backend]
			if backend == "k0s" {
				want = docs["k3s"]
			}
			got := permissionsOf(t, r.mustFind(t, "ClusterRole", namespace+"-kobe-worker-default"))
			if !got.equal(want) {
				t.Errorf("the %s rules differ from docs/deploy.md:\n%s", backend, got.diff(want))
			}
		})
	}
	// Extra rules are added, not substituted.
	extra := map[string]any{"apiGroups": []any{"networking.k8s.io"}, "resources": []any{"ingresses"}, "verbs": []any{"create", "delete", "patch", "update", "get", "list", "watch"}}
	r := mustRender(t, with(minimalValues(), map[string]any{"workers": []any{
		map[string]any{"name": "default", "backends": []any{"k3s"}, "extraRules": []any{extra}},
	}}))
	got := permissionsOf(t, r.mustFind(t, "ClusterRole", namespace+"-kobe-worker-default"))
	if !got.covers(permission{"networking.k8s.io", "ingresses", "watch"}) || !got.covers(permission{"apps", "statefulsets", "create"}) {
		t.Errorf("extraRules: %s", got.diff(docs["k3s"]))
	}
}

// The vcluster rules cover what the vcluster backend's Helm release does in the host cluster:
// the chart (the one kobe installs, with kobe's built-in values) is rendered, and for every
// object it makes Helm needs get, create, patch and delete; for its Role and ClusterRole, the
// worker must hold every permission they grant (Kubernetes refuses to let a ServiceAccount grant
// more than it holds); Helm's release records are Secrets of the namespace.
func TestVclusterRulesCoverItsChart(t *testing.T) {
	objects := renderVclusterChart(t, "c0ffee")
	need := permissions{}
	for _, verb := range []string{"create", "get", "list", "update", "delete"} {
		need[permission{"", "secrets", verb}] = true // Helm's release records
	}
	for _, o := range objects {
		gvk := o.GroupVersionKind()
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		for _, verb := range []string{"get", "create", "patch", "delete"} {
			need[permission{gvr.Group, gvr.Resource, verb}] = true
		}
		if gvk.Kind == "Role" || gvk.Kind == "ClusterRole" {
			need = need.union(permissionsOf(t, o))
		}
	}
	r := mustRender(t, with(minimalValues(), map[string]any{"workers": []any{
		map[string]any{"name": "default", "backends": []any{"vcluster"}},
	}}))
	have := permissionsOf(t, r.mustFind(t, "ClusterRole", namespace+"-kobe-worker-default"))
	for _, p := range sorted(need) {
		if !have.covers(p) {
			t.Errorf("the vcluster rules lack %s, which the vcluster chart needs", p)
		}
	}
}

// renderVclusterChart renders the chart the vcluster backend installs, with kobe's built-in
// values, for instance id (its release, in its namespace): the objects of the release.
func renderVclusterChart(t testing.TB, id string) []*unstructured.Unstructured {
	t.Helper()
	dir := vclusterChartDir(t)
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("loading the vcluster chart %s: %v", dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	values, err := chartutil.ToRenderValues(c, vcluster.BuiltinValues(),
		chartutil.ReleaseOptions{Name: id, Namespace: vcluster.Namespace(id), IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := engine.Render(c, values)
	if err != nil {
		t.Fatalf("rendering the vcluster chart: %v", err)
	}
	var out []*unstructured.Unstructured
	kinds := map[string]bool{}
	for name, manifest := range manifests {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		objs, err := decode(manifest)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, o := range objs {
			kinds[o.GetKind()] = true
			out = append(out, o)
		}
	}
	for _, k := range []string{"StatefulSet", "Role", "ClusterRole"} {
		if !kinds[k] {
			t.Fatalf("the vcluster chart %s rendered no %s: is it the chart kobe installs? (kinds: %v)", dir, k, kinds)
		}
	}
	// Roles before their bindings, as Helm installs them.
	sort.SliceStable(out, func(i, j int) bool { return installOrder(out[i].GetKind()) < installOrder(out[j].GetKind()) })
	return out
}

func installOrder(kind string) int {
	switch kind {
	case "ServiceAccount", "Secret", "ConfigMap":
		return 0
	case "ClusterRole", "Role":
		return 1
	case "ClusterRoleBinding", "RoleBinding":
		return 2
	default:
		return 3
	}
}

// vclusterChartDir is the chart the vcluster backend installs by default: $KOBE_VCLUSTER_CHART
// when it is a directory, else the one `make tools` copied, else the chart/ folder of the
// vcluster Go module that copy is made from (hack/tools/vcluster pins its version; the module
// zip's Chart.yaml carries a placeholder version, which no template the tests read depends on).
func vclusterChartDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(vcluster.ChartEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "Chart.yaml")); err == nil {
			return d
		}
	}
	if dir, _ := vcluster.ToolsChart(local.DefaultToolsDir()); dir != "" {
		return dir
	}
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/loft-sh/vcluster")
	cmd.Dir = "../../hack/tools/vcluster"
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Error != "" {
		t.Skipf("no vcluster chart: not in the tools (`make tools`), not in $%s, and the vcluster module does not download: %v %s", vcluster.ChartEnv, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "chart")
}

// selfSignedPEM is a certificate for name signed by a CA made for the test, and its key.
func selfSignedPEM(t testing.TB, name string) (cert, key string) {
	t.Helper()
	ca, err := pki.NewCA("kobe chart test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := ca.IssueServing(name, []string{name}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return string(cred.CertPEM), string(cred.KeyPEM)
}
