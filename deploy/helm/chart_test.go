package helm_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
)

// The chart's version is the release's without its "v", its appVersion the release itself (the
// image's tag): the Makefile's VERSION, which is kobe's release.
func TestChartVersionIsTheRelease(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (v\S+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("no `VERSION ?= v…` line in the Makefile")
	}
	version := string(m[1])
	if version != buildinfo.Release {
		t.Fatalf("the Makefile's VERSION %s is not kobe's release %s", version, buildinfo.Release)
	}
	c := loadChart(t)
	if c.Metadata.AppVersion != version {
		t.Errorf("Chart.yaml appVersion %q, want %q", c.Metadata.AppVersion, version)
	}
	if c.Metadata.Version != strings.TrimPrefix(version, "v") {
		t.Errorf("Chart.yaml version %q, want %q", c.Metadata.Version, strings.TrimPrefix(version, "v"))
	}
}

// valueSets are the value sets every test of the whole chart runs on: the minimal install and
// the options that change which objects are made.
func valueSets(t testing.TB) map[string]map[string]any {
	apiCert, apiKey := selfSignedPEM(t, "kobe-api."+namespace+".svc")
	clientCert, clientKey := selfSignedPEM(t, "kobe-worker")
	return map[string]map[string]any{
		"minimal": minimalValues(),
		"tls from values, mTLS to Temporal, metrics token, policy": with(minimalValues(), map[string]any{
			"api": map[string]any{
				"tls":    map[string]any{"existingSecret": "", "cert": apiCert, "key": apiKey},
				"policy": "roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}\n",
			},
			"temporal": map[string]any{"tls": map[string]any{
				"enabled":           true,
				"clientCertificate": map[string]any{"cert": clientCert, "key": clientKey},
				"ca":                map[string]any{"pem": apiCert},
			}, "apiKey": map[string]any{"value": "tcld-test-api-key"}},
			"metricsToken": map[string]any{"enabled": true, "token": "scrape-me"},
			"adminToken":   map[string]any{"token": "kobe_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"},
		}),
		"ingress": with(minimalValues(), map[string]any{"api": map[string]any{"ingress": map[string]any{
			"enabled":     true,
			"className":   "nginx",
			"annotations": map[string]any{"nginx.ingress.kubernetes.io/backend-protocol": "HTTPS"},
			"hosts":       []any{map[string]any{"host": "kobe.example.com"}},
			"tls":         []any{map[string]any{"secretName": "kobe-example-com", "hosts": []any{"kobe.example.com"}}},
		}}}),
		"monitoring": with(minimalValues(), map[string]any{"monitoring": map[string]any{
			"serviceMonitor":   map[string]any{"enabled": true},
			"prometheusRule":   map[string]any{"enabled": true},
			"grafanaDashboard": map[string]any{"enabled": true},
		}}),
		"hooks off, existing secrets, plain HTTP": with(minimalValues(), map[string]any{
			"migrations": map[string]any{"helmHooks": false, "ttlSecondsAfterFinished": 3600},
			"store":      map[string]any{"dsn": "", "existingSecret": "kobe-store"},
			"sealing":    map[string]any{"key": "", "existingSecret": "kobe-sealing"},
			"adminToken": map[string]any{"existingSecret": "kobe-admin"},
			"api":        map[string]any{"tls": map[string]any{"enabled": false, "existingSecret": ""}},
		}),
		"every backend, two host clusters, egress policy": with(minimalValues(), map[string]any{
			"workers": []any{
				map[string]any{"name": "default", "backends": []any{"k3s", "k0s", "vcluster", "capi"}},
				map[string]any{"name": "eu", "hostClusterName": "eu", "replicas": 2, "backends": []any{"k3s"}, "kubeconfigSecret": "eu-kubeconfig"},
			},
			"networkPolicy": map[string]any{"egress": []any{map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}}}}},
		}),
	}
}

// `helm lint --strict` on every value set: no warning, no error.
func TestChartLints(t *testing.T) {
	for name, values := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(chartDir, values, namespace, &kubeVersion)
			for _, msg := range linter.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("lint: %s", msg)
				}
			}
		})
	}
}

