package v1alpha1_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/addons"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/resources/v1alpha1"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
)

var (
	clusterPools   = v1alpha1.GroupVersion.WithResource("clusterpools")
	accessPolicies = v1alpha1.GroupVersion.WithResource("accesspolicies")
)

// serverSideOnly are the manifests of poolspec/compiledin/testdata/policies.json that kobe
// refuses and the API server accepts, and why no CRD rule refuses them (docs/gitops.md): what
// a backend's traits allow (a property of the kobe binary's backends, not of the schema), and
// what a backend finds in its own section (the backend's to judge, kept by the API server as an
// object).
var serverSideOnly = map[string]string{
	"capi hostCluster":      "trait: whether the backend runs in a host cluster",
	"local hostCluster":     "trait: whether the backend runs in a host cluster",
	"k3s certificates":      "trait: whether the backend reports and re-issues its members' certificates",
	"local resources":       "trait: whether the backend's members are pods shaped by spec.resources",
	"vcluster servers":      "trait: whether the backend's members are shaped by spec.cluster",
	"vcluster datastore":    "trait: whether the backend reads a shared datastore",
	"vcluster sleep":        "trait: whether the backend can sleep its members",
	"k3s reserved key":      "the k3s backend's own section",
	"local datastore twice": "the local backend's own section",
}

