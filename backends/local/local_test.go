package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/conformance"
)

const kubeVersion = "v1.37.2"

func newBackend(t *testing.T, state string) *local.Backend {
	t.Helper()
	tools := local.DefaultToolsDir()
	if len(local.Tools{Dir: tools}.KubernetesVersions()) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (make test does it for you)", tools)
	}
	b, err := local.New(local.Config{StateDir: state, HostID: "test-host", ToolsDir: tools})
	require.NoError(t, err)
	return b
}

func spec(id string, opts string) backends.InstanceSpec {
	s := backends.InstanceSpec{ID: id, Pool: "conformance", KubernetesVersion: kubeVersion}
	if opts != "" {
		s.Options = json.RawMessage(opts)
	}
	return s
}

func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real kube-apiserver processes; skipped with -short")
	}
	state := t.TempDir()
	b := newBackend(t, state)
	conformance.Run(t, conformance.Subject{
		Backend: b,
		Spec:    func(id string) backends.InstanceSpec { return spec(id, "") },
		InvalidSpecs: []backends.InstanceSpec{
			spec("Bad_ID", ""),
			{ID: "conf-badversion", KubernetesVersion: "v1.99.0"},
			spec("conf-badcomponent", `{"components":["apiserver","sheduler"]}`),
			spec("conf-unknownfield", `{"replicas":3}`),
		},
		ReadyWithin: 90 * time.Second,
		Leftovers: func(id string) error {
			dir := filepath.Join(state, "local", "instances", id)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return fmt.Errorf("%s remains", dir)
			}
			return nil
		},
	})
}

func TestValidationNamesTheField(t *testing.T) {
	b := newBackend(t, t.TempDir())
	cases := map[string]struct {
		spec backends.InstanceSpec
		want string
	}{
		"unknown version":    {backends.InstanceSpec{ID: "x", KubernetesVersion: "v1.2.3"}, `spec.cluster.version: Kubernetes "v1.2.3" is not available`},
		"missing version":    {backends.InstanceSpec{ID: "x"}, "spec.cluster.version: required"},
		"component typo":     {spec("x", `{"components":["apiserver","kowk"]}`), `spec.backend.local.components[1]: unknown component "kowk"`},
		"no apiserver":       {spec("x", `{"components":["scheduler"]}`), `must include "apiserver"`},
		"kwok alone":         {spec("x", `{"components":["apiserver","kwok"]}`), `"kwok" needs`},
		"nodes without kwok": {spec("x", `{"nodes":3}`), "spec.backend.local.nodes"},
		"unknown field":      {spec("x", `{"replicas":3}`), `spec.backend.local: json: unknown field "replicas"`},
		"bad id":             {spec("Not_A_Label", ""), `instance id "Not_A_Label"`},
		"duplicate":          {spec("x", `{"components":["apiserver","apiserver"]}`), "listed twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := b.Validate(tc.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	require.NoError(t, b.Validate(spec("ok", `{"components":["apiserver","controller-manager","scheduler","kwok"],"nodes":2}`)))
	assert.Empty(t, b.InstanceIDs(), "validation creates nothing")
}

func TestMatrixListsLocal(t *testing.T) {
	m := backends.Matrix()
	require.NotEmpty(t, m)
	var found bool
	for _, c := range m {
		if c.Backend == "local" {
			found = true
			assert.True(t, c.Sleep)
			assert.True(t, c.CertRotate)
			assert.True(t, c.HostBound)
			assert.False(t, c.Snapshot)
			assert.Equal(t, "v1", c.Contract)
		}
	}
	assert.True(t, found)
	_ = context.Background()
}
