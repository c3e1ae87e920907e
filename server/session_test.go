package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// ssoEnv is a kobe API server whose policy logs people in with a real OpenID provider.
type ssoEnv struct {
	t        *testing.T
	provider *oidcprovider.Provider
	srv      *server.Server
	url      string
}

// ssoPolicy trusts the provider for people: the principal is sso:<email>; the ops group is
// admin, everyone else of example.com is dev.
func ssoPolicy(issuer, redirect string) string {
	return fmt.Sprintf(`
roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}
  dev:   {permissions: [lease, pool.read], maxConcurrentLeases: 2}
oidc:
  issuers:
  - issuer: %s
    audiences: [kobe-portal, kobe-cli]
    principalPrefix: "sso:"
    identityTemplate: "{email}"
    rules:
    - match: {groups: ops}
      role: admin
    - match: {email: "*@example.com"}
      role: dev
  login:
    issuer: %s
    clientId: kobe-portal
    clientSecret: portal-secret
    cliClientId: kobe-cli
    redirectUrl: %s/ui/callback
`, issuer, issuer, redirect)
}

// newSSOEnv starts the provider (users ada of ops, bob, and eve of another domain) and a kobe
// server with the SSO policy. temporal may be nil for tests of the login alone.
func newSSOEnv(t *testing.T, configure func(*server.Server)) *ssoEnv {
	t.Helper()
	prov := oidcprovider.Start(t)
	prov.AddUser(oidcprovider.User{Subject: "u-ada", Username: "ada", Password: "pw-ada", Email: "ada@example.com",
		Claims: map[string]any{"groups": []string{"ops"}}})
	prov.AddUser(oidcprovider.User{Subject: "u-bob", Username: "bob", Password: "pw-bob", Email: "bob@example.com"})
	prov.AddUser(oidcprovider.User{Subject: "u-eve", Username: "eve", Password: "pw-eve", Email: "eve@elsewhere.org"})
	var mu sync.Mutex
	var handler http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handler
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	prov.AddLoginClient(oidcprovider.LoginClient{ID: "kobe-portal", Secret: "portal-secret", RedirectURIs: []string{hs.URL + "/ui/callback"}})
	pol, err := access.ParsePolicy([]byte(ssoPolicy(prov.Issuer, hs.URL)))
	require.NoError(t, err)
	srv := &server.Server{Store: testsuite.NewStore(t, "sqlite"), Policy: pol, Backends: []string{"local"},
		InstanceName: "sso-test", Secrets: secretbox.Random(), Namespace: "default"}
	if configure != nil {
		configure(srv)
	}
	mu.Lock()
	handler = srv.Handler()
	mu.Unlock()
	return &ssoEnv{t: t, provider: prov, srv: srv, url: hs.URL}
}

// browser is an HTTP client with a cookie jar that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// startLogin asks kobe for a login and returns the provider's authorize URL it redirects to.
func (e *ssoEnv) startLogin(b *http.Client) *url.URL {
	e.t.Helper()
	resp, err := b.Get(e.url + "/ui/login?next=/ui/audit")
	require.NoError(e.t, err)
	resp.Body.Close()
	require.Equal(e.t, http.StatusFound, resp.StatusCode)
	loc, err := resp.Location()
	require.NoError(e.t, err)
	require.True(e.t, strings.HasPrefix(loc.String(), e.provider.Issuer), loc.String())
	q := loc.Query()
	require.Equal(e.t, "S256", q.Get("code_challenge_method"))
	require.NotEmpty(e.t, q.Get("nonce"))
	require.NotEmpty(e.t, q.Get("state"))
	return loc
}

// finish sends the browser back to kobe's callback and returns kobe's answer.
func (e *ssoEnv) finish(b *http.Client, callback *url.URL) (int, string, *http.Response) {
	e.t.Helper()
	resp, err := b.Get(callback.String())
	require.NoError(e.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp
}

// logIn runs a whole login of a user and returns the browser, now holding a session.
func (e *ssoEnv) logIn(user, password string) *http.Client {
	e.t.Helper()
	b := browser(e.t)
	cb := e.provider.LogIn(e.t, b, e.startLogin(b).String(), user, password)
	status, body, resp := e.finish(b, cb)
	require.Equal(e.t, http.StatusFound, status, body)
	require.Equal(e.t, "/ui/audit", resp.Header.Get("Location"))
	var sc *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.SessionCookie {
			sc = c
		}
	}
	require.NotNil(e.t, sc, "a session cookie")
	assert.True(e.t, sc.HttpOnly)
	assert.Equal(e.t, http.SameSiteLaxMode, sc.SameSite)
	assert.False(e.t, sc.Secure, "served over plain http here")
	return b
}

