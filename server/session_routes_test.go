package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Every mutating route of the route table, authenticated by a portal session's cookie: without
// the session's CSRF token, or with a wrong one, the answer is 403 in the upstream envelope and
// the handler never runs; with it, the guard lets the request through. A revoked session is 401.
func TestCookieMutationsNeedTheCSRFToken(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	pol, err := access.ParsePolicy([]byte(`roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 1000000, burst: 1000000}}
oidc:
  issuers:
  - issuer: https://idp.invalid
    audiences: [kobe-portal]
    principalPrefix: "sso:"
    identityTemplate: "{email}"
    rules: [{match: {groups: ops}, role: admin}]
  login: {issuer: "https://idp.invalid", clientId: kobe-portal, redirectUrl: "http://127.0.0.1:1/ui/callback"}
`))
	require.NoError(t, err)
	s := &Server{Store: st, Policy: pol}
	_ = s.Handler() // builds the authenticator and its verifier (the session needs no provider)
	secret := sessionPrefix + "0123456789abcdef0123456789abcdef"
	_, err = st.CreateSession(context.Background(), store.Session{ID: "sess-1", Hash: access.HashToken(secret), Principal: "sso:ada@example.com",
		Issuer: "https://idp.invalid", Claims: []byte(`{"email":"ada@example.com","groups":["ops"]}`), ExpiresAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	cookie := &http.Cookie{Name: SessionCookie, Value: secret}

	mutating := 0
	for _, rt := range s.routes() {
		if safeMethod(rt.method) {
			continue
		}
		mutating++
		path := strings.NewReplacer("{id}", "lease-0123", "{name}", "ci-a").Replace(rt.path)
		reached := 0
		guarded := s.guard(rt, func(w http.ResponseWriter, r *http.Request) { reached++; w.WriteHeader(299) })
		send := func(csrf string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(rt.method, path, strings.NewReader(`{}`))
			req.AddCookie(cookie)
			if csrf != "" {
				req.Header.Set(CSRFHeader, csrf)
			}
			rec := httptest.NewRecorder()
			guarded.ServeHTTP(rec, req)
			return rec
		}
		for _, csrf := range []string{"", "wrong"} {
			rec := send(csrf)
			require.Equal(t, http.StatusForbidden, rec.Code, "%s %s: %s", rt.method, rt.path, rec.Body)
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
			assert.Equal(t, api.ReasonForbidden, eb.Reason)
			assert.Contains(t, eb.Detail, "CSRF")
		}
		assert.Zero(t, reached, "%s %s: a request without the CSRF token reached the handler", rt.method, rt.path)
		rec := send(csrfToken(secret))
		assert.Equal(t, 299, rec.Code, "%s %s: %s", rt.method, rt.path, rec.Body)
		assert.Equal(t, 1, reached)
	}
	assert.GreaterOrEqual(t, mutating, 11)

	require.NoError(t, st.RevokeSession(context.Background(), "sess-1"))
	req := httptest.NewRequest("GET", "/v1/leases", nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	assert.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
}
