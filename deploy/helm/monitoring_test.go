package helm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// With monitoring on: a ServiceMonitor scraping the API (HTTPS, checked against the API's CA)
// and the workers, the alert rules, and the dashboard, whose every kobe series is one kobe
// exports.
func TestMonitoring(t *testing.T) {
	r := mustRender(t, valueSets(t)["monitoring"])
	sm := r.mustFind(t, "ServiceMonitor", "kobe")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 2 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want the API's and the workers'", len(endpoints))
	}
	apiEP := endpoints[0].(map[string]any)
	if str(apiEP, "port") != "https" || str(apiEP, "scheme") != "https" ||
		str(apiEP, "tlsConfig", "serverName") != "kobe-api.kobe-system.svc" ||
		str(apiEP, "tlsConfig", "ca", "secret", "name") != "kobe-api-tls" {
		t.Errorf("the API's scrape: %v", apiEP)
	}
	if workerEP := endpoints[1].(map[string]any); str(workerEP, "port") != "metrics" {
		t.Errorf("the workers' scrape: %v", workerEP)
	}
	// Each scraped port is a port of a Service the chart makes.
	ports := map[string]bool{}
	for _, svc := range r.ofKind("Service") {
		list, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range list {
			ports[str(p.(map[string]any), "name")] = true
		}
	}
	for _, ep := range endpoints {
		if port := str(ep.(map[string]any), "port"); !ports[port] {
			t.Errorf("the ServiceMonitor scrapes port %q, which no Service has", port)
		}
	}

	rule := r.mustFind(t, "PrometheusRule", "kobe")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	var exprs []string
	alerts := map[string]bool{}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, rl := range rules {
			rl := rl.(map[string]any)
			alerts[str(rl, "alert")] = true
			exprs = append(exprs, str(rl, "expr"))
		}
	}
	for _, a := range []string{"KobePoolExhausted", "KobeQueueWait", "KobeCertificateExpiring", "KobeClustersQuarantined", "KobeStuckCreating", "KobeNoWorkers"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}

	cm := r.mustFind(t, "ConfigMap", "kobe-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's labels %v lack Grafana's sidecar label", cm.GetLabels())
	}
	raw := str(cm.Object, "data", "kobe.json")
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no panel")
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}

	exported := exportedSeries(t)
	series := regexp.MustCompile(`\bkobe_[a-z_]+`)
	for _, e := range exprs {
		for _, name := range series.FindAllString(e, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
			if !exported[base] {
				t.Errorf("%q names %s, which kobe does not export", e, name)
			}
		}
	}
}

// exportedSeries are the kobe_* metric names written as string literals in kobe's Go source
// (tests aside): the names its collectors and its workflows' metrics declare.
func exportedSeries(t testing.TB) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	literal := regexp.MustCompile(`"(kobe_[a-z_]+)"`)
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testsuite" || d.Name() == ".cache" || d.Name() == "build" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range literal.FindAllSubmatch(data, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out["kobe_clusters"] {
		t.Fatal("found no kobe_clusters in kobe's source: is this the repository's root?")
	}
	return out
}