// The generated CRDs on a real kube-apiserver: installed as kobe installs an addon's CRDs
// (server-side apply, Established), then every upstream example applies unchanged and reads
// back as the manifest it was; manifests kobe refuses are refused by the API server itself
// with the rule's message and leave nothing behind; the printer columns come through the Table
// API; and AccessPolicies apply and are refused the same way.
func TestResourcesOnARealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kine and kube-apiserver; skipped with -short")
	}
	host := hostcluster.Start(t, hostcluster.Options{APIOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var crds []string
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		crds = append(crds, string(data))
	}
	t0 := time.Now()
	require.NoError(t, addons.Apply(ctx, host.Config, poolspec.Addon{Name: "kobe-crds", Manifest: strings.Join(crds, "\n")}, nil))
	t.Logf("CRDs applied and Established in %s", time.Since(t0).Round(time.Millisecond))
	dyn, err := dynamic.NewForConfig(host.Config)
	require.NoError(t, err)

	// apply server-side applies a manifest as `kubectl apply --server-side` does.
	apply := func(t *testing.T, gvr schema.GroupVersionResource, manifest []byte, dryRun bool) (*unstructured.Unstructured, error) {
		t.Helper()
		js, err := yaml.YAMLToJSON(manifest)
		require.NoError(t, err)
		var head struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(js, &head))
		opts := metav1.PatchOptions{FieldManager: "kubectl", FieldValidation: "Strict"}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		return dyn.Resource(gvr).Patch(ctx, head.Metadata.Name, types.ApplyPatchType, js, opts)
	}

	t.Run("upstream examples apply unchanged", func(t *testing.T) {
		examples, err := filepath.Glob("../../poolspec/testdata/upstream/*.yaml")
		require.NoError(t, err)
		require.Len(t, examples, 6)
		for _, f := range examples {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			obj, err := apply(t, clusterPools, data, false)
			require.NoError(t, err, "%s is accepted", filepath.Base(f))
			var cr v1alpha1.ClusterPool
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr))
			back, err := cr.Manifest()
			require.NoError(t, err)
			want, err := poolspec.Parse(data)
			require.NoError(t, err)
			assert.Equal(t, asData(t, want), asData(t, back), "%s reads back as the manifest it was", filepath.Base(f))
			_, err = back.Validate()
			assert.NoError(t, err, "and kobe takes it")
		}

		// A manifest written for a namespaced resource: the namespace means nothing here.
		data, err := os.ReadFile("../../poolspec/testdata/upstream/k0s.yaml")
		require.NoError(t, err)
		obj, err := apply(t, clusterPools, []byte(strings.Replace(string(data), "  name: ci-k0s\n", "  name: ci-k0s\n  namespace: ci\n", 1)), false)
		require.NoError(t, err, "a namespace in the manifest")
		assert.Empty(t, obj.GetNamespace())
	})

	t.Run("kobe's refusals are the API server's", func(t *testing.T) {
		// Each case is a pool's spec beside a local backend and a cluster version, unless it
		// gives its own.
		for _, c := range []struct{ name, name2, spec, want string }{
			{"minReady over maxClusters", "", "  scaling: {minReady: 9, maxClusters: 8}\n", "spec.scaling.minReady: Invalid value: spec.scaling.minReady (default 1) must not be more than maxClusters (default 8)"},
			{"minReady over the default maxClusters", "", "  scaling: {minReady: 9}\n", "must not be more than maxClusters (default 8)"},
			{"an unknown field", "", "  sise: 3\n", `.spec.sise: field not declared in schema`},
			{"a bad duration", "", "  ttl: 5 minutes\n", "spec.ttl: Invalid value: \"5 minutes\": must be a duration such as 30s, 5m or 2h"},
			{"a ttl shorter than a lease", "", "  ttl: 1s\n", "spec.ttl: Invalid value: \"1s\": must be between 5s (the shortest lease) and 720h"},
			{"ttl over maxTtl", "", "  ttl: 3h\n  maxTtl: 1h\n", "spec.ttl: Invalid value: spec.ttl (default 2h) must not be longer than spec.maxTtl"},
			{"the default ttl over maxTtl", "", "  maxTtl: 1h\n", "spec.ttl (default 2h) must not be longer than spec.maxTtl"},
			{"a gate without its field", "", "  readinessGates: [{type: NodesReady}]\n", "a NodesReady gate takes count (more than 0), and no other field"},
			{"a gate with another's field", "", "  readinessGates: [{type: CRDExists, name: a.b.c, namespace: x}]\n", "a CRDExists gate takes name, and no other field"},
			{"an unknown gate", "", "  readinessGates: [{type: PodsReady, namespace: x}]\n", `spec.readinessGates[0].type: Unsupported value: "PodsReady"`},
			{"another backend's section", "", "  backend: {type: local, capi: {}}\n", "spec.backend.capi: Invalid value: spec.backend.capi is read only when spec.backend.type is capi"},
			{"the default backend's section with another type", "", "  backend: {type: local, k3s: {}}\n", "spec.backend.k3s is read only when spec.backend.type is k3s"},
			{"an unknown backend", "", "  backend: {type: k9s}\n", `spec.backend.type: Unsupported value: "k9s"`},
			{"a backend without a section", "", "  backend: {type: local, vkobe: {}}\n", `.spec.backend.vkobe: field not declared in schema`},
			{"a section that is not an object", "", "  backend: {type: k3s, k3s: tenants}\n", `.spec.backend.k3s: expected map, got &{tenants}`},
			{"upstream's diagnostics", "", "  diagnostics: {enabled: true}\n", "spec.diagnostics: Forbidden: spec.diagnostics is not supported by this version of kobe"},
			{"upstream's snapshot", "", "  snapshot: {enabled: true}\n", "spec.snapshot is not supported by this version of kobe"},
			{"a name too long", strings.Repeat("p", 41), "", "metadata.name: a pool's name is a DNS label of at most 40 characters"},
			{"a name with a dot", "a.b", "", "a pool's name is a DNS label of at most 40 characters"},
			{"an addon with both", "", "  addons: [{name: a, manifest: x, url: 'https://e.x/a.yaml'}]\n", "spec.addons[0]: Invalid value: give exactly one of manifest or url"},
			{"an addon with neither", "", "  addons: [{name: a}]\n", "give exactly one of manifest or url"},
			{"an addon twice", "", "  addons: [{name: a, manifest: x}, {name: a, url: 'https://e.x/a.yaml'}]\n", ".spec.addons: duplicate entries for key [name=\"a\"]"},
			{"a size too large", "", "  size: 1001\n", "spec.size: Invalid value: 1001: spec.size in body should be less than or equal to 1000"},
			{"a multiplier under 1", "", "  scaling: {failureBackoff: {multiplier: 0.5}}\n", "spec.scaling.failureBackoff.multiplier in body should be greater than or equal to 1"},
			{"a backoff base over its max", "", "  scaling: {failureBackoff: {base: 5m}}\n", "spec.scaling.failureBackoff.base (default 5s) must not be longer than max (default 2m)"},
			{"a warm window of seconds", "", "  scaling: {schedule: [{cron: '0 8 * * 1-5', duration: 90s, minReady: 1}]}\n", "spec.scaling.schedule[0].duration: Invalid value: \"90s\": must be whole minutes between 1m and 168h"},
			{"a warm window over maxClusters", "", "  scaling: {maxClusters: 4, schedule: [{cron: '0 8 * * 1-5', duration: 10h, minReady: 5}]}\n", "a warm window's minReady must not be more than spec.scaling.maxClusters"},
			{"warm windows in two zones", "", "  scaling: {schedule: [{cron: '0 8 * * 1', duration: 1h, minReady: 1, timezone: Europe/Berlin}, {cron: '0 8 * * 2', duration: 1h, minReady: 1}]}\n", "every warm window of a pool is read in one time zone"},
			{"a warm window without minReady", "", "  scaling: {schedule: [{cron: '0 8 * * 1', duration: 1h}]}\n", `spec.scaling.schedule[0].minReady: Required value`},
			{"a cron of six fields", "", "  sleep: {schedule: '0 0 20 * * *'}\n", "spec.sleep.schedule: Invalid value: \"0 0 20 * * *\": must be a cron expression of five fields"},
			{"a cron with names", "", "  sleep: {schedule: '0 20 * * MON'}\n", "must be a cron expression of five fields"},
			{"a sleep after 1s", "", "  sleep: {afterInactivity: 1s}\n", "spec.sleep.afterInactivity: Invalid value: \"1s\": must be at least 5s"},
			{"a sleep exclusion alone", "", "  sleep: {exclude: [{owner: 'ci-*'}]}\n", "spec.sleep: exclude alone does nothing"},
			{"an empty sleep exclusion", "", "  sleep: {afterInactivity: 1h, exclude: [{}]}\n", "give at least one of owner, alias or metadata"},
			{"sleep and wake at once", "", "  sleep: {schedule: '0 20 * * *', wakeSchedule: '0 20 * * *'}\n", "the same as schedule"},
			{"a sleep zone without schedules", "", "  sleep: {afterInactivity: 1h, timezone: Europe/Berlin}\n", "set without schedule or wakeSchedule, it does nothing"},
			{"a certificate validity of months", "", "  certificates: {validity: 3mo}\n", "spec.certificates.validity: Invalid value: \"3mo\": must be a duration such as 30d, 12h or 5m"},
			{"minReadyDuringUpgrade over the size", "", "  size: 2\n  upgradePolicy: {minReadyDuringUpgrade: 3}\n", "must not be more than the warm target"},
			{"no cluster version", "", "  cluster: {}\n", `spec.cluster.version: Required value`},
		} {
			t.Run(c.name, func(t *testing.T) {
				name := "refused"
				if c.name2 != "" {
					name = c.name2
				}
				spec := c.spec
				if !strings.Contains(spec, "  backend:") {
					spec = "  backend: {type: local}\n" + spec
				}
				if !strings.Contains(spec, "  cluster:") {
					spec += "  cluster: {version: v1.37.2}\n"
				}
				manifest := []byte("apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: " + name + "}\nspec:\n" + spec)
				// kobe refuses it (the same manifest through poolspec, as PUT /v1/pools does).
				if m, err := poolspec.Parse(manifest); err == nil {
					_, err = m.Validate()
					require.Error(t, err, "kobe refuses it too")
				}
				_, err := apply(t, clusterPools, manifest, false)
				require.Error(t, err, "the API server refuses it")
				assert.Contains(t, err.Error(), c.want)
				// `kubectl apply` of a new object without --server-side is a create with strict
				// field validation: refused too.
				js, err := yaml.YAMLToJSON(manifest)
				require.NoError(t, err)
				var obj unstructured.Unstructured
				require.NoError(t, obj.UnmarshalJSON(js))
				_, err = dyn.Resource(clusterPools).Create(ctx, &obj, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply", FieldValidation: "Strict"})
				require.Error(t, err, "a create is refused too")
				t.Logf("create: %v", err)
				_, err = dyn.Resource(clusterPools).Get(ctx, name, metav1.GetOptions{})
				assert.True(t, apierrors.IsNotFound(err), "nothing is left behind: %v", err)
			})
		}
	})

	t.Run("kobe's judgements of the binary's manifests", func(t *testing.T) {
		// poolspec/compiledin keeps what the kobe binary makes of manifests beside the upstream
		// examples (each backend's section, the shared parts, the ways to get them wrong): what
		// kobe takes, the API server takes; what kobe refuses, the API server refuses, but for
		// the documented serverSideOnly.
		data, err := os.ReadFile("../../poolspec/compiledin/testdata/policies.json")
		require.NoError(t, err)
		var judged map[string]struct {
			Policy  json.RawMessage `json:"policy"`
			Error   string          `json:"error"`
			Written json.RawMessage `json:"written"`
		}
		require.NoError(t, json.Unmarshal(data, &judged))
		names := make([]string, 0, len(judged))
		for name := range judged {
			names = append(names, name)
		}
		sort.Strings(names)
		acceptedButRefused := map[string]string{}
		checked := 0
		for _, name := range names {
			j := judged[name]
			if len(j.Written) == 0 {
				continue // kobe could not parse it (a type mismatch): nothing to apply
			}
			checked++
			_, err := apply(t, clusterPools, j.Written, true)
			switch {
			case j.Error == "":
				assert.NoError(t, err, "%s: kobe takes it, so must the API server", name)
			case err == nil:
				acceptedButRefused[name] = j.Error
			default:
				t.Logf("%s: kobe: %s; API server: %v", name, j.Error, err)
			}
		}
		assert.Greater(t, checked, 30)
		for name, kobe := range acceptedButRefused {
			if _, ok := serverSideOnly[name]; !ok {
				t.Errorf("%s: kobe refuses it (%s) and the API server takes it: a rule is missing, or say why it cannot be one in serverSideOnly", name, kobe)
			}
		}
		for name := range serverSideOnly {
			if _, ok := acceptedButRefused[name]; !ok {
				t.Errorf("%s is listed in serverSideOnly but the API server refuses it (or kobe takes it): drop it from the list", name)
			}
		}
	})

	t.Run("printer columns through the Table API", func(t *testing.T) {
		data, err := os.ReadFile("../../poolspec/testdata/upstream/dev-local.yaml")
		require.NoError(t, err)
		obj, err := apply(t, clusterPools, data, false)
		require.NoError(t, err)
		var cr v1alpha1.ClusterPool
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cr))
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		cr.Status = v1alpha1.ClusterPoolStatus{
			ObservedGeneration: cr.Generation, Phase: "Backoff", Ready: 2, Leased: 1, Creating: 1, Quarantined: 1,
			ConsecutiveFailures: 2, QueueDepth: 3, LastFailureReason: "backend_error", NextAttemptAt: &now,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Backoff",
				Message: "creations fail", LastTransitionTime: now, ObservedGeneration: cr.Generation}},
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cr)
		require.NoError(t, err)
		updated, err := dyn.Resource(clusterPools).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		require.NoError(t, err, "the status subresource takes kobe's status")
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(updated.Object, &cr))
		assert.Equal(t, "Backoff", cr.Status.Phase)
		assert.Equal(t, 3, cr.Status.QueueDepth)
		require.Len(t, cr.Status.Conditions, 1)

		raw, err := host.Client.Discovery().RESTClient().Get().AbsPath("/apis/kobe.kunobi.ninja/v1alpha1/clusterpools").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		require.NoError(t, err)
		var table metav1.Table
		require.NoError(t, json.Unmarshal(raw, &table))
		var columns []string
		for _, c := range table.ColumnDefinitions {
			columns = append(columns, c.Name)
		}
		assert.Equal(t, []string{"Name", "Phase", "Ready", "Leased", "Creating", "Quarantined", "Failures"}, columns, "upstream's columns")
		var row []any
		for _, r := range table.Rows {
			if r.Cells[0] == "dev" {
				row = r.Cells
			}
		}
		assert.Equal(t, []any{"dev", "Backoff", float64(2), float64(1), float64(1), float64(1), float64(2)}, row)

		// A phase kobe does not have is refused, on the status too.
		cr.Status.Phase = "Sleeping"
		u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(&cr)
		require.NoError(t, err)
		_, err = dyn.Resource(clusterPools).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `status.phase: Unsupported value: "Sleeping"`)
	})

	t.Run("access policies", func(t *testing.T) {
		upstream := []byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: AccessPolicy
metadata: {name: github-ci}
spec:
  auth:
    oidc:
      issuer: https://token.actions.githubusercontent.com
      audience: [kobe-system]
      algorithms: [RS256]
  identity: "repo:{repository}:ref:{ref}"
  rules:
    - match: {claim: repository, value: "my-org/*"}
      pools: ["e2e-*"]
      maxTtl: 2h
      maxConcurrentLeases: 5
      maxExtensions: 2
    - pools: ["public-*"]
      maxTtl: 30m
`)
		_, err := apply(t, accessPolicies, upstream, false)
		require.NoError(t, err, "upstream's shape")
		kobe := []byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: AccessPolicy
metadata: {name: in-cluster-ci}
spec:
  auth:
    serviceAccount: {cluster: ci-host, audience: [kobe]}
  identity: "{sub}"
  rules:
    - match: {claim: kubernetes.io.namespace, value: "ci-*"}
      role: runner
  roles:
    runner:
      permissions: [lease, pool.read]
      pools: ["ci-*"]
      maxTtl: 1h
      quota: 20
      rateLimit: {requestsPerSecond: 2.5, burst: 10}
`)
		_, err = apply(t, accessPolicies, kobe, false)
		require.NoError(t, err, "kobe's roles and the ServiceAccount method")

		head := "apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: AccessPolicy\nmetadata: {name: refused}\nspec:\n"
		for _, c := range []struct{ name, spec, want string }{
			{"two methods", "  auth: {oidc: {issuer: 'https://a.example', audience: [x]}, serviceAccount: {cluster: c, audience: [x]}}\n  rules: [{pools: ['*']}]\n", "give exactly one of oidc or serviceAccount"},
			{"an issuer that is no URL", "  auth: {oidc: {issuer: 'token.actions', audience: [x]}}\n  rules: [{pools: ['*']}]\n", "spec.auth.oidc.issuer: Invalid value: \"token.actions\": must be an http(s) URL without a fragment"},
			{"a symmetric algorithm", "  auth: {oidc: {issuer: 'https://a.example', audience: [x], algorithms: [HS256]}}\n  rules: [{pools: ['*']}]\n", `Unsupported value: "HS256"`},
			{"no audience", "  auth: {oidc: {issuer: 'https://a.example', audience: []}}\n  rules: [{pools: ['*']}]\n", "spec.auth.oidc.audience: Invalid value: 0: spec.auth.oidc.audience in body should have at least 1 items"},
			{"auth without rules", "  auth: {oidc: {issuer: 'https://a.example', audience: [x]}}\n", "at least one rule is required with spec.auth"},
			{"rules without auth", "  rules: [{pools: ['*']}]\n  roles: {r: {permissions: [lease]}}\n", "spec.rules match tokens of spec.auth, which is not given"},
			{"an unknown permission", "  roles: {r: {permissions: [lease.all]}}\n", `Unsupported value: "lease.all"`},
			{"a role name with a colon", "  roles: {'a:b': {permissions: [lease]}}\n", "a role name is a word of at most 63 characters without spaces or colons"},
			{"a bad maxTtl", "  roles: {r: {permissions: [lease], maxTtl: 2 hours}}\n", "must be a duration such as 30s, 5m or 2h"},
			{"a rate of 0", "  roles: {r: {permissions: [lease], rateLimit: {requestsPerSecond: 0, burst: 1}}}\n", "requestsPerSecond in body should be greater than 0"},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := apply(t, accessPolicies, []byte(head+c.spec), false)
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
			})
		}
	})

	t.Run("kubectl", func(t *testing.T) {
		versions := local.Tools{Dir: local.DefaultToolsDir()}.KubernetesVersions()
		require.NotEmpty(t, versions)
		bin, err := local.Tools{Dir: local.DefaultToolsDir()}.Kubernetes(versions[len(versions)-1], "kubectl")
		require.NoError(t, err, "kubectl is built by make tools")
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		require.NoError(t, os.WriteFile(kubeconfig, host.Kubeconfig, 0o600))
		// RealCluster's kubectl helper needs only the kubeconfig and the binary.
		kubectl := (&hostcluster.RealCluster{Cluster: host, KubeconfigPath: kubeconfig, KubectlBinary: bin}).KubectlInput

		// Client-side apply (kubectl's default, and Argo CD's) of the whole folder of examples.
		out, err := kubectl("", "apply", "-f", "../../poolspec/testdata/upstream/")
		require.NoError(t, err, out)
		assert.Contains(t, out, "clusterpool.kobe.kunobi.ninja/golden-k3s")
		out, err = kubectl("", "get", "clusterpools")
		require.NoError(t, err, out)
		assert.Regexp(t, `(?m)^NAME\s+PHASE\s+READY\s+LEASED\s+CREATING\s+QUARANTINED\s+FAILURES$`, out)
		assert.Regexp(t, `(?m)^dev\s+Backoff\s+2\s+1\s+1\s+1\s+2$`, out, "the status written above")
		out, err = kubectl("", "get", "kobe")
		require.NoError(t, err, out)
		assert.Contains(t, out, "clusterpool.kobe.kunobi.ninja/ci-k3s")
		assert.Contains(t, out, "accesspolicy.kobe.kunobi.ninja/", "both kinds are in the category kobe")

		bad := "apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: bad}\n" +
			"spec:\n  backend: {type: local}\n  cluster: {version: v1.37.2}\n  scaling: {minReady: 9, maxClusters: 4}\n"
		out, err = kubectl(bad, "apply", "-f", "-")
		require.Error(t, err, out)
		assert.Contains(t, out, "spec.scaling.minReady (default 1) must not be more than maxClusters (default 8)")
		out, err = kubectl(strings.Replace(bad, "  scaling:", "  sise: 1\n  scaling:", 1), "apply", "-f", "-")
		require.Error(t, err, out)
		assert.Contains(t, out, `unknown field "spec.sise"`)
		out, err = kubectl("", "explain", "clusterpool.spec.scaling.thawedSpares")
		require.NoError(t, err, out)
		assert.Contains(t, out, "ThawedSpares is how many Ready members are kept running")
	})
}
