package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// Every mutating route of the route table, with each bad token a CI job or an attacker could
// send (expired, another audience, an untrusted issuer, an unknown key id, alg none, HS256 keyed
// with the public key, a tampered payload...): the server answers 401 with the upstream envelope
// and the reason, and the route's handler is never called; nothing is written to the store. A
// good token of the same provider passes the same guard, so the refusals are the tokens' doing.
func TestBadOIDCTokensReachNoHandler(t *testing.T) {
	op := oidcprovider.Start(t)
	st, err := store.Open(context.Background(), "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	pol, err := access.ParsePolicy([]byte(`roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 1000000, burst: 1000000}}
oidc:
  issuers:
  - issuer: ` + op.Issuer + `
    audiences: [kobe-system]
    rules: [{match: {repository: "acme/*"}, role: admin}]
`))
	require.NoError(t, err)
	s := &Server{Store: st, Policy: pol}
	h := s.Handler()
	job := oidcprovider.GitHubJob("acme/app", "refs/heads/main")
	bad := op.BadTokens(t, job)
	good := op.Token(t, job)

	mutating := 0
	for _, rt := range s.routes() {
		switch rt.method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue
		}
		mutating++
		path := strings.NewReplacer("{id}", "lease-0123", "{name}", "ci-a").Replace(rt.path)
		reached := 0
		guarded := s.guard(rt, func(w http.ResponseWriter, r *http.Request) { reached++; w.WriteHeader(299) })
		for _, b := range bad {
			t.Run(rt.method+" "+rt.path+"/"+b.Name, func(t *testing.T) {
				for _, handler := range []http.Handler{h, guarded} {
					req := httptest.NewRequest(rt.method, path, strings.NewReader(`{"profile":"ci-a","ttl":"10m"}`))
					req.Header.Set("Authorization", "Bearer "+b.Token)
					rec := httptest.NewRecorder()
					handler.ServeHTTP(rec, req)
					require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
					var eb api.ErrorBody
					require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "the upstream envelope: %s", rec.Body)
					assert.Equal(t, "Unauthorized", eb.Error)
					assert.Equal(t, api.ReasonUnauthorized, eb.Reason)
					assert.Contains(t, eb.Detail, b.Want)
					assert.Equal(t, `Bearer realm="kobe"`, rec.Header().Get("WWW-Authenticate"))
				}
			})
		}
		assert.Zero(t, reached, "%s %s: a bad token reached the handler", rt.method, rt.path)
		req := httptest.NewRequest(rt.method, path, nil)
		req.Header.Set("Authorization", "Bearer "+good)
		rec := httptest.NewRecorder()
		guarded.ServeHTTP(rec, req)
		assert.Equal(t, 299, rec.Code, "%s %s: a good token passes the guard: %s", rt.method, rt.path, rec.Body)
		assert.Equal(t, 1, reached)
	}
	assert.GreaterOrEqual(t, mutating, 11, "the route table's mutating routes")

	ctx := context.Background()
	evs, err := st.ListEvents(ctx, store.EventFilter{})
	require.NoError(t, err)
	assert.Empty(t, evs, "no audit event: no handler ran")
	leases, err := st.ListLeases(ctx, store.LeaseFilter{})
	require.NoError(t, err)
	assert.Empty(t, leases)
	toks, err := st.ListTokens(ctx)
	require.NoError(t, err)
	assert.Empty(t, toks)
	pools, err := st.ListPools(ctx)
	require.NoError(t, err)
	assert.Empty(t, pools)
}