// With the chart's own defaults nothing renders: each setting an install needs is named with
// what to set, and nothing half-made is returned.
func TestDefaultValuesNameWhatAnInstallNeeds(t *testing.T) {
	cases := []struct {
		drop string // the required setting left out of minimalValues
		want string
	}{
		{"store", "store: set store.dsn"},
		{"sealing", "sealing: set sealing.key"},
		{"temporal", "temporal.address: the host:port of the Temporal frontend"},
		{"api", "api.tls: set api.tls.existingSecret"},
	}
	if _, err := render(t, nil); err == nil {
		t.Fatal("the chart rendered with its defaults alone")
	}
	for _, c := range cases {
		values := minimalValues()
		delete(values, c.drop)
		r, err := render(t, values)
		if err == nil {
			t.Errorf("without %s the chart rendered %s", c.drop, r.names())
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("without %s: %v; want it to say %q", c.drop, err, c.want)
		}
	}
}

// values.schema.json refuses a value it does not know and a value of the wrong type or shape,
// naming it.
func TestSchemaRefusesBadValues(t *testing.T) {
	cases := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"unknown top-level value", map[string]any{"replicaCount": 3}, "replicaCount"},
		{"unknown nested value", map[string]any{"api": map[string]any{"replica": 3}}, "replica"},
		{"wrong type", map[string]any{"api": map[string]any{"replicas": "two"}}, "replicas"},
		{"fewer than one API replica", map[string]any{"api": map[string]any{"replicas": 0}}, "replicas"},
		{"a backend kobe has no rules for", map[string]any{"workers": []any{map[string]any{"name": "default", "backends": []any{"local"}}}}, "backends"},
		{"a sealing key of the wrong length", map[string]any{"sealing": map[string]any{"key": "c2hvcnQ="}}, "key"},
		{"a store that is not PostgreSQL", map[string]any{"store": map[string]any{"dsn": "sqlite:///var/lib/kobe/kobe.db"}}, "dsn"},
		{"an admin token that is not kobe's", map[string]any{"adminToken": map[string]any{"token": "hunter2"}}, "token"},
		{"a worker entry without a name", map[string]any{"workers": []any{map[string]any{"backends": []any{"k3s"}}}}, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, with(minimalValues(), c.values))
			if err == nil {
				t.Fatal("the chart rendered")
			}
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want a schema error naming %q", err, c.want)
			}
		})
	}
	// Two worker entries for one host cluster: the template's check.
	_, err := render(t, with(minimalValues(), map[string]any{"workers": []any{
		map[string]any{"name": "a", "backends": []any{"k3s"}},
		map[string]any{"name": "b", "backends": []any{"k0s"}},
	}}))
	if err == nil || !strings.Contains(err.Error(), `serve the host cluster ""`) {
		t.Fatalf("two workers for the unnamed host: %v", err)
	}
}

