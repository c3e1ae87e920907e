package pool

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/api"
	_ "github.com/kunobi-ninja/kobe/backends/local" // the backend the manifests name
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

const devPool = `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata:
  name: dev
spec:
  size: 2
  ttl: 1h
  backend:
    type: local
  cluster:
    version: v1.35.0
`

func testFactory() *factory.Factory {
	ios, _, _, _ := iostreams.Test()
	return &factory.Factory{IOStreams: ios}
}

func TestFlags(t *testing.T) {
	var got *ApplyOptions
	cmd := NewCmdApply(testFactory(), func(o *ApplyOptions) error { got = o; return nil })
	require.NoError(t, cmdtest.Run(cmd, "-f", "pool.yaml", "--dry-run", "-o", "json"))
	assert.Equal(t, "pool.yaml", got.File)
	assert.True(t, got.DryRun)
	assert.True(t, got.Validate)
	assert.Equal(t, "json", got.Output.String())

	var gotGet *GetOptions
	require.NoError(t, cmdtest.Run(NewCmdGet(testFactory(), func(o *GetOptions) error { gotGet = o; return nil }), "ci", "-o", "yaml"))
	assert.Equal(t, "ci", gotGet.Name)

	for _, tc := range []struct {
		cmd  func(ran *bool) *cobra.Command
		args []string
		want string
	}{
		{func(ran *bool) *cobra.Command {
			return NewCmdApply(testFactory(), func(*ApplyOptions) error { *ran = true; return nil })
		}, nil, "-f FILE is required"},
		{func(ran *bool) *cobra.Command {
			return NewCmdApply(testFactory(), func(*ApplyOptions) error { *ran = true; return nil })
		}, []string{"-f", "x", "-o", "xml"}, `-o "xml": must be table, json or yaml`},
		{func(ran *bool) *cobra.Command {
			return NewCmdApply(testFactory(), func(*ApplyOptions) error { *ran = true; return nil })
		}, []string{"pool.yaml"}, "unknown command"},
		{func(ran *bool) *cobra.Command {
			return NewCmdList(testFactory(), func(*ListOptions) error { *ran = true; return nil })
		}, []string{"-o", "wide"}, `-o "wide"`},
		{func(ran *bool) *cobra.Command {
			return NewCmdGet(testFactory(), func(*GetOptions) error { *ran = true; return nil })
		}, nil, "give the pool name"},
		{func(ran *bool) *cobra.Command {
			return NewCmdGet(testFactory(), func(*GetOptions) error { *ran = true; return nil })
		}, []string{"ci", "-o", "kubeconfig"}, `-o "kubeconfig"`},
		{func(ran *bool) *cobra.Command {
			return NewCmdDelete(testFactory(), func(*DeleteOptions) error { *ran = true; return nil })
		}, nil, "give the pool name"},
	} {
		ran := false
		err := cmdtest.Run(tc.cmd(&ran), tc.args...)
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.False(t, ran)
	}
}

func setup(t *testing.T) (*cmdtest.API, *factory.Factory, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	a := cmdtest.New(t)
	f, ios := a.Factory()
	return a, f, ios.In.(*bytes.Buffer), ios.Out.(*bytes.Buffer), ios.ErrOut.(*bytes.Buffer)
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "pool.yaml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestApplyCreatesThenConfigures(t *testing.T) {
	a, f, _, out, _ := setup(t)
	file := writeFile(t, devPool)
	require.NoError(t, cmdtest.Run(NewCmdApply(f, nil), "-f", file))
	assert.Equal(t, "pool dev created (generation 1)\n", out.String())
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdApply(f, nil), "-f", file, "-o", "json"))
	var view api.PoolView
	require.NoError(t, json.Unmarshal(out.Bytes(), &view))
	assert.EqualValues(t, 2, view.Generation)

	// The manifest goes to PUT /v1/pools/dev as JSON, as written.
	a.Mu.Lock()
	body := a.Requests[0].Body
	a.Mu.Unlock()
	assert.JSONEq(t, `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"dev"},
		"spec":{"size":2,"ttl":"1h","backend":{"type":"local"},"cluster":{"version":"v1.35.0"}}}`, body)
	assert.Equal(t, []string{"PUT /v1/pools/dev", "PUT /v1/pools/dev"}, a.Seen())
}

