package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
)

// TestPortalPagesFollowTheAPIPermissions: the portal shows what the session may see through
// /v1 and nothing more (bob, a dev, gets no admin view and no audit log), its live refresh
// gets only the live part, a form without the CSRF token is refused before any change, and
// without a session the browser is sent to log in.
func TestPortalPagesFollowTheAPIPermissions(t *testing.T) {
	e := newSSOEnv(t, nil)

	anon := browser(t)
	resp, err := anon.Get(e.url + "/ui/admin")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "/ui/login?next=%2Fui%2Fadmin", resp.Header.Get("Location"))

	ada := e.logIn("ada", "pw-ada")
	status, page := e.api(ada, "GET", "/ui/", "", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(page), "sso:ada@example.com")
	assert.Contains(t, string(page), `id="no-leases"`)
	assert.Contains(t, string(page), `<script src="/ui/static/portal.js">`)
	status, page = e.api(ada, "GET", "/ui/admin", "", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(page), "No instance.")
	status, page = e.api(ada, "GET", "/ui/audit?action=login", "", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(page), `data-action="login"`)

	// The live refresh asks for the live part only.
	req, _ := http.NewRequest("GET", e.url+"/ui/audit?action=login", nil)
	req.Header.Set("X-Kobe-Fragment", "1")
	resp, err = ada.Do(req)
	require.NoError(t, err)
	frag, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(frag), `data-action="login"`)
	assert.NotContains(t, string(frag), "<html", "only the live part")

	for _, path := range []string{"/ui/static/portal.js", "/ui/static/portal.css"} {
		status, _ = e.api(ada, "GET", path, "", "")
		assert.Equal(t, http.StatusOK, status, path)
	}

	bob := e.logIn("bob", "pw-bob")
	status, page = e.api(bob, "GET", "/ui/admin", "", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(page), "You may not see every lease and instance")
	assert.Contains(t, string(page), "pool.admin")
	status, page = e.api(bob, "GET", "/ui/audit", "", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(page), "audit.read")
	assert.NotContains(t, string(page), `data-action="login"`)

	// A form post without the CSRF token: 403 in the API's envelope, and nothing requested.
	form := url.Values{"pool": {"web"}, "ttl": {"10m"}, "back": {"/ui/"}}
	req, _ = http.NewRequest("POST", e.url+"/ui/leases", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = bob.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var envl api.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&envl))
	assert.Equal(t, api.ReasonForbidden, envl.Reason)
	assert.Empty(t, e.events("lease.create"))

	// A lease that is not the caller's: the API's 404, as JSON.
	status, page = e.api(bob, "GET", "/ui/leases/lease-nope/kubeconfig", "", "")
	assert.Equal(t, http.StatusNotFound, status, string(page))
}