// The minimal install: what it makes, and how.
func TestMinimalInstall(t *testing.T) {
	r := mustRender(t, minimalValues())

	api := r.mustFind(t, "Deployment", "kobe-api")
	if n := num(api.Object, "spec", "replicas"); n < 2 {
		t.Errorf("the API runs %d replicas by default, want at least 2", n)
	}
	pdb := r.mustFind(t, "PodDisruptionBudget", "kobe-api")
	if got, want := str(pdb.Object, "spec", "selector", "matchLabels", "app.kubernetes.io/component"), "api"; got != want {
		t.Errorf("the PDB selects component %q, want %q", got, want)
	}
	if n := num(pdb.Object, "spec", "maxUnavailable"); n != 1 {
		t.Errorf("the PDB lets %d API pods go at once, want 1", n)
	}
	svc := r.mustFind(t, "Service", "kobe-api")
	if got := str(svc.Object, "spec", "type"); got != "ClusterIP" {
		t.Errorf("the API's Service is %s", got)
	}
	if r.find("Ingress", "kobe-api") != nil {
		t.Error("an Ingress by default")
	}

	// The API: HTTPS from the existing Secret, the admin token, no Kubernetes token.
	spec := podSpec(t, api)
	apiArgs := args(t, containers(spec)[0])
	for _, want := range []string{"server", "--api-address=0.0.0.0:8443", "--tls-cert-file=/etc/kobe/tls/tls.crt",
		"--tls-key-file=/etc/kobe/tls/tls.key", "--temporal-address=temporal-frontend.temporal.svc:7233",
		"--secret-key-file=/etc/kobe/sealing/secret.key", "--admin-token-file=/etc/kobe/admin-token/token"} {
		if !slices.Contains(apiArgs, want) {
			t.Errorf("the API's args %q lack %q", apiArgs, want)
		}
	}
	if slices.Contains(apiArgs, "--insecure-http") {
		t.Error("the API serves plain HTTP by default")
	}
	if got := secretOfVolume(spec, "tls"); got != "kobe-api-tls" {
		t.Errorf("the API's certificate comes from Secret %q, want the existing kobe-api-tls", got)
	}
	if v, _ := boolean(spec, "automountServiceAccountToken"); v {
		t.Error("the API's pods mount a Kubernetes token")
	}
	if scheme := str(containers(spec)[0], "readinessProbe", "httpGet", "scheme"); scheme != "HTTPS" {
		t.Errorf("the API's readiness probe uses %s", scheme)
	}
	assertStoreFromSecret(t, "api", containers(spec)[0], "kobe-store")

	// One worker, for the cluster it runs in, with the k3s and k0s rules only.
	worker := r.mustFind(t, "Deployment", "kobe-worker-default")
	wspec := podSpec(t, worker)
	if v, _ := boolean(wspec, "automountServiceAccountToken"); !v {
		t.Error("the in-cluster worker mounts no Kubernetes token")
	}
	if got := str(wspec, "serviceAccountName"); got != "kobe-worker-default" {
		t.Errorf("the worker runs as %q", got)
	}
	wargs := args(t, containers(wspec)[0])
	for _, want := range []string{"worker", "--metrics-address=0.0.0.0:9090", "--state-dir=/var/lib/kobe"} {
		if !slices.Contains(wargs, want) {
			t.Errorf("the worker's args %q lack %q", wargs, want)
		}
	}
	for _, a := range wargs {
		if strings.HasPrefix(a, "--host-kubeconfig") || strings.HasPrefix(a, "--host-cluster-name") {
			t.Errorf("the default worker has %s", a)
		}
	}
	role := r.mustFind(t, "ClusterRole", namespace+"-kobe-worker-default")
	if got, want := permissionsOf(t, role), rulesOfDocs(t)["k3s"]; !got.equal(want) {
		t.Errorf("the default worker's rules are not docs/deploy.md's for k3s and k0s:\n%s", got.diff(want))
	}
	binding := r.mustFind(t, "ClusterRoleBinding", namespace+"-kobe-worker-default")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if len(subjects) != 1 || str(subjects[0].(map[string]any), "name") != "kobe-worker-default" ||
		str(subjects[0].(map[string]any), "namespace") != namespace {
		t.Errorf("the binding's subjects: %v", subjects)
	}

	// The migration: a hook before install and upgrade, with the DSN from a hook Secret of its
	// own (the release's Secret does not exist yet when pre-install hooks run).
	job := r.mustFind(t, "Job", "kobe-migrate")
	if !slices.Contains(r.Hooks, job) {
		t.Error("the migration Job is not a hook")
	}
	if got := job.GetAnnotations()["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
		t.Errorf("the migration's hook is %q", got)
	}
	jspec := podSpec(t, job)
	if got := args(t, containers(jspec)[0]); !slices.Equal(got, []string{"migrate", "up"}) {
		t.Errorf("the migration runs %q", got)
	}
	assertStoreFromSecret(t, "migrate", containers(jspec)[0], "kobe-migrate-store")
	hookSecret := r.mustFind(t, "Secret", "kobe-migrate-store")
	if !slices.Contains(r.Hooks, hookSecret) || hookSecret.GetAnnotations()["helm.sh/hook-weight"] != "-10" {
		t.Error("the migration's Secret is not a hook made before the Job")
	}

	// The Secrets made from values, and the admin token made at install.
	for _, name := range []string{"kobe-store", "kobe-sealing", "kobe-admin-token"} {
		r.mustFind(t, "Secret", name)
	}
	token, _, _ := unstructured.NestedString(r.mustFind(t, "Secret", "kobe-admin-token").Object, "stringData", "token")
	if !regexp.MustCompile(`^kobe_[A-Za-z0-9]{43}$`).MatchString(token) {
		t.Errorf("the admin token made at install is %q", token)
	}
	if r.find("Secret", "kobe-api-tls") != nil {
		t.Error("the chart made the API's TLS Secret although an existing one is named")
	}

	// NetworkPolicies are on by default; nothing of the monitoring.
	for _, name := range []string{"kobe-api", "kobe-worker", "kobe-migrate"} {
		r.mustFind(t, "NetworkPolicy", name)
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if len(r.ofKind(kind)) > 0 {
			t.Errorf("a %s by default", kind)
		}
	}
	if !strings.Contains(r.Notes, "https://kobe-api.kobe-system.svc:8443") {
		t.Errorf("NOTES.txt does not say where the API is:\n%s", r.Notes)
	}
}

