package conformance_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
	_ "github.com/kunobi-ninja/kobe/testsuite/conformance/fixturebackend" // the one line docs/backends/adding.md speaks of
)

const fixturePool = `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: fixtures}
spec:
  backend:
    type: fixture
    fixture: {greeting: hello}
  cluster: {version: v1.37.2}
`

// A backend added by one package and one import line (the fixture's, above; the test names it
// nowhere else) is a backend of kobe: the registry lists it, a pool manifest names it, its own
// registration makes its section into its instances' options and refuses what it does not
// read, and it passes the conformance suite.
func TestABackendIsOnePackage(t *testing.T) {
	f, err := backends.Resolve("fixture")
	require.NoError(t, err, "registered by its init")
	assert.Contains(t, backends.Matrix(), backends.CapabilitiesOf("fixture", f.Description, f.Prototype))

	p, err := poolspec.Parse([]byte(fixturePool))
	require.NoError(t, err)
	pol, err := p.Validate()
	require.NoError(t, err)
	assert.Equal(t, "fixture", pol.Backend)
	assert.JSONEq(t, `{"greeting":"hello"}`, string(pol.BackendOptions), "its section, as its registration reads it")

	for name, tc := range map[string]struct{ from, to, want string }{
		"a field of its section it does not know": {"{greeting: hello}", "{greting: hello}", `spec.backend.fixture: json: unknown field "greting"`},
		"a host cluster":               {"    type: fixture\n", "    type: fixture\n    hostCluster: h1\n", "spec.backend.hostCluster: the fixture backend does not run in a host cluster"},
		"a shared datastore":           {"    type: fixture\n", "    type: fixture\n    datastore: {secretRef: pg}\n", "spec.backend.datastore is not supported by the fixture backend"},
		"the shape of a hosted member": {"{version: v1.37.2}", "{version: v1.37.2, servers: 1}", "spec.cluster.servers is not supported by this version of kobe"},
		"sleep":                        {"  cluster:", "  sleep: {afterInactivity: 1h}\n  cluster:", "spec.sleep is not supported by the fixture backend"},
		"the section of a backend not compiled in": {"    type: fixture\n", "    type: fixture\n    local: {}\n", "spec.backend.local is not supported by this version of kobe (no backend of that name is compiled in: fixture)"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			m := strings.Replace(fixturePool, tc.from, tc.to, 1)
			require.NotEqual(t, fixturePool, m)
			p, err := poolspec.Parse([]byte(m))
			require.NoError(t, err)
			_, err = p.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	b, err := f.New(backends.Environment{StateDir: t.TempDir(), HostID: "test"})
	require.NoError(t, err)
	spec := func(id string) backends.InstanceSpec {
		return backends.InstanceSpec{ID: id, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion, Options: pol.BackendOptions}
	}
	t.Run("the section reaches the instance", func(t *testing.T) {
		ctx := context.Background()
		_, err := b.Create(ctx, spec("greeting"))
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Delete(ctx, "greeting")) }()
		cred, err := b.Credentials(ctx, "greeting", backends.CredentialRequest{})
		require.NoError(t, err)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
		require.NoError(t, err)
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		cm, err := client.CoreV1().ConfigMaps("kube-public").Get(ctx, "fixture", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "hello", cm.Data["greeting"])
	})

	bad := spec("conf-refused")
	bad.Options = json.RawMessage(`{"replicas":3}`)
	noVersion := spec("conf-versionless")
	noVersion.KubernetesVersion = ""
	conformance.Run(t, conformance.Subject{
		Backend:      b,
		Spec:         spec,
		InvalidSpecs: []backends.InstanceSpec{bad, noVersion},
		ReadyWithin:  10 * time.Second,
	})
}
