package status

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/cmdtest"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	var got *Options
	require.NoError(t, cmdtest.Run(NewCmdStatus(&factory.Factory{IOStreams: ios}, func(o *Options) error { got = o; return nil }), "-o", "yaml"))
	assert.Equal(t, "yaml", got.Output.String())
	ran := false
	err := cmdtest.Run(NewCmdStatus(&factory.Factory{IOStreams: ios}, func(*Options) error { ran = true; return nil }), "-o", "xml")
	require.ErrorContains(t, err, `-o "xml": must be table, json or yaml`)
	assert.False(t, ran)
}

func TestOutputs(t *testing.T) {
	st := api.Status{Version: "v1", Backends: []string{"local"},
		Temporal: api.TemporalHealth{Address: "t:7233", Namespace: "default", TaskQueue: "kobe", Healthy: true, LatencyMs: 1.5},
		Store:    api.StoreHealth{Driver: "sqlite", SchemaVersion: 3, Healthy: true},
		Auth:     api.AuthInfo{Methods: []string{"bearer"}, Sessions: []api.Session{{Principal: "github", Role: "ci", TokenName: "gha", TokenID: "tok-1"}}},
		Pools:    []api.PoolSummary{{Name: "ci-a"}, {Name: "ci-b"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	ios, _, out, _ := iostreams.Test()
	f := &factory.Factory{IOStreams: ios, APIClient: func() (*api.Client, error) {
		c, err := api.NewClient(srv.URL)
		c.Token = "tok"
		return c, err
	}}
	for _, format := range []string{"table", "json", "yaml"} {
		out.Reset()
		cmd := NewCmdStatus(f, func(o *Options) error { return statusRun(context.Background(), o) })
		require.NoError(t, cmdtest.Run(cmd, "-o", format))
		var got api.Status
		switch format {
		case "table":
			assert.Regexp(t, `Temporal\s+ok \(1.5 ms\)`, out.String())
			assert.Regexp(t, `Auth\s+bearer; you are github \(role ci, token gha\)`, out.String())
			assert.Regexp(t, `Pools\s+2 you may use`, out.String())
			continue
		case "json":
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		case "yaml":
			require.NoError(t, yaml.Unmarshal(out.Bytes(), &got))
		}
		assert.Equal(t, "v1", got.Version)
	}
}

func TestAuthLineOfAnOIDCSession(t *testing.T) {
	line := authLine(api.AuthInfo{Methods: []string{"bearer", "oidc"}, Issuers: []string{"https://token.actions.githubusercontent.com"},
		Sessions: []api.Session{{Principal: "repo:acme/app:ref:refs/heads/main", Role: "ci", Method: "oidc", Issuer: "https://token.actions.githubusercontent.com"}}})
	assert.Equal(t, "bearer, oidc; you are repo:acme/app:ref:refs/heads/main (role ci, OIDC token of https://token.actions.githubusercontent.com)", line)
}