// api sends a cookie-authenticated request (csrf: the X-CSRF-Token header, "" for none).
func (e *ssoEnv) api(b *http.Client, method, path, csrf, body string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	if csrf != "" {
		req.Header.Set(server.CSRFHeader, csrf)
	}
	resp, err := b.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// csrfOf reads the CSRF token the portal put into the logout form of a page.
func (e *ssoEnv) csrfOf(b *http.Client) string {
	e.t.Helper()
	status, page := e.api(b, "GET", "/ui/audit", "", "")
	require.Equal(e.t, http.StatusOK, status, string(page))
	_, rest, ok := strings.Cut(string(page), `name="csrf" value="`)
	require.True(e.t, ok, "a CSRF token in the page")
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}

func (e *ssoEnv) events(action string) []api.AuditEvent {
	e.t.Helper()
	evs, err := e.srv.Store.ListEvents(e.t.Context(), store.EventFilter{Action: action})
	require.NoError(e.t, err)
	var out []api.AuditEvent
	for _, ev := range evs {
		ae := api.AuditEvent{Actor: ev.Actor, Action: ev.Action, Target: ev.Target, Result: ev.Result}
		_ = json.Unmarshal(ev.Detail, &ae.Detail)
		out = append(out, ae)
	}
	return out
}

func TestSSOLoginSessionCSRFLogout(t *testing.T) {
	e := newSSOEnv(t, nil)
	ada := e.logIn("ada", "pw-ada")

	// The session maps through the issuer's template and rules: ops → admin.
	status, body := e.api(ada, "GET", "/v1/audit?action=login", "", "")
	require.Equal(t, http.StatusOK, status, string(body))
	var list api.AuditList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "sso:ada@example.com", list.Items[0].Actor)
	assert.Equal(t, "ok", list.Items[0].Result)
	assert.Equal(t, "admin", list.Items[0].Detail["role"])

	// A mutation with the cookie but without the CSRF token is refused before its handler.
	status, body = e.api(ada, "POST", "/v1/tokens", "", `{"name":"ci","role":"dev"}`)
	require.Equal(t, http.StatusForbidden, status, string(body))
	var envl api.ErrorBody
	require.NoError(t, json.Unmarshal(body, &envl))
	assert.Equal(t, api.ReasonForbidden, envl.Reason)
	assert.Contains(t, envl.Detail, "CSRF")
	status, body = e.api(ada, "POST", "/v1/tokens", "not-the-token", `{"name":"ci","role":"dev"}`)
	require.Equal(t, http.StatusForbidden, status, string(body))
	toks, err := e.srv.Store.ListTokens(t.Context())
	require.NoError(t, err)
	assert.Empty(t, toks, "no token was created without the CSRF token")
	csrf := e.csrfOf(ada)
	status, body = e.api(ada, "POST", "/v1/tokens", csrf, `{"name":"ci","role":"dev"}`)
	require.Equal(t, http.StatusCreated, status, string(body))

	// Another person gets their own grant: bob is dev (no audit.read), eve no rule at all.
	bob := e.logIn("bob", "pw-bob")
	status, _ = e.api(bob, "GET", "/v1/audit", "", "")
	assert.Equal(t, http.StatusForbidden, status)
	b := browser(t)
	cb := e.provider.LogIn(t, b, e.startLogin(b).String(), "eve", "pw-eve")
	status, page, _ := e.finish(b, cb)
	assert.Equal(t, http.StatusForbidden, status)
	assert.Contains(t, page, "no rule")

	// Logout needs the CSRF token too, ends the session at once, and is audited.
	status, _ = e.api(ada, "POST", "/ui/logout", "", "")
	assert.Equal(t, http.StatusForbidden, status)
	req, _ := http.NewRequest("POST", e.url+"/ui/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	stolen := ada.Jar.Cookies(req.URL) // what a thief would have copied
	resp, err := ada.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	thief := browser(t)
	thief.Jar.SetCookies(req.URL, stolen)
	status, body = e.api(thief, "GET", "/v1/audit", "", "")
	assert.Equal(t, http.StatusUnauthorized, status, string(body))

	logins := e.events("login")
	require.Len(t, logins, 3)
	assert.Equal(t, "sso:eve@elsewhere.org", logins[2].Actor)
	assert.Equal(t, "failed", logins[2].Result)
	logouts := e.events("logout")
	require.Len(t, logouts, 1)
	assert.Equal(t, "sso:ada@example.com", logouts[0].Actor)
}

// TestSSOLoginRefusesBadStateNonceVerifier: a callback whose state is not the browser's, an
// ID token whose nonce is not the login's, and a code whose PKCE challenge is not kobe's
// verifier's are refused, audited as failed logins, and start no session.
func TestSSOLoginRefusesBadStateNonceVerifier(t *testing.T) {
	e := newSSOEnv(t, nil)
	tamper := func(u *url.URL, key, value string) string {
		q := u.Query()
		q.Set(key, value)
		v := *u
		v.RawQuery = q.Encode()
		return v.String()
	}
	cases := []struct {
		name   string
		run    func(b *http.Client) *url.URL
		status int
		want   string
	}{
		{"state", func(b *http.Client) *url.URL {
			cb := e.provider.LogIn(t, b, e.startLogin(b).String(), "ada", "pw-ada")
			u, _ := url.Parse(tamper(cb, "state", "forged-state"))
			return u
		}, http.StatusForbidden, "state"},
		{"nonce", func(b *http.Client) *url.URL {
			return e.provider.LogIn(t, b, tamper(e.startLogin(b), "nonce", "forged-nonce"), "ada", "pw-ada")
		}, http.StatusForbidden, "nonce"},
		{"PKCE verifier", func(b *http.Client) *url.URL {
			// The challenge of a verifier kobe does not hold.
			return e.provider.LogIn(t, b, tamper(e.startLogin(b), "code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"), "ada", "pw-ada")
		}, http.StatusForbidden, "refused the code"},
		{"no login cookie", func(b *http.Client) *url.URL {
			cb := e.provider.LogIn(t, b, e.startLogin(b).String(), "ada", "pw-ada")
			return cb.JoinPath() // sent by another browser below
		}, http.StatusBadRequest, "no login in progress"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := browser(t)
			cb := c.run(b)
			if c.name == "no login cookie" {
				b = browser(t)
			}
			status, page, resp := e.finish(b, cb)
			assert.Equal(t, c.status, status, page)
			assert.Contains(t, page, c.want)
			for _, ck := range resp.Cookies() {
				assert.NotEqual(t, server.SessionCookie, ck.Name, "no session")
			}
		})
	}
	failed := 0
	for _, ev := range e.events("login") {
		assert.Equal(t, "failed", ev.Result)
		failed++
	}
	assert.Equal(t, len(cases), failed)
}