// Every pod of every value set runs under the restricted Pod Security profile, with a
// writable /tmp from an emptyDir; the dry-run test has the API server's admission judge the
// same.
func TestEveryPodIsRestricted(t *testing.T) {
	for name, values := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, values)
			pods := 0
			for _, o := range r.all() {
				if o.GetKind() != "Deployment" && o.GetKind() != "Job" {
					continue
				}
				pods++
				spec := podSpec(t, o)
				where := o.GetKind() + " " + o.GetName()
				if v, _ := boolean(spec, "securityContext", "runAsNonRoot"); !v {
					t.Errorf("%s: pod runAsNonRoot not set", where)
				}
				if got := str(spec, "securityContext", "seccompProfile", "type"); got != "RuntimeDefault" {
					t.Errorf("%s: pod seccomp %q", where, got)
				}
				if v, set := boolean(spec, "hostNetwork"); set && v {
					t.Errorf("%s: hostNetwork", where)
				}
				tmp := emptyDirVolumes(spec)
				for _, c := range containers(spec) {
					cw := where + " container " + c["name"].(string)
					if v, _ := boolean(c, "securityContext", "runAsNonRoot"); !v {
						t.Errorf("%s: runAsNonRoot not set", cw)
					}
					if v, set := boolean(c, "securityContext", "allowPrivilegeEscalation"); !set || v {
						t.Errorf("%s: allowPrivilegeEscalation not false", cw)
					}
					if v, _ := boolean(c, "securityContext", "readOnlyRootFilesystem"); !v {
						t.Errorf("%s: readOnlyRootFilesystem not true", cw)
					}
					if v, set := boolean(c, "securityContext", "privileged"); !set || v {
						t.Errorf("%s: privileged not false", cw)
					}
					drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop")
					add, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "add")
					if !slices.Equal(drop, []string{"ALL"}) || len(add) > 0 {
						t.Errorf("%s: capabilities drop %v add %v", cw, drop, add)
					}
					if got := str(c, "securityContext", "seccompProfile", "type"); got != "RuntimeDefault" {
						t.Errorf("%s: seccomp %q", cw, got)
					}
					if vol := mountAt(c, "/tmp"); !slices.Contains(tmp, vol) {
						t.Errorf("%s: /tmp is not an emptyDir (volume %q)", cw, vol)
					}
					if _, ok, _ := unstructured.NestedMap(c, "resources", "requests"); !ok {
						t.Errorf("%s: no resource requests", cw)
					}
				}
			}
			if pods < 3 {
				t.Errorf("only %d pod templates (API, worker, migration expected)", pods)
			}
		})
	}
}

