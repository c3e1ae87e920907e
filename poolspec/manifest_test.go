package poolspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	_ "github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// Every upstream example manifest parses strictly: the shape stays compatible.
func TestUpstreamExamplesParse(t *testing.T) {
	files, err := filepath.Glob("testdata/upstream/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		p, err := poolspec.Parse(data)
		require.NoError(t, err, f)
		_, err = p.Validate()
		switch p.Spec.Backend.Type {
		case "local", "k3s", "k0s", "":
			// k3s and k0s (hosted_test.go compiles them in) take spec.cluster's shape and the
			// datastore section to their own Validate; poolspec.Validate passes them on.
			assert.NoError(t, err, f)
		default:
			// Backends not compiled in yet are refused by name, not by shape.
			assert.ErrorContains(t, err, "spec.backend.type: unknown backend", f)
		}
	}
}

const base = `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata:
  name: dev
spec:
  backend:
    type: local
  cluster:
    version: v1.37.2
`

func TestDefaults(t *testing.T) {
	p, err := poolspec.Parse([]byte(base))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	assert.Equal(t, 3, pol.WarmTarget)
	assert.False(t, pol.Autoscale)
	assert.Equal(t, 2*time.Hour, pol.TTL)
	assert.Equal(t, 24*time.Hour, pol.MaxTTL)
	assert.Equal(t, 2, pol.MaxExtensions)
	assert.Equal(t, 5*time.Minute, pol.QueueTimeout)
	assert.Equal(t, 10*time.Minute, pol.CreatingTimeout)
	assert.Equal(t, 5*time.Second, pol.BackoffBase)
	assert.Equal(t, 2.0, pol.BackoffMultiplier)
	assert.Equal(t, 2*time.Minute, pol.BackoffMax)
	assert.Equal(t, 1, pol.MaxRecycling)
	assert.Equal(t, 1, pol.MaxSurge)
	assert.Equal(t, 3, pol.MinReadyDuringUpgrade, "an upgrade keeps the warm target Ready by default")
	assert.True(t, pol.FreezesSpares, "a pool freezes its spares beyond thawedSpares by default")
	assert.Equal(t, poolspec.DefaultThawedSpares, pol.ThawedSpares, "a fixed-size pool keeps the default running")
}

func TestScaling(t *testing.T) {
	p, err := poolspec.Parse([]byte(base + `  scaling:
    minReady: 5
    maxClusters: 8
    queueTimeout: 30s
    failureBackoff: {base: 1s, multiplier: 3, max: 1m}
    thawedSpares: 1
`))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	assert.True(t, pol.Autoscale)
	assert.Equal(t, 5, pol.WarmTarget)
	assert.Equal(t, 8, pol.MaxClusters)
	assert.Equal(t, 30*time.Second, pol.QueueTimeout)
	assert.Equal(t, 3.0, pol.BackoffMultiplier)
	assert.Equal(t, 1, pol.ThawedSpares)
}

