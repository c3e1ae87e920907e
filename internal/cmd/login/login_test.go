package login_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/cmd/cliconfig"
	"github.com/kunobi-ninja/kobe/internal/cmd/factory"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
	"github.com/kunobi-ninja/kobe/internal/cmd/login"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// TestLoginRefreshLogout: kobe login against a real OpenID provider (a public client,
// authorization code with PKCE, loopback redirect), the person logging in on the provider's
// page; the ID token is the CLI's bearer token for the server, refreshed with the refresh token
// when it expires (the provider issues 10 s ID tokens here, under the CLI's 30 s margin, so
// every use refreshes); kobe logout forgets it.
func TestLoginRefreshLogout(t *testing.T) {
	prov := oidcprovider.Start(t)
	prov.AddUser(oidcprovider.User{Subject: "u-ada", Username: "ada", Password: "pw-ada", Email: "ada@example.com"})
	prov.AddLoginClient(oidcprovider.LoginClient{ID: "kobe-cli", RedirectURIs: []string{"http://127.0.0.1/callback"}, IDTokenLifetime: 10 * time.Second})
	tc := testsuite.StartTemporal(t)
	pol, err := access.ParsePolicy([]byte(`
roles:
  dev: {permissions: [lease, pool.read]}
oidc:
  issuers:
  - issuer: ` + prov.Issuer + `
    audiences: [kobe-portal, kobe-cli]
    principalPrefix: "sso:"
    identityTemplate: "{email}"
    rules:
    - match: {email: "*@example.com"}
      role: dev
  login:
    issuer: ` + prov.Issuer + `
    clientId: kobe-portal
    cliClientId: kobe-cli
    redirectUrl: http://127.0.0.1:1/ui/callback
`))
	require.NoError(t, err)
	srv := &server.Server{Temporal: tc.Client, Namespace: "default", TaskQueue: "kobe-login-test", Store: testsuite.NewStore(t, "sqlite"), Policy: pol}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	t.Setenv("KOBE_CONFIG", cfgPath)
	ios, _, out, errOut := iostreams.Test()
	f := &factory.Factory{IOStreams: ios}
	f.Target = func() (cliconfig.Target, error) {
		return cliconfig.Resolve(cliconfig.Overrides{Context: f.Context, Server: f.Server}, nil, cfgPath)
	}
	f.Server = hs.URL

	jar, _ := cookiejar.New(nil)
	person := &http.Client{Jar: jar}
	var opened bool
	err = login.Run(t.Context(), &login.Options{Factory: f, Timeout: time.Minute, Open: func(u string) error {
		opened = true
		go func() {
			cb := prov.LogIn(t, person, u, "ada", "pw-ada") // the provider redirects to the CLI's loopback port
			resp, err := person.Get(cb.String())
			if err == nil {
				resp.Body.Close()
			}
		}()
		return nil
	}})
	require.NoError(t, err)
	assert.True(t, opened)
	assert.Contains(t, out.String(), "as sso:ada@example.com (role dev)")

	c, err := cliconfig.Load(cfgPath)
	require.NoError(t, err)
	require.Equal(t, "default", c.CurrentContext)
	saved := c.Contexts["default"].Login
	require.NotNil(t, saved)
	require.NotEmpty(t, saved.RefreshToken)

	// The CLI's next request: the ID token is about to expire, so it is refreshed first.
	f.Server = ""
	tgt, err := f.Target()
	require.NoError(t, err)
	assert.NotEqual(t, saved.IDToken, tgt.Token, "a fresh ID token")
	c, err = cliconfig.Load(cfgPath)
	require.NoError(t, err)
	assert.NotEqual(t, saved.RefreshToken, c.Contexts["default"].Login.RefreshToken, "the provider rotated the refresh token")
	client, err := api.NewClient(tgt.Server)
	require.NoError(t, err)
	client.Token = tgt.Token
	st, err := client.Status(t.Context())
	require.NoError(t, err)
	require.Len(t, st.Auth.Sessions, 1)
	assert.Equal(t, "sso:ada@example.com", st.Auth.Sessions[0].Principal)
	assert.Equal(t, api.AuthOIDC, st.Auth.Sessions[0].Method)

	refresh := c.Contexts["default"].Login
	require.NoError(t, login.NewCmdLogout(f, nil).Execute())
	assert.Contains(t, out.String(), "Logged out")
	assert.NotContains(t, errOut.String(), "did not revoke")
	_, err = refresh.Fresh("default", &cliconfig.Config{Contexts: map[string]cliconfig.Context{"default": {}}}, filepath.Join(t.TempDir(), "x.yaml"))
	assert.Error(t, err, "the provider revoked the refresh token")
	c, err = cliconfig.Load(cfgPath)
	require.NoError(t, err)
	assert.Nil(t, c.Contexts["default"].Login)
	tgt, err = f.Target()
	require.NoError(t, err)
	assert.Empty(t, tgt.Token, "no credential after logout")
}