// TLS from values: the chart makes the kubernetes.io/tls Secret and mounts it; Temporal's mTLS
// files, CA and API key come from Secrets of their own; /metrics wants the token.
func TestTLSAndSecretsFromValues(t *testing.T) {
	r := mustRender(t, valueSets(t)["tls from values, mTLS to Temporal, metrics token, policy"])
	tlsSecret := r.mustFind(t, "Secret", "kobe-api-tls")
	if got, _, _ := unstructured.NestedString(tlsSecret.Object, "type"); got != "kubernetes.io/tls" {
		t.Errorf("the API's TLS Secret is of type %q", got)
	}
	spec := podSpec(t, r.mustFind(t, "Deployment", "kobe-api"))
	if got := secretOfVolume(spec, "tls"); got != "kobe-api-tls" {
		t.Errorf("the API's certificate comes from %q", got)
	}
	for _, d := range []string{"kobe-api", "kobe-worker-default"} {
		a := args(t, containers(podSpec(t, r.mustFind(t, "Deployment", d)))[0])
		for _, want := range []string{"--temporal-tls-cert=/etc/kobe/temporal-client/tls.crt", "--temporal-tls-key=/etc/kobe/temporal-client/tls.key",
			"--temporal-tls-ca=/etc/kobe/temporal-ca/ca.crt", "--temporal-tls-server-name=temporal-frontend.temporal.svc",
			"--temporal-api-key-file=/etc/kobe/temporal-api-key/api-key", "--metrics-token-file=/etc/kobe/metrics-token/token"} {
			if !slices.Contains(a, want) {
				t.Errorf("%s: args %q lack %q", d, a, want)
			}
		}
	}
	for _, name := range []string{"kobe-temporal-client", "kobe-temporal-ca", "kobe-temporal-api-key", "kobe-metrics-token"} {
		r.mustFind(t, "Secret", name)
	}
	key, _, _ := unstructured.NestedString(r.mustFind(t, "Secret", "kobe-temporal-api-key").Object, "stringData", "api-key")
	if key != "tcld-test-api-key" {
		t.Errorf("the Temporal API key from values became %q", key)
	}
	a := args(t, containers(spec)[0])
	if !slices.Contains(a, "--policy=/etc/kobe/policy/policy.yaml") {
		t.Errorf("the API's args %q lack the policy", a)
	}
	r.mustFind(t, "ConfigMap", "kobe-policy")
	token, _, _ := unstructured.NestedString(r.mustFind(t, "Secret", "kobe-admin-token").Object, "stringData", "token")
	if token != "kobe_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG" {
		t.Errorf("the admin token from values became %q", token)
	}
}

// Temporal's API key from an existing Secret: mounted from that Secret's key, no Secret made;
// and the settings that do not go together are refused, naming the values.
func TestTemporalAPIKey(t *testing.T) {
	r := mustRender(t, with(minimalValues(), map[string]any{"temporal": map[string]any{
		"tls":    map[string]any{"enabled": true},
		"apiKey": map[string]any{"existingSecret": "temporal-cloud", "existingSecretKey": "key"},
	}}))
	if r.find("Secret", "kobe-temporal-api-key") != nil {
		t.Error("the chart made an API key Secret although an existing one is named")
	}
	for _, d := range []string{"kobe-api", "kobe-worker-default"} {
		spec := podSpec(t, r.mustFind(t, "Deployment", d))
		if got := secretOfVolume(spec, "temporal-api-key"); got != "temporal-cloud" {
			t.Errorf("%s: the API key comes from %q", d, got)
		}
		if a := args(t, containers(spec)[0]); !slices.Contains(a, "--temporal-api-key-file=/etc/kobe/temporal-api-key/api-key") {
			t.Errorf("%s: args %q lack the API key file", d, a)
		}
	}

	for _, c := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"an API key without TLS", map[string]any{"apiKey": map[string]any{"value": "k"}}, "temporal.apiKey: an API key is sent only over TLS"},
		{"both a value and a Secret", map[string]any{"tls": map[string]any{"enabled": true}, "apiKey": map[string]any{"value": "k", "existingSecret": "s"}}, "temporal.apiKey: set existingSecret or value, not both"},
		{"a key of two lines", map[string]any{"tls": map[string]any{"enabled": true}, "apiKey": map[string]any{"value": "k\nk"}}, "value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, with(minimalValues(), map[string]any{"temporal": c.values}))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want an error naming %q", err, c.want)
			}
		})
	}
}

