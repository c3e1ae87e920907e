package server

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// send serves one in-process request from a client address with a bearer token ("" = none).
func send(h http.Handler, method, path, token, addr, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if addr != "" {
		req.RemoteAddr = addr
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func adminToken(t *testing.T, st store.Store, principal string) string {
	t.Helper()
	id, secret, err := access.NewToken()
	require.NoError(t, err)
	_, err = st.CreateToken(context.Background(), store.Token{ID: id, Name: principal, Role: "admin", Principal: principal, Hash: access.HashToken(secret)})
	require.NoError(t, err)
	return secret
}

// Item 4 of issue 39: POST /v1/doctor starts a workflow that writes the store and holds up to
// an hour; it answered 202 without a token. It needs one now, and counts against the caller's
// rate like every authenticated route.
func TestDoctorNeedsATokenAndCountsAgainstTheRate(t *testing.T) {
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 0.001, burst: 2}}\n"))
	require.NoError(t, err)
	tc := &recordingTemporal{}
	st := sqliteStore(t)
	s := &Server{Store: st, Policy: pol, Temporal: tc}
	h := s.Handler()

	rec := send(h, "POST", "/v1/doctor", "", "", `{}`)
	assert.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	assert.Empty(t, tc.taken(), "no workflow started without a token")

	tok := adminToken(t, st, "root")
	for i := range 2 {
		rec = send(h, "POST", "/v1/doctor", tok, "", `{}`)
		assert.Equal(t, http.StatusAccepted, rec.Code, "probe %d: %s", i, rec.Body.String())
	}
	rec = send(h, "POST", "/v1/doctor", tok, "", `{}`)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "the caller's burst of 2 is spent: %s", rec.Body.String())
	assert.Len(t, tc.taken(), 2)
}

// Item 4 of issue 39: the portal's routes skipped the rate limiter. A request without
// credentials (the login, the callback, a static file) counts against its client address; a
// page counts once against its principal (its in-process /v1 calls do not count again).
func TestPortalRoutesAreRateLimited(t *testing.T) {
	_, h := loginServer(t)
	limited := 0
	for range 200 {
		rec := send(h, "GET", "/ui/login", "", "192.0.2.7:5555", "")
		if rec.Code == http.StatusTooManyRequests {
			limited++
			assert.NotEmpty(t, rec.Header().Get("Retry-After"))
		}
	}
	assert.Positive(t, limited, "200 logins at once from one address meet the address's limit")
	assert.Equal(t, http.StatusFound, send(h, "GET", "/ui/login", "", "192.0.2.8:5555", "").Code, "another address has its own bucket")
	limited = 0
	for range 200 {
		if send(h, "GET", "/ui/static/portal.css", "", "192.0.2.9:5555", "").Code == http.StatusTooManyRequests {
			limited++
		}
	}
	assert.Positive(t, limited, "static files too")

	// A page with a bearer token: one request of its principal, whatever it asks of /v1.
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 0.001, burst: 3}}\n"))
	require.NoError(t, err)
	s := &Server{Store: sqliteStore(t), Policy: pol, Temporal: &recordingTemporal{}}
	h = s.Handler()
	tok := adminToken(t, s.Store, "root")
	for i := range 3 {
		rec := send(h, "GET", "/ui/admin", tok, "", "")
		assert.Equal(t, http.StatusOK, rec.Code, "page %d: %s", i, rec.Body.String())
	}
	rec := send(h, "GET", "/ui/admin", tok, "", "")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "the principal's burst of 3 is spent: %s", rec.Body.String())
}

// twoIssuers trusts two providers with the default identity template: both name a GitHub job
// by its subject.
func twoIssuers(t *testing.T) (*Server, http.Handler, *oidcprovider.Provider, *oidcprovider.Provider, *recordingTemporal) {
	t.Helper()
	a, b := oidcprovider.Start(t), oidcprovider.Start(t)
	pol, err := access.ParsePolicy([]byte(fmt.Sprintf(`roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 1000, burst: 1000}}
oidc:
  issuers:
  - issuer: %s
    audiences: [kobe-system]
    rules: [{match: {repository_owner: acme}, role: admin}]
  - issuer: %s
    audiences: [kobe-system]
    rules: [{match: {repository_owner: acme}, role: admin}]
`, a.Issuer, b.Issuer)))
	require.NoError(t, err)
	tc := &recordingTemporal{}
	s := &Server{Store: sqliteStore(t), Policy: pol, Temporal: tc}
	return s, s.Handler(), a, b, tc
}

