// Package compiledin_test judges pool manifests as the kobe binary does, with every backend it
// compiles in registered (cmd/kobe/main.go), and keeps what it makes of them in
// testdata/policies.json: a change of the manifest code that changes a pool's policy, its
// backend options (drift), or the refusal of a bad manifest shows there.
package compiledin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/kunobi-ninja/kobe/backends/capi"
	_ "github.com/kunobi-ninja/kobe/backends/k0s"
	_ "github.com/kunobi-ninja/kobe/backends/k3s"
	_ "github.com/kunobi-ninja/kobe/backends/local"
	_ "github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/poolspec"
)

const head = "apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: p}\nspec:\n"

// manifests are the cases beside the upstream examples: each backend's section, the shared
// parts of spec.backend, and the ways to get them wrong.
var manifests = map[string]string{
	"local":                   "  backend: {type: local}\n  cluster: {version: v1.37.2}\n",
	"local section":           "  backend: {type: local, local: {components: [apiserver]}}\n  cluster: {version: v1.37.2}\n",
	"local null section":      "  backend: {type: local, local: null}\n  cluster: {version: v1.37.2}\n",
	"local datastore":         "  backend: {type: local, local: {components: [apiserver]}, datastore: {secretRef: pg, goldenTemplates: true}}\n  cluster: {version: v1.37.2}\n",
	"local datastore twice":   "  backend: {type: local, local: {datastore: {secretRef: pg}}, datastore: {secretRef: pg}}\n  cluster: {version: v1.37.2}\n",
	"local with capi section": "  backend: {type: local, capi: {infrastructureKind: DockerCluster}}\n  cluster: {version: v1.37.2}\n",
	"local with vkobe":        "  backend: {type: local, vkobe: {version: x}}\n  cluster: {version: v1.37.2}\n",
	"local with unknown key":  "  backend: {type: local, lokal: {}}\n  cluster: {version: v1.37.2}\n",
	"local hostCluster":       "  backend: {type: local, hostCluster: h1}\n  cluster: {version: v1.37.2}\n",
	"local sleep":             "  backend: {type: local}\n  cluster: {version: v1.37.2}\n  sleep: {afterInactivity: 1h}\n",
	"local resources":         "  backend: {type: local}\n  cluster: {version: v1.37.2}\n  resources: {limits: {cpu: \"2\"}}\n",
	"type is a number":        "  backend: {type: 3}\n  cluster: {version: v1.37.2}\n",
	"backend is a string":     "  backend: local\n  cluster: {version: v1.37.2}\n",
	"unknown type":            "  backend: {type: k9s}\n  cluster: {version: v1.37.2}\n",
	"k3s whole": "  backend: {type: k3s, hostCluster: h1, k3s: {namespace: tenants}, datastore: {secretRef: pg}}\n" +
		"  cluster: {version: v1.32.0+k3s1, servers: 3, agents: 2, serverArgs: [--disable=traefik], persistence: {storageType: pvc}, expose: {exposeType: NodePort}}\n" +
		"  resources: {limits: {memory: 2Gi}, requests: {cpu: 500m}}\n",
	"k3s by default":           "  backend: {k3s: {namespace: tenants}}\n  cluster: {version: v1.32.0+k3s1}\n",
	"k3s empty resources":      "  backend: {type: k3s}\n  cluster: {version: v1.32.0+k3s1}\n  resources: {}\n",
	"k3s reserved key":         "  backend: {type: k3s, k3s: {cluster: {servers: 1}}}\n  cluster: {version: v1.32.0+k3s1}\n",
	"k3s section not object":   "  backend: {type: k3s, k3s: tenants}\n  cluster: {version: v1.32.0+k3s1}\n",
	"k3s with k0s section":     "  backend: {type: k3s, k0s: {}}\n  cluster: {version: v1.32.0+k3s1}\n",
	"k3s certificates":         "  backend: {type: k3s}\n  cluster: {version: v1.32.0+k3s1}\n  certificates: {recycleBefore: 7d}\n",
	"k0s sleep":                "  backend: {type: k0s, k0s: {namespace: t}}\n  cluster: {version: v1.32.1+k0s.0, agents: 1}\n  sleep: {afterInactivity: 1h}\n",
	"vcluster whole":           "  backend: {type: vcluster, hostCluster: h2, vcluster: {chartVersion: 0.34.0, values: \"x: 1\"}}\n  cluster: {version: v1.37.2}\n",
	"vcluster datastore":       "  backend: {type: vcluster, datastore: {secretRef: pg}}\n  cluster: {version: v1.37.2}\n",
	"vcluster servers":         "  backend: {type: vcluster}\n  cluster: {version: v1.37.2, servers: 1}\n",
	"vcluster sleep":           "  backend: {type: vcluster}\n  cluster: {version: v1.37.2}\n  sleep: {afterInactivity: 1h}\n",
	"capi section":             "  backend: {type: capi, capi: {infrastructureApiVersion: a.b/v1, infrastructureKind: DockerCluster, infrastructureSpec: {x: [1, 2.5, \"y\"]}}}\n  cluster: {version: v1.37.0}\n",
	"capi hostCluster":         "  backend: {type: capi, hostCluster: h1}\n  cluster: {version: v1.37.0}\n",
	"capi with local section":  "  backend: {type: capi, local: {}}\n  cluster: {version: v1.37.0}\n",
	"every section, stored":    "  backend: {type: local, local: {}, capi: {}, k3s: {}, k0s: {}, vcluster: {}, vkobe: {}, datastore: {secretRef: pg}}\n  cluster: {version: v1.37.2}\n",
	"unknown field elsewhere":  "  backend: {type: local}\n  cluster: {version: v1.37.2, size: 2}\n",
	"section and unknown spec": "  backend: {type: local, capi: {}}\n  cluster: {version: v1.37.2}\n  sise: 1\n",
}