func TestIngressWithTLS(t *testing.T) {
	r := mustRender(t, valueSets(t)["ingress"])
	ing := r.mustFind(t, "Ingress", "kobe-api")
	if got := str(ing.Object, "spec", "ingressClassName"); got != "nginx" {
		t.Errorf("ingressClassName %q", got)
	}
	tls, _, _ := unstructured.NestedSlice(ing.Object, "spec", "tls")
	if len(tls) != 1 || str(tls[0].(map[string]any), "secretName") != "kobe-example-com" {
		t.Errorf("the Ingress's TLS: %v", tls)
	}
	rules, _, _ := unstructured.NestedSlice(ing.Object, "spec", "rules")
	if len(rules) != 1 {
		t.Fatalf("rules: %v", rules)
	}
	paths, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "http", "paths")
	if len(paths) != 1 {
		t.Fatalf("paths: %v", paths)
	}
	backend := paths[0].(map[string]any)
	if str(backend, "backend", "service", "name") != "kobe-api" || str(backend, "backend", "service", "port", "name") != "https" {
		t.Errorf("the Ingress routes to %v", backend["backend"])
	}
}

// Hooks off (Argo CD, Flux): the migration is a plain Job named after the image, the release's
// Secret gives it the DSN, nothing is a hook; plain HTTP only when asked, with a warning.
func TestPlainJobWithoutHooks(t *testing.T) {
	values := valueSets(t)["hooks off, existing secrets, plain HTTP"]
	r := mustRender(t, values)
	if len(r.Hooks) != 0 {
		t.Errorf("hooks: %s", r.names())
	}
	jobs := r.ofKind("Job")
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs", len(jobs))
	}
	job := jobs[0]
	if !regexp.MustCompile(`^kobe-migrate-[0-9a-f]{10}$`).MatchString(job.GetName()) {
		t.Errorf("the plain Job is named %q, want kobe-migrate-<hash of the image>", job.GetName())
	}
	for k := range job.GetAnnotations() {
		if strings.HasPrefix(k, "helm.sh/hook") {
			t.Errorf("the plain Job has annotation %s", k)
		}
	}
	if n := num(job.Object, "spec", "ttlSecondsAfterFinished"); n != 3600 {
		t.Errorf("ttlSecondsAfterFinished %d", n)
	}
	assertStoreFromSecret(t, "migrate", containers(podSpec(t, job))[0], "kobe-store")
	// A new image is a new Job.
	other := mustRender(t, with(values, map[string]any{"image": map[string]any{"tag": "v0.2.0"}}))
	if other.ofKind("Job")[0].GetName() == job.GetName() {
		t.Error("a new image keeps the Job's name (its pod template could not change)")
	}
	for _, s := range r.ofKind("Secret") {
		t.Errorf("the chart made Secret %s although every one is an existing Secret", s.GetName())
	}
	spec := podSpec(t, r.mustFind(t, "Deployment", "kobe-api"))
	if got := secretOfVolume(spec, "sealing"); got != "kobe-sealing" {
		t.Errorf("the sealing key comes from %q", got)
	}
	if got := secretOfVolume(spec, "admin-token"); got != "kobe-admin" {
		t.Errorf("the admin token comes from %q", got)
	}
	a := args(t, containers(spec)[0])
	if !slices.Contains(a, "--insecure-http") || slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--tls-") }) {
		t.Errorf("plain HTTP: args %q", a)
	}
	if !strings.Contains(r.Notes, "WARNING: the API serves plain HTTP") {
		t.Errorf("NOTES.txt does not warn of plain HTTP:\n%s", r.Notes)
	}
}