func TestApplyFromStdinSeveralDocuments(t *testing.T) {
	a, f, in, out, _ := setup(t)
	in.WriteString("# two pools\n---\n" + devPool + "---\n" + strings.Replace(devPool, "name: dev", "name: dev2", 1) + "---\n")
	require.NoError(t, cmdtest.Run(NewCmdApply(f, nil), "-f", "-"))
	assert.Equal(t, "pool dev created (generation 1)\npool dev2 created (generation 1)\n", out.String())
	assert.Equal(t, []string{"PUT /v1/pools/dev", "PUT /v1/pools/dev2"}, a.Seen())
}

func TestApplyValidatesLocallyFirst(t *testing.T) {
	for _, tc := range []struct{ manifest, want string }{
		{strings.Replace(devPool, "size: 2", "size: 2\n  scaling:\n    minRedy: 1", 1), "spec.scaling.minRedy"},
		{strings.Replace(devPool, "ttl: 1h", "ttl: forever", 1), `pool "dev": spec.ttl: "forever" is not a duration`},
		{strings.Replace(devPool, "type: local", "type: k3s", 1), "--validate=false"},
		{strings.Replace(devPool, "name: dev", "name: Dev_Pool", 1), "metadata.name"},
		{"", "no manifest"},
		{"a: [", "not valid YAML"},
	} {
		a, f, _, _, _ := setup(t)
		file := writeFile(t, tc.manifest)
		err := cmdtest.Run(NewCmdApply(f, nil), "-f", file)
		require.Error(t, err, tc.manifest)
		assert.Contains(t, err.Error(), tc.want)
		assert.Empty(t, a.Seen(), "nothing is sent when a manifest is bad")
	}

	// A bad second document stops the first one too.
	a, f, _, _, _ := setup(t)
	file := writeFile(t, devPool+"---\n"+strings.Replace(devPool, "size: 2", "size: -1", 1))
	err := cmdtest.Run(NewCmdApply(f, nil), "-f", file)
	require.ErrorContains(t, err, "(document 2)")
	assert.ErrorContains(t, err, "spec.size")
	assert.Empty(t, a.Seen())

	// --validate=false leaves the check to the server.
	a, f, _, _, _ = setup(t)
	file = writeFile(t, strings.Replace(devPool, "type: local", "type: k3s", 1))
	require.NoError(t, cmdtest.Run(NewCmdApply(f, nil), "-f", file, "--validate=false"))
	assert.Equal(t, []string{"PUT /v1/pools/dev"}, a.Seen())
}

func TestApplyDryRun(t *testing.T) {
	a, f, _, out, _ := setup(t)
	file := writeFile(t, devPool)
	require.NoError(t, cmdtest.Run(NewCmdApply(f, nil), "-f", file, "--dry-run"))
	assert.Equal(t, "pool dev is valid: backend local, Kubernetes v1.35.0, fixed, warm target 2, max 4 clusters, lease ttl 1h0m0s (max 24h0m0s, 2 extensions), queue timeout 5m0s\n", out.String())
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdApply(f, nil), "-f", file, "--dry-run", "-o", "yaml"))
	var d DryRun
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &d))
	assert.Equal(t, "1h0m0s", d.Policy.TTL)
	assert.Empty(t, a.Seen())
}