// outcome is what kobe makes of one manifest: at apply (Validate), from the store
// (ValidateStored), and the manifest written back as JSON (compared as data, not as text).
type outcome struct {
	Policy      *poolspec.Policy `json:"policy,omitempty"`
	Error       string           `json:"error,omitempty"`
	Stored      *poolspec.Policy `json:"stored,omitempty"`
	StoredError string           `json:"storedError,omitempty"`
	Written     any              `json:"written,omitempty"`
}

func judge(t *testing.T, manifest []byte) outcome {
	var o outcome
	p, err := poolspec.Parse(manifest)
	if err != nil {
		o.Error = err.Error()
		return o
	}
	if pol, err := p.Validate(); err != nil {
		o.Error = err.Error()
	} else {
		o.Policy = &pol
	}
	if pol, err := p.ValidateStored(); err != nil {
		o.StoredError = err.Error()
	} else {
		o.Stored = &pol
	}
	written, err := json.Marshal(p)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(written, &o.Written))
	again, err := poolspec.Parse(written)
	require.NoError(t, err, "what is written parses again")
	assert.Equal(t, p, again, "and reads back the same")
	return o
}

func TestManifestsAsTheBinaryJudgesThem(t *testing.T) {
	got := map[string]outcome{}
	files, err := filepath.Glob("../testdata/upstream/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		got["upstream/"+filepath.Base(f)] = judge(t, data)
	}
	names := make([]string, 0, len(manifests))
	for name := range manifests {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		got[name] = judge(t, []byte(head+manifests[name]))
	}
	out, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	out = append(out, '\n')
	const golden = "testdata/policies.json"
	if os.Getenv("KOBE_UPDATE_POLICIES") == "1" {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, out, 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "KOBE_UPDATE_POLICIES=1 writes it")
	if !assert.Equal(t, strings.Split(string(want), "\n"), strings.Split(string(out), "\n")) {
		t.Log("what kobe makes of a manifest changed; if meant, KOBE_UPDATE_POLICIES=1 rewrites " + golden)
	}
}