// A worker per host cluster: the in-cluster one gets its backends' rules, the one with a
// kubeconfig gets none here and mounts its kubeconfig.
func TestWorkerPerHostCluster(t *testing.T) {
	r := mustRender(t, valueSets(t)["every backend, two host clusters, egress policy"])
	docs := rulesOfDocs(t)
	want := docs["k3s"].union(docs["vcluster"]).union(docs["capi"])
	if got := permissionsOf(t, r.mustFind(t, "ClusterRole", namespace+"-kobe-worker-default")); !got.equal(want) {
		t.Errorf("the default worker's rules are not the union of its backends':\n%s", got.diff(want))
	}
	if r.find("ClusterRole", namespace+"-kobe-worker-eu") != nil || r.find("ClusterRoleBinding", namespace+"-kobe-worker-eu") != nil {
		t.Error("rules bound for a worker of another cluster")
	}
	eu := r.mustFind(t, "Deployment", "kobe-worker-eu")
	if n := num(eu.Object, "spec", "replicas"); n != 2 {
		t.Errorf("the eu worker runs %d replicas", n)
	}
	spec := podSpec(t, eu)
	a := args(t, containers(spec)[0])
	for _, want := range []string{"--host-cluster-name=eu", "--host-kubeconfig=/etc/kobe/host/kubeconfig"} {
		if !slices.Contains(a, want) {
			t.Errorf("the eu worker's args %q lack %q", a, want)
		}
	}
	if got := secretOfVolume(spec, "host-kubeconfig"); got != "eu-kubeconfig" {
		t.Errorf("the eu worker's kubeconfig comes from %q", got)
	}
	if v, _ := boolean(spec, "automountServiceAccountToken"); v {
		t.Error("the eu worker mounts a token of a cluster it does not use")
	}
	// The two Deployments select their own pods only.
	sel := func(name string) map[string]any {
		m, _, _ := unstructured.NestedMap(r.mustFind(t, "Deployment", name).Object, "spec", "selector", "matchLabels")
		return m
	}
	if sel("kobe-worker-eu")["kobe.kunobi.ninja/worker"] == sel("kobe-worker-default")["kobe.kunobi.ninja/worker"] {
		t.Error("the worker Deployments select the same pods")
	}
	np := r.mustFind(t, "NetworkPolicy", "kobe-worker")
	types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
	if !slices.Equal(types, []string{"Ingress", "Egress"}) {
		t.Errorf("with egress rules the policy types are %v", types)
	}
}

func assertStoreFromSecret(t *testing.T, what string, c map[string]any, secret string) {
	t.Helper()
	env, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range env {
		e := e.(map[string]any)
		if e["name"] == "KOBE_STORE" {
			if got := str(e, "valueFrom", "secretKeyRef", "name"); got != secret {
				t.Errorf("%s: KOBE_STORE from Secret %q, want %q", what, got, secret)
			}
			if _, literal := e["value"]; literal {
				t.Errorf("%s: the DSN is in the pod spec", what)
			}
			return
		}
	}
	t.Errorf("%s: no KOBE_STORE", what)
}

// secretOfVolume is the Secret a pod's volume mounts ("" when it is no Secret volume).
func secretOfVolume(spec map[string]any, volume string) string {
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vols {
		v := v.(map[string]any)
		if v["name"] == volume {
			return str(v, "secret", "secretName")
		}
	}
	return ""
}

func emptyDirVolumes(spec map[string]any) []string {
	var out []string
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vols {
		v := v.(map[string]any)
		if _, ok := v["emptyDir"]; ok {
			out = append(out, v["name"].(string))
		}
	}
	return out
}

// mountAt is the volume a container mounts at path ("" when none).
func mountAt(c map[string]any, path string) string {
	mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	for _, m := range mounts {
		m := m.(map[string]any)
		if m["mountPath"] == path {
			return m["name"].(string)
		}
	}
	return ""
}