// Bad input gets an error that names the field.
func TestErrorsNameTheField(t *testing.T) {
	cases := map[string]struct{ manifest, want string }{
		"unknown top field":      {base + "  sise: 3\n", "spec.sise: unknown field"},
		"unknown nested field":   {base + "  scaling:\n    minRedy: 1\n", "spec.scaling.minRedy: unknown field"},
		"unknown field in list":  {base + "  readinessGates:\n  - type: CRDExists\n    nam: x\n", "spec.readinessGates[0].nam: unknown field"},
		"bad duration":           {base + "  ttl: 2 hours\n", `spec.ttl: "2 hours" is not a duration`},
		"bad nested duration":    {base + "  scaling:\n    queueTimeout: soon\n", "spec.scaling.queueTimeout"},
		"wrong type":             {base + "  size: three\n", "spec.size: expected int"},
		"negative size":          {base + "  size: -1\n", "spec.size: -1 must be between"},
		"ttl over max":           {base + "  ttl: 48h\n  maxTtl: 24h\n", "spec.ttl: 48h0m0s is longer than spec.maxTtl"},
		"unknown backend":        {strings.Replace(base, "type: local", "type: k9s", 1), `spec.backend.type: unknown backend "k9s"`},
		"missing version":        {strings.Replace(base, "    version: v1.37.2\n", "    servers: 1\n", 1), "spec.cluster.version: required"},
		"bad name":               {strings.Replace(base, "name: dev", "name: Dev_Pool", 1), "metadata.name"},
		"bad kind":               {strings.Replace(base, "kind: ClusterPool", "kind: Pool", 1), "kind: must be ClusterPool"},
		"bad apiVersion":         {strings.Replace(base, "v1alpha1", "v1", 1), "apiVersion: must be"},
		"unknown gate":           {base + "  readinessGates:\n  - type: PodsHappy\n", `spec.readinessGates[0].type: unknown gate "PodsHappy"`},
		"gate missing field":     {base + "  readinessGates:\n  - type: DeploymentReady\n    name: x\n", "spec.readinessGates[0].namespace: required"},
		"addon both":             {base + "  addons:\n  - name: a\n    manifest: x\n    url: http://y\n", "spec.addons[0]: give exactly one"},
		"minReady over max":      {base + "  scaling:\n    minReady: 9\n    maxClusters: 8\n", "spec.scaling.minReady: 9 is more than maxClusters 8"},
		"not yaml":               {"spec: [unclosed", "not valid YAML"},
		"upgrade floor too high": {base + "  upgradePolicy:\n    minReadyDuringUpgrade: 4\n", "spec.upgradePolicy.minReadyDuringUpgrade: 4 is more than the warm target 3"},
		"negative maxRecycling":  {base + "  upgradePolicy:\n    maxRecycling: -1\n", "spec.upgradePolicy.maxRecycling"},
		"negative thawedSpares":  {base + "  scaling:\n    thawedSpares: -1\n", "spec.scaling.thawedSpares: -1 must be between 0 and 1000"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := poolspec.Parse([]byte(tc.manifest))
			if err == nil {
				_, err = p.Validate()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A field this version parses but does not act on is refused at apply, by name, until kobe
// implements it: a manifest means what it says.
func TestUnsupportedFieldsAreRefused(t *testing.T) {
	cases := map[string]struct{ spec, want string }{
		"resources":          {"  resources:\n    limits: {cpu: \"2\"}\n", "spec.resources is not supported by this version of kobe"},
		"diagnostics":        {"  diagnostics: {enabled: true}\n", "spec.diagnostics is not supported by this version of kobe"},
		"snapshot":           {"  snapshot: {name: golden}\n", "spec.snapshot is not supported by this version of kobe"},
		"empty resources":    {"  resources: {}\n", "spec.resources is not supported"},
		"datastore twice":    {"", "spec.backend.datastore: given twice (spec.backend.local.datastore too): keep one"},
		"capi section":       {"", "spec.backend.capi is not supported"},
		"vcluster section":   {"", "spec.backend.vcluster is not supported"},
		"vkobe section":      {"", "spec.backend.vkobe is not supported"},
		"servers":            {"", "spec.cluster.servers is not supported by this version of kobe"},
		"agents":             {"", "spec.cluster.agents is not supported"},
		"serverArgs":         {"", "spec.cluster.serverArgs is not supported"},
		"persistence":        {"", "spec.cluster.persistence is not supported"},
		"expose":             {"", "spec.cluster.expose is not supported"},
		"gate field unused":  {"  readinessGates:\n  - type: NodesReady\n    count: 1\n    url: http://x\n", "spec.readinessGates[0].url: not used by a NodesReady gate"},
		"gate name unused":   {"  readinessGates:\n  - type: URLHealthy\n    url: http://x\n    name: web\n", "spec.readinessGates[0].name: not used by a URLHealthy gate"},
		"gate count unused":  {"  readinessGates:\n  - type: DNSHealthy\n    namespace: kube-system\n    count: 2\n", "spec.readinessGates[0].count: not used by a DNSHealthy gate"},
		"sa on a deployment": {"  readinessGates:\n  - type: DeploymentReady\n    name: web\n    namespace: apps\n    serviceAccount: default\n", "spec.readinessGates[0].serviceAccount: not used"},
	}
	sections := map[string]string{ // fields inside spec.backend and spec.cluster
		"datastore twice":  "    datastore: {secretRef: pg}\n    local: {datastore: {secretRef: pg}}\n",
		"capi section":     "    capi: {infrastructureKind: DockerCluster}\n",
		"vcluster section": "    vcluster: {chartVersion: \"\"}\n",
		"vkobe section":    "    vkobe: {}\n",
	}
	clusterFields := map[string]string{
		"servers":     "    servers: 1\n",
		"agents":      "    agents: 2\n",
		"serverArgs":  "    serverArgs: [--disable=traefik]\n",
		"persistence": "    persistence: {size: 1Gi}\n",
		"expose":      "    expose: {type: NodePort}\n",
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := base + tc.spec
			if sec, ok := sections[name]; ok {
				m = strings.Replace(m, "    type: local\n", "    type: local\n"+sec, 1)
			}
			if f, ok := clusterFields[name]; ok {
				m = strings.Replace(m, "    version: v1.37.2\n", "    version: v1.37.2\n"+f, 1)
			}
			p, err := poolspec.Parse([]byte(m))
			require.NoError(t, err, "the upstream shape parses")
			_, err = p.Validate()
			require.Error(t, err, m)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The fields that are acted on, or that are informational, still apply.
func TestSupportedFieldsApply(t *testing.T) {
	for name, spec := range map[string]string{
		"healthCheck":   "  healthCheck: {intervalSeconds: 10, failureThreshold: 2}\n",
		"maxSurge":      "  upgradePolicy: {maxSurge: 2, maxRecycling: 1}\n",
		"local section": "",
		"gates":         "  readinessGates:\n  - {type: NodesReady, count: 1}\n  - {type: InClusterToken, namespace: default, serviceAccount: default}\n",
		"addons":        "  addons:\n  - {name: ns, manifest: \"apiVersion: v1\\nkind: Namespace\\nmetadata: {name: x}\\n\"}\n",
		"scaling":       "  scaling: {minReady: 1, maxClusters: 2}\n",
	} {
		t.Run(name, func(t *testing.T) {
			m := strings.Replace(base, "  name: dev\n", "  name: dev\n  labels: {team: ci}\n  annotations: {note: x}\n", 1) + spec
			if name == "local section" {
				m = strings.Replace(m, "    type: local\n", "    type: local\n    local: {}\n", 1)
			}
			m += "status: {ready: 2}\n"
			p, err := poolspec.Parse([]byte(m))
			require.NoError(t, err)
			_, err = p.Validate()
			assert.NoError(t, err, m)
		})
	}
}

// A spec stored before this version refused a field still resolves for its leases.
func TestStoredSpecWithARefusedField(t *testing.T) {
	p, err := poolspec.Parse([]byte(base + "  resources:\n    limits: {cpu: \"2\"}\n  readinessGates:\n  - {type: NodesReady, count: 1, url: \"http://x\"}\n"))
	require.NoError(t, err)
	_, err = p.Validate()
	require.ErrorContains(t, err, "spec.resources is not supported")
	pol, err := p.ValidateStored()
	require.NoError(t, err)
	assert.Equal(t, 3, pol.WarmTarget)
}

// What the upstream examples would meet once their backend type is compiled in: the fields
// their backend would need are refused by name (here under the local backend, the only one).
func TestUpstreamExamplesUnsupportedFields(t *testing.T) {
	want := map[string]string{
		"capi-docker.yaml":         "spec.backend.capi is not supported",
		"ci-k3s.yaml":              "spec.cluster.servers is not supported",
		"golden-k3s-postgres.yaml": "", // the local backend itself refuses goldenTemplates (TestUpstreamDatastoreShape)
		"vcluster.yaml":            "spec.backend.vcluster is not supported",
		"k0s.yaml":                 "",
		"dev-local.yaml":           "",
	}
	files, err := filepath.Glob("testdata/upstream/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, len(want))
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		p, err := poolspec.Parse(data)
		require.NoError(t, err, f)
		p.Spec.Backend.Type = "local"
		_, err = p.Validate()
		if w := want[filepath.Base(f)]; w == "" {
			assert.NoError(t, err, f)
		} else {
			assert.ErrorContains(t, err, w, f)
		}
	}
}

// Upstream's spec.backend.datastore is what the local backend reads as its datastore.
func TestUpstreamDatastoreShape(t *testing.T) {
	m := strings.Replace(base, "    type: local\n", "    type: local\n    datastore: {secretRef: shared-postgres, secretKey: url}\n", 1)
	p, err := poolspec.Parse([]byte(m))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	assert.JSONEq(t, `{"datastore":{"secretRef":"shared-postgres","secretKey":"url"}}`, string(pol.BackendOptions))

	data, err := os.ReadFile("testdata/upstream/golden-k3s-postgres.yaml")
	require.NoError(t, err)
	p, err = poolspec.Parse(data)
	require.NoError(t, err)
	p.Spec.Backend.Type = "local"
	pol, err = p.Validate()
	require.NoError(t, err)
	f, err := backends.Resolve("local")
	require.NoError(t, err)
	// The local backend has golden templates: the upstream field reaches it and its shape passes
	// (whatever else Validate says, e.g. of a version this machine has not built).
	assert.True(t, backends.WantsGoldenTemplates(pol.BackendOptions))
	if err := f.Prototype.Validate(backends.InstanceSpec{ID: "m1", Pool: pol.Name, KubernetesVersion: "v1.37.2", Options: pol.BackendOptions}); err != nil {
		assert.NotContains(t, err.Error(), "goldenTemplates")
	}
}

// Upstream ignores spec.size when spec.scaling is set, and so does kobe: a manifest carrying
// both is accepted, the warm target is spec.scaling.minReady. Every upstream example is
// accepted with both (its size beside a scaling section, or a scaling section beside its size).
func TestManifestsMeanWhatUpstreamMeant(t *testing.T) {
	files, err := filepath.Glob("testdata/upstream/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		p, err := poolspec.Parse(data)
		require.NoError(t, err, f)
		switch p.Spec.Backend.Type {
		case "local", "k3s", "k0s", "":
		default:
			continue // not compiled in: refused by backend type (TestUpstreamExamplesParse)
		}
		if p.Spec.Size == nil {
			size := 3
			p.Spec.Size = &size
		}
		if p.Spec.Scaling == nil {
			minReady := 1
			p.Spec.Scaling = &poolspec.Scaling{MinReady: &minReady}
		}
		pol, err := p.Validate()
		if !assert.NoError(t, err, "%s with size %d and scaling", f, *p.Spec.Size) {
			continue
		}
		assert.True(t, pol.Autoscale, f)
		assert.Equal(t, *p.Spec.Scaling.MinReady, pol.WarmTarget, "%s: the warm target is scaling.minReady", f)
	}

	for name, tc := range map[string]struct {
		spec       string
		autoscale  bool
		warmTarget int
		maxTTL     time.Duration
		want       string // "" = accepted
	}{
		"size alone":                  {"  size: 4\n", false, 4, 24 * time.Hour, ""},
		"scaling alone":               {"  scaling: {minReady: 2}\n", true, 2, 24 * time.Hour, ""},
		"size and scaling":            {"  size: 4\n  scaling: {minReady: 2}\n", true, 2, 24 * time.Hour, ""},
		"size and empty scaling":      {"  size: 4\n  scaling: {}\n", true, 1, 24 * time.Hour, ""},
		"size zero and scaling":       {"  size: 0\n  scaling: {minReady: 1}\n", true, 1, 24 * time.Hour, ""},
		"bad size beside scaling":     {"  size: -1\n  scaling: {minReady: 1}\n", false, 0, 0, "spec.size: -1 must be between"},
		"ttl past the default max":    {"  ttl: 48h\n", false, 3, 48 * time.Hour, ""},
		"ttl past a given max":        {"  ttl: 48h\n  maxTtl: 24h\n", false, 0, 0, "spec.ttl: 48h0m0s is longer than spec.maxTtl"},
		"ttl within the default max":  {"  ttl: 12h\n", false, 3, 24 * time.Hour, ""},
		"ttl below the lease minimum": {"  ttl: 2s\n", false, 0, 0, "spec.ttl: 2s is shorter than the minimum lease ttl of 5s"},
		"ttl at the lease minimum":    {"  ttl: 5s\n", false, 3, 24 * time.Hour, ""},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := poolspec.Parse([]byte(base + tc.spec))
			require.NoError(t, err)
			pol, err := p.Validate()
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.autoscale, pol.Autoscale)
			assert.Equal(t, tc.warmTarget, pol.WarmTarget)
			assert.Equal(t, tc.maxTTL, pol.MaxTTL)
		})
	}
}
