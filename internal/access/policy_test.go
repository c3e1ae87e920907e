package access_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
)

func TestParsePolicy(t *testing.T) {
	p, err := access.ParsePolicy([]byte(`roles:
  ci:
    permissions: [lease, pool.read]
    pools: ["ci-*", dev]
    maxTtl: 2h
    maxExtensions: 1
    maxConcurrentLeases: 5
    quota: 20
    rateLimit: {requestsPerSecond: 2, burst: 3}
`))
	require.NoError(t, err)
	r, ok := p.Role("ci")
	require.True(t, ok)
	assert.True(t, r.Can(access.PermLease))
	assert.False(t, r.Can(access.PermPoolAdmin))
	assert.True(t, r.AllowsPool("ci-linux"))
	assert.True(t, r.AllowsPool("dev"))
	assert.False(t, r.AllowsPool("prod"))
	assert.Equal(t, 2*time.Hour, r.MaxTTLOrZero())

	for doc, want := range map[string]string{
		`roles: {}`: "at least one role",
		`roles: {ci: {permissions: [lease], maxTtl: soon}}`:          "roles.ci.maxTtl",
		`roles: {ci: {permissions: [lease, fly]}}`:                   `roles.ci.permissions[1]: unknown permission "fly"`,
		`roles: {ci: {permissions: [lease], pools: ["[x"]}}`:         "roles.ci.pools[0]",
		`roles: {ci: {permissions: [lease], maxConcurent: 3}}`:       "maxConcurent",
		`roles: {ci: {permissions: [lease], rateLimit: {burst: 1}}}`: "roles.ci.rateLimit",
		`roles: {"a b": {permissions: [lease]}}`:                     "a role name",
	} {
		_, err := access.ParsePolicy([]byte(doc))
		require.Error(t, err, doc)
		assert.Contains(t, err.Error(), want, doc)
	}
}

func TestAuthenticateAndRateLimit(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite://:memory:")
	require.NoError(t, err)
	defer st.Close()
	pol := access.DefaultPolicy()
	a := &access.Authenticator{Store: st, Policy: pol}
	ctx := context.Background()
	id, secret, err := access.NewToken()
	require.NoError(t, err)
	_, err = st.CreateToken(ctx, store.Token{ID: id, Name: "gha", Role: "ci", Principal: "github", Hash: access.HashToken(secret)})
	require.NoError(t, err)

	p, err := a.Authenticate(ctx, "Bearer "+secret)
	require.NoError(t, err)
	assert.Equal(t, access.Principal{Name: "github", Role: "ci", TokenID: id}, p)
	for _, h := range []string{"", "Bearer ", "Basic x", "Bearer " + secret + "x"} {
		_, err := a.Authenticate(ctx, h)
		assert.ErrorIs(t, err, access.ErrUnauthenticated, h)
	}
	require.NoError(t, st.RevokeToken(ctx, id))
	_, err = a.Authenticate(ctx, "Bearer "+secret)
	assert.ErrorIs(t, err, access.ErrUnauthenticated, "revoked")

	rl := &access.RateLimiter{Policy: pol}
	allowed := 0
	for range 100 {
		if ok, _ := rl.Allow(p); ok {
			allowed++
		}
	}
	assert.Equal(t, access.DefaultRateLimit.Burst, allowed, "a burst, then refusals")
	ok, wait := rl.Allow(p)
	assert.False(t, ok)
	assert.Greater(t, wait, time.Duration(0))
	other, _ := rl.Allow(access.Principal{Name: "someone-else", Role: "ci"})
	assert.True(t, other, "buckets are per principal")
}
