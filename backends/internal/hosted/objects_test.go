package hosted

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testDistro = Distro{
	Name: "k3s", DataDir: "/var/lib/rancher/k3s",
	Image:   func(v string) (string, error) { return "rancher/k3s:" + strings.ReplaceAll(v, "+", "-"), nil },
	CAFiles: [][2]string{{"server/tls/server-ca.crt", "server/tls/server-ca.key"}},
	ServerCommand: func(in ServerInput) []string {
		return append([]string{"k3s", "server"}, in.Options.Cluster.ServerArgs...)
	},
	AgentCommand: func(in ServerInput) []string { return []string{"k3s", "agent", "--server=" + in.ServerURL} },
}

func TestParseOptionsDefaults(t *testing.T) {
	p, err := ParseOptions("spec.backend.k3s", nil)
	require.NoError(t, err)
	assert.Equal(t, "default", p.Namespace)
	assert.Equal(t, 1, p.Servers)
	assert.Equal(t, 0, p.Agents)
	assert.Equal(t, StorageEmptyDir, p.StorageType)
	assert.Equal(t, ExposeClusterIP, p.ExposeType)

	p, err = ParseOptions("spec.backend.k3s", json.RawMessage(`{"cluster":{"persistence":{"storageType":"pvc"}}}`))
	require.NoError(t, err)
	assert.Equal(t, "10Gi", p.StorageSize.String(), "default claim size")
}

// The shapes that only multi-server instances have (they need a shared datastore)
// are rendered as they will be created: a PodDisruptionBudget keeping all but one server.
func TestRenderedObjects(t *testing.T) {
	p := Parsed{Options: Options{Namespace: "ns", Cluster: Cluster{ServerArgs: []string{"--disable-agent"}}}, Servers: 3, Agents: 2,
		StorageType: StorageEmptyDir, ExposeType: ExposeClusterIP}
	in := ServerInput{ID: "i1", Namespace: "ns", SANs: sans("i1", "ns", "10.0.0.7", nil), ServerURL: "https://i1.ns.svc:6443", Options: p}

	pdb := renderPDB(testDistro, "i1", "pool", p)
	require.NotNil(t, pdb)
	assert.Equal(t, int32(1), pdb.Spec.MaxUnavailable.IntVal)
	p1 := p
	p1.Servers = 1
	assert.Nil(t, renderPDB(testDistro, "i1", "pool", p1), "no PDB for one server")

	set := renderServers(testDistro, "i1", "pool", "rancher/k3s:v1.32.0-k3s1", in)
	assert.Equal(t, int32(3), *set.Spec.Replicas)
	assert.Equal(t, []string{"k3s", "server", "--disable-agent"}, set.Spec.Template.Spec.Containers[0].Command)
	init := set.Spec.Template.Spec.InitContainers[0]
	assert.Contains(t, init.Command[2], "cp /var/lib/kobe/ca/tls.crt /var/lib/rancher/k3s/server/tls/server-ca.crt")
	assert.Equal(t, "i1", set.Spec.Template.Labels[LabelInstance])

	agents := renderAgents(testDistro, "i1", "pool", "rancher/k3s:v1.32.0-k3s1", in)
	require.NotNil(t, agents)
	assert.Equal(t, int32(2), *agents.Spec.Replicas)
	assert.Equal(t, []string{"k3s", "agent", "--server=https://i1.ns.svc:6443"}, agents.Spec.Template.Spec.Containers[0].Command)

	assert.Equal(t, []string{"10.0.0.7", "i1", "i1.ns", "i1.ns.svc", "i1.ns.svc.cluster.local"}, in.SANs)
}

func TestSharedDatastoreOptions(t *testing.T) {
	_, err := ParseOptions("spec.backend.k3s", json.RawMessage(`{"cluster":{"servers":3}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.cluster.servers: 3 servers need a shared datastore (spec.backend.datastore)")

	p, err := ParseOptions("spec.backend.k3s", json.RawMessage(`{"cluster":{"servers":3},"datastore":{"secretRef":"pg"}}`))
	require.NoError(t, err)
	assert.Equal(t, 3, p.Servers)
	require.NotNil(t, p.SharedDatastore)
	assert.Equal(t, "connection-url", p.SharedDatastore.Key(), "upstream's default key")
	assert.False(t, p.SharedDatastore.Golden())

	p, err = ParseOptions("spec.backend.k3s", json.RawMessage(`{"datastore":{"secretRef":"pg","goldenTemplates":true}}`))
	require.NoError(t, err, "golden templates: the driver is judged at preflight")
	assert.True(t, p.SharedDatastore.Golden())

	for raw, want := range map[string]string{
		`{"datastore":{}}`:                                     "spec.backend.datastore.secretRef: required",
		`{"datastore":{"secretRef":"../x"}}`:                   `spec.backend.datastore.secretRef: "../x" is not a Secret name`,
		`{"datastore":{"secretRef":"pg","secretKey":"a/b"}}`:   `spec.backend.datastore.secretKey: "a/b" is not a Secret key`,
		`{"datastore":{"secretRef":"pg","driver":"postgres"}}`: `spec.backend.datastore: unknown field "driver"`,
	} {
		_, err := ParseOptions("spec.backend.k3s", json.RawMessage(raw))
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), want, raw)
	}
}

// With a shared datastore the server reads its URL from the instance's Secret, by an
// environment variable the distribution names: never a literal in the pod spec.
func TestServersReadTheDatastoreURLFromASecret(t *testing.T) {
	d := testDistro
	d.DatastoreEnv = "K3S_DATASTORE_ENDPOINT"
	p, err := ParseOptions("spec.backend.k3s", json.RawMessage(`{"cluster":{"servers":3},"datastore":{"secretRef":"pg"}}`))
	require.NoError(t, err)
	in := ServerInput{ID: "i1", Namespace: "default", Options: p, DatastoreEndpoint: "postgres://kobe_i1:secret@db:5432/kobe_i1"}
	set := renderServers(d, "i1", "pool", "rancher/k3s:v1.32.0-k3s1", in)
	env := set.Spec.Template.Spec.Containers[0].Env
	require.Len(t, env, 2)
	assert.Equal(t, "K3S_DATASTORE_ENDPOINT", env[1].Name)
	assert.Empty(t, env[1].Value)
	assert.Equal(t, "i1-datastore", env[1].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "endpoint", env[1].ValueFrom.SecretKeyRef.Key)
	assert.NotNil(t, renderPDB(d, "i1", "pool", p), "a PDB for 3 servers")
}