func TestListGetDelete(t *testing.T) {
	a, f, _, out, errOut := setup(t)
	require.NoError(t, cmdtest.Run(NewCmdList(f, nil)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^NAME\s+BACKEND\s+PHASE\s+READY\s+LEASED\s+CREATING\s+QUEUE\s+MODE\s+TTL$`, lines[0])
	assert.Regexp(t, `^ci\s+local\s+Healthy\s+2\s+0\s+0\s+0\s+fixed\s+1h0m0s$`, lines[1])

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdList(f, nil), "-o", "json"))
	assert.True(t, strings.HasPrefix(strings.TrimSpace(out.String()), "["), "a bare array, as the API sends it: %s", out)
	var list []api.PoolView
	require.NoError(t, json.Unmarshal(out.Bytes(), &list))
	assert.Len(t, list, 1)

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdGet(f, nil), "ci"))
	assert.Regexp(t, `Members:\s+2 ready, 0 leased`, out.String())
	assert.Regexp(t, `Backend:\s+local \(sleep\)`, out.String(), "the backend's features")
	assert.Regexp(t, `You may:\s+lease, kubeconfig, extend, release, apply, delete`, out.String(), "the caller's operations")
	assert.Regexp(t, `Lease TTL:\s+1h0m0s \(max 24h0m0s, 2 extensions\)`, out.String())

	err := cmdtest.Run(NewCmdGet(f, nil), "nope")
	require.ErrorContains(t, err, "pool nope: Pool not found (HTTP 404, reason not_found)")

	// A pool with an active lease drains.
	a.Mu.Lock()
	a.Leases["lease-1"] = &api.Lease{ID: "lease-1", Pool: "ci", Phase: "Bound"}
	a.Mu.Unlock()
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdDelete(f, nil), "ci"))
	assert.Contains(t, errOut.String(), "pool ci is draining")
	a.Mu.Lock()
	a.Leases["lease-1"].Phase = "Released"
	a.Mu.Unlock()
	errOut.Reset()
	f.IOStreams.SetStdoutTTY(true)
	require.NoError(t, cmdtest.Run(NewCmdDelete(f, nil), "ci"))
	assert.Equal(t, "deleted pool ci\n", out.String())
	assert.Empty(t, errOut.String())

}

func TestLeasesOfAPool(t *testing.T) {
	a, f, _, out, _ := setup(t)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a.Mu.Lock()
	a.Leases["lease-1"] = &api.Lease{ID: "lease-1", Pool: "ci", Phase: "Bound", ClusterName: "ci-7", Owner: "alice", Alias: "e2e", ExpiresAt: &exp}
	a.Leases["lease-2"] = &api.Lease{ID: "lease-2", Pool: "ci", Phase: "Released"}
	a.Mu.Unlock()
	require.NoError(t, cmdtest.Run(NewCmdLeases(f, nil), "ci"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	assert.Regexp(t, `^ID\s+PHASE\s+CLUSTER\s+REQUESTER\s+NAME\s+EXPIRES$`, lines[0])
	assert.Regexp(t, `^lease-1\s+Bound\s+ci-7\s+alice\s+e2e\s+2030-01-02T03:04:05Z$`, lines[1])
	assert.Contains(t, a.Seen(), "GET /v1/pools/ci/leases")

	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdLeases(f, nil), "ci", "--all", "-o", "json"))
	var ls []api.PoolLease
	require.NoError(t, json.Unmarshal(out.Bytes(), &ls), out.String())
	assert.Len(t, ls, 2)
	assert.Contains(t, a.Seen(), "GET /v1/pools/ci/leases?all=true")

	err := cmdtest.Run(NewCmdLeases(f, nil), "nope")
	require.ErrorContains(t, err, "pool nope: Pool not found (HTTP 404, reason not_found)")
	require.ErrorContains(t, cmdtest.Run(NewCmdLeases(f, nil)), "give the pool name")
}

// A pool whose manifest carries spec.size beside spec.scaling (accepted, as upstream does)
// says which one is in force.
func TestGetSaysAnUnusedSize(t *testing.T) {
	a, f, _, out, _ := setup(t)
	size := 3
	a.Mu.Lock()
	a.Pools["ci"].Policy.Mode, a.Pools["ci"].Policy.WarmTarget, a.Pools["ci"].Policy.UnusedSize = "autoscale", 1, &size
	a.Mu.Unlock()
	require.NoError(t, cmdtest.Run(NewCmdGet(f, nil), "ci"))
	assert.Regexp(t, `Policy:\s+autoscale, warm target 1,`, out.String())
	assert.Regexp(t, `Size:\s+3 \(not used: spec.scaling is set; the warm target is scaling.minReady, 1\)`, out.String())

	a.Mu.Lock()
	a.Pools["ci"].Policy.UnusedSize = nil
	a.Mu.Unlock()
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdGet(f, nil), "ci"))
	assert.NotContains(t, out.String(), "Size:", "no note when the size is the warm target or absent")
}

// kobe pool get says who manages a pool a Kubernetes resource manages, and nothing for one
// applied through the API.
func TestGetSaysWhoManagesThePool(t *testing.T) {
	a, f, _, out, _ := setup(t)
	require.NoError(t, cmdtest.Run(NewCmdGet(f, nil), "ci"))
	assert.NotContains(t, out.String(), "Managed by:")

	a.Mu.Lock()
	a.Pools["ci"].ManagedBy = "ClusterPool/ci"
	a.Mu.Unlock()
	out.Reset()
	require.NoError(t, cmdtest.Run(NewCmdGet(f, nil), "ci"))
	assert.Regexp(t, `Managed by:\s+ClusterPool/ci \(change or delete that resource; kobe's API refuses to\)`, out.String())
}