func principalOfToken(t *testing.T, s *Server, tok string) string {
	t.Helper()
	p, err := s.Auth.Authenticate(context.Background(), "Bearer "+tok)
	require.NoError(t, err)
	return p.Name
}

// Item 8 of the review (7 of issue 39): OIDC identities were not scoped by issuer. With the
// default template {sub}, the same subject of two issuers was one principal, and lease
// ownership is a comparison of names: user "42" of one issuer owned the leases of "42" of
// another. Now each issuer's principals carry its issuer, and a kobe token cannot be given a
// name in an issuer's namespace.
func TestSameSubjectOfTwoIssuersAreTwoPrincipals(t *testing.T) {
	s, h, a, b, _ := twoIssuers(t)
	job := oidcprovider.GitHubJob("acme/app", "refs/heads/main")
	tokA, tokB := a.Token(t, job), b.Token(t, job)
	pa, pb := principalOfToken(t, s, tokA), principalOfToken(t, s, tokB)
	require.NotEqual(t, pa, pb, "the same subject of two issuers")
	assert.True(t, strings.HasPrefix(pa, a.Issuer+"#"), pa)

	require.NoError(t, s.Store.UpsertLease(context.Background(), store.Lease{ID: "lease-of-a", Pool: "dev", Principal: pa,
		Phase: api.LeaseBound, TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}))
	for _, m := range []string{"GET", "DELETE"} {
		rec := send(h, m, "/v1/leases/lease-of-a", tokB, "", "")
		assert.Equal(t, http.StatusNotFound, rec.Code, "%s by the other issuer's %s: %s", m, pb, rec.Body.String())
	}
	rec := send(h, "PATCH", "/v1/leases/lease-of-a", tokB, "", `{"extendTtl":"5m"}`)
	assert.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
	rec = send(h, "GET", "/v1/leases", tokB, "", "")
	assert.JSONEq(t, `[]`, rec.Body.String())
	rec = send(h, "GET", "/v1/leases", tokA, "", "")
	assert.Contains(t, rec.Body.String(), "lease-of-a", "its own issuer's principal still owns it")

	// A kobe token cannot act as an OIDC principal.
	admin := adminToken(t, s.Store, "root")
	rec = send(h, "POST", "/v1/tokens", admin, "", fmt.Sprintf(`{"name":"x","role":"admin","principal":%q}`, pa))
	assert.Equal(t, http.StatusBadRequest, rec.Code, "a token named like issuer A's principal: %s", rec.Body.String())
}

// Item 7 of issue 39: a valid token that no rule admits (403) is audited like a failed
// sign-in (bounded, rate-limited), so an operator sees which subject was turned away.
func TestForbiddenTokenIsAudited(t *testing.T) {
	s, h, a, _, _ := twoIssuers(t)
	tok := a.Token(t, oidcprovider.GitHubJob("evil/app", "refs/heads/main"))
	for range 100 {
		rec := send(h, "GET", "/v1/leases", tok, "192.0.2.44:1", "")
		require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	}
	evs, err := s.Store.ListEvents(context.Background(), store.EventFilter{Action: "login"})
	require.NoError(t, err)
	require.NotEmpty(t, evs, "a 403 leaves an audit event")
	assert.Contains(t, evs[0].Actor, "repo:evil/app:ref:refs/heads/main")
	assert.Equal(t, "failed", evs[0].Result)
	var d map[string]any
	require.NoError(t, json.Unmarshal(evs[0].Detail, &d))
	assert.Equal(t, a.Issuer, d["issuer"])
	assert.Equal(t, "repo:evil/app:ref:refs/heads/main", d["subject"])
	assert.LessOrEqual(t, len(evs), 5, "at most failedLoginsPerAddress events a minute from one address")
}
