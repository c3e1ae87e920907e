package poolspec_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	_ "github.com/kunobi-ninja/kobe/backends/k0s"
	_ "github.com/kunobi-ninja/kobe/backends/k3s"
	"github.com/kunobi-ninja/kobe/poolspec"
)

const k3sPool = `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: ci-k3s}
spec:
  backend:
    type: k3s
    k3s: {namespace: tenants}
  cluster:
    version: v1.32.0+k3s1
    servers: 1
    agents: 2
    serverArgs: [--disable=traefik]
    persistence: {storageType: pvc, storageRequestSize: 5Gi}
    expose: {exposeType: NodePort}
  resources:
    limits: {memory: 2Gi}
`

// The k3s and k0s backends get their section plus spec.cluster's shape and spec.resources
// (the backend checks them); the JSON is canonical, so an unchanged manifest is no drift.
func TestHostedBackendsGetTheClusterShape(t *testing.T) {
	p, err := poolspec.Parse([]byte(k3sPool))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	assert.Equal(t, "k3s", pol.Backend)
	var opts map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(pol.BackendOptions, &opts))
	assert.JSONEq(t, `"tenants"`, string(opts["namespace"]))
	assert.JSONEq(t, `{"servers":1,"agents":2,"serverArgs":["--disable=traefik"],"persistence":{"storageType":"pvc","storageRequestSize":"5Gi"},"expose":{"exposeType":"NodePort"}}`, string(opts["cluster"]))
	assert.JSONEq(t, `{"limits":{"memory":"2Gi"}}`, string(opts["resources"]))
	again, err := p.Validate()
	require.NoError(t, err)
	assert.Equal(t, string(pol.BackendOptions), string(again.BackendOptions))

	f, err := backends.Resolve("k3s")
	require.NoError(t, err)
	spec := backends.InstanceSpec{ID: "m1", Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion, Options: pol.BackendOptions}
	require.NoError(t, f.Prototype.Validate(spec), "the backend reads what poolspec passes")
}

func TestHostedBackendRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ from, to, want string }{
		"section key reserved":  {"k3s: {namespace: tenants}", "k3s: {cluster: {servers: 1}}", "spec.backend.k3s.cluster: not a field of spec.backend.k3s (give it as spec.cluster)"},
		"section of the other":  {"k3s: {namespace: tenants}", "k0s: {}", "spec.backend.k0s is not supported by the k3s backend"},
		"unknown section field": {"k3s: {namespace: tenants}", "k3s: {replicas: 3}", `spec.backend.k3s: unknown field "replicas"`},
		"bad persistence field": {"{storageType: pvc, storageRequestSize: 5Gi}", "{size: 5Gi}", `spec.cluster: unknown field "size"`},
		"servers without store": {"servers: 1", "servers: 3", "spec.cluster.servers: 3 servers need a shared datastore"},
		"k3s version":           {"v1.32.0+k3s1", "v1.32.0", `spec.cluster.version: "v1.32.0" is not a k3s version`},
	} {
		t.Run(name, func(t *testing.T) {
			m := strings.Replace(k3sPool, tc.from, tc.to, 1)
			require.NotEqual(t, k3sPool, m)
			p, err := poolspec.Parse([]byte(m))
			if err == nil {
				var pol poolspec.Policy
				pol, err = p.Validate()
				if err == nil {
					f, _ := backends.Resolve(pol.Backend)
					err = f.Prototype.Validate(backends.InstanceSpec{ID: "m1", Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion, Options: pol.BackendOptions})
				}
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// spec.backend.datastore reaches the k3s backend, which takes servers > 1 and golden templates
// with it, and refuses by name what golden templates cannot do.
func TestHostedDatastore(t *testing.T) {
	m := strings.Replace(k3sPool, "    k3s: {namespace: tenants}\n", "    k3s: {namespace: tenants}\n    datastore: {secretRef: shared-postgres}\n", 1)
	m = strings.Replace(m, "servers: 1", "servers: 3", 1)
	p, err := poolspec.Parse([]byte(m))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	var opts map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(pol.BackendOptions, &opts))
	assert.JSONEq(t, `{"secretRef":"shared-postgres"}`, string(opts["datastore"]))
	f, err := backends.Resolve("k3s")
	require.NoError(t, err)
	require.NoError(t, f.Prototype.Validate(backends.InstanceSpec{ID: "m1", Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion, Options: pol.BackendOptions}))

	data, err := os.ReadFile("testdata/upstream/golden-k3s-postgres.yaml")
	require.NoError(t, err)
	p, err = poolspec.Parse(data)
	require.NoError(t, err)
	pol, err = p.Validate()
	require.NoError(t, err)
	require.NoError(t, f.Prototype.Validate(backends.InstanceSpec{ID: "m1", Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion, Options: pol.BackendOptions}),
		"golden templates on k3s (the datastore's driver is judged at preflight, which reads the Secret)")
	assert.True(t, backends.WantsGoldenTemplates(pol.BackendOptions), "the member's Provision builds the template")

	// With --secrets-encryption the template's Secrets would be sealed with the builder's key.
	m = strings.Replace(string(data), "  cluster:\n    version: v1.32.0+k3s1\n", "  cluster:\n    version: v1.32.0+k3s1\n    serverArgs: [--secrets-encryption]\n", 1)
	p, err = poolspec.Parse([]byte(m))
	require.NoError(t, err)
	pol, err = p.Validate()
	if err == nil {
		err = f.Prototype.Validate(backends.InstanceSpec{ID: "m1", Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion, Options: pol.BackendOptions})
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.cluster.serverArgs: --secrets-encryption with spec.backend.datastore.goldenTemplates")
}
