package identity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/identity"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// policyFor trusts the provider for the audience kobe-system; identities are
// repo:<repository>:ref:<ref>; acme's main branch gets ci with tight limits, the rest of acme gets
// dev, nobody else anything.
func policyFor(t *testing.T, issuer string) *access.Policy {
	t.Helper()
	pol, err := access.ParsePolicy([]byte(`roles:
  ci: {permissions: [lease, pool.read], pools: ["*"], maxConcurrentLeases: 10}
  dev: {permissions: [lease, pool.read]}
oidc:
  issuers:
  - issuer: ` + issuer + `
    audiences: [kobe-system]
    identityTemplate: "repo:{repository}:ref:{ref}"
    rules:
    - match: {repository: "acme/*", ref: refs/heads/main}
      role: ci
      pools: ["ci-*"]
      maxTtl: 15m
      maxConcurrentLeases: 2
      maxExtensions: 1
    - match: {repository_owner: acme}
      role: dev
`))
	require.NoError(t, err)
	return pol
}

func TestVerifyGitHubActionsToken(t *testing.T) {
	op := oidcprovider.Start(t)
	v := identity.NewVerifier(policyFor(t, op.Issuer), identity.Options{})
	ctx := context.Background()

	p, err := v.Verify(ctx, op.Token(t, oidcprovider.GitHubJob("acme/app", "refs/heads/main")))
	require.NoError(t, err)
	assert.Equal(t, op.Issuer+"#repo:acme/app:ref:refs/heads/main", p.Name, "the issuer, then the template")
	assert.Equal(t, "ci", p.Role)
	assert.Equal(t, op.Issuer, p.Issuer)
	assert.WithinDuration(t, time.Now().Add(5*time.Minute), p.ExpiresAt, time.Minute)
	require.NotNil(t, p.Grant)
	assert.Equal(t, []string{"ci-*"}, p.Grant.Pools, "the rule's pools replace the role's")
	assert.Equal(t, 15*time.Minute, p.Grant.MaxTTLOrZero())
	assert.Equal(t, 2, p.Grant.MaxConcurrentLeases)
	require.NotNil(t, p.Grant.MaxExtensions)
	assert.Equal(t, 1, *p.Grant.MaxExtensions)
	assert.True(t, p.Grant.Can(access.PermLease), "the role's permissions")

	// Rules are tried first to last: a feature branch of acme is not main, the second rule holds.
	p, err = v.Verify(ctx, op.Token(t, oidcprovider.GitHubJob("acme/app", "refs/heads/feature")))
	require.NoError(t, err)
	assert.Equal(t, "dev", p.Role)
	assert.Equal(t, op.Issuer+"#repo:acme/app:ref:refs/heads/feature", p.Name)

	// A valid token that no rule admits.
	_, err = v.Verify(ctx, op.Token(t, oidcprovider.GitHubJob("evil/app", "refs/heads/main")))
	require.ErrorIs(t, err, access.ErrForbidden)
	assert.Contains(t, err.Error(), "repo:evil/app:ref:refs/heads/main")

	// A token lacking a claim of the identity template.
	j := oidcprovider.GitHubJob("acme/noref", "refs/heads/main")
	delete(j.Claims, "ref")
	_, err = v.Verify(ctx, op.Token(t, j))
	require.ErrorIs(t, err, access.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "no ref claim")
}

func TestBadTokensAreRefused(t *testing.T) {
	op := oidcprovider.Start(t)
	v := identity.NewVerifier(policyFor(t, op.Issuer), identity.Options{})
	for _, bad := range op.BadTokens(t, oidcprovider.GitHubJob("acme/app", "refs/heads/main")) {
		t.Run(bad.Name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), bad.Token)
			require.ErrorIs(t, err, access.ErrUnauthenticated, "principal %+v", p)
			assert.Contains(t, err.Error(), bad.Want)
		})
	}
}

// The provider rotates its key: a token under the new key id makes kobe fetch the keys again;
// afterwards a token of the withdrawn key is refused. Made-up key ids do not make kobe fetch
// more often than KeyRefresh.
func TestKeyRotation(t *testing.T) {
	op := oidcprovider.Start(t)
	now := time.Now()
	v := identity.NewVerifier(policyFor(t, op.Issuer), identity.Options{KeyRefresh: time.Minute})
	v.Now = func() time.Time { return now }
	ctx := context.Background()
	job := oidcprovider.GitHubJob("acme/app", "refs/heads/main")

	old := op.Token(t, job)
	_, err := v.Verify(ctx, old)
	require.NoError(t, err)

	op.RotateKey(t)
	fresh := op.Token(t, job)
	// Within KeyRefresh of the last fetch, an unknown key id does not fetch again.
	_, err = v.Verify(ctx, fresh)
	require.ErrorIs(t, err, access.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "no key id")

	now = now.Add(2 * time.Minute)
	_, err = v.Verify(ctx, fresh)
	require.NoError(t, err, "the new key is fetched")
	_, err = v.Verify(ctx, old)
	require.ErrorIs(t, err, access.ErrUnauthenticated, "the withdrawn key is no longer accepted")
}

// A provider that cannot be reached is not the token's fault: ErrIdentityUnavailable (503).
func TestUnreachableIssuer(t *testing.T) {
	op := oidcprovider.Start(t)
	tok := op.Token(t, oidcprovider.GitHubJob("acme/app", "refs/heads/main"))
	pol := policyFor(t, op.Issuer)
	v := identity.NewVerifier(pol, identity.Options{})
	op.Close()
	_, err := v.Verify(context.Background(), tok)
	require.Error(t, err)
	assert.True(t, errors.Is(err, access.ErrIdentityUnavailable), "%v", err)
}

func TestPolicyRefusesUnsafeIssuers(t *testing.T) {
	base := `roles:
  ci: {permissions: [lease]}
oidc:
  issuers:
  - issuer: https://token.actions.githubusercontent.com
`
	for _, c := range []struct{ name, yaml, want string }{
		{"HS256", "    audiences: [kobe-system]\n    algorithms: [HS256]\n    rules: [{role: ci}]\n", "HS256"},
		{"none", "    audiences: [kobe-system]\n    algorithms: [none]\n    rules: [{role: ci}]\n", "none"},
		{"no audience", "    rules: [{role: ci}]\n", "audiences"},
		{"no rule", "    audiences: [kobe-system]\n", "rules"},
		{"unknown role", "    audiences: [kobe-system]\n    rules: [{role: root}]\n", "root"},
		{"constant identity", "    audiences: [kobe-system]\n    identityTemplate: everyone\n    rules: [{role: ci}]\n", "placeholder"},
		{"open brace", "    audiences: [kobe-system]\n    identityTemplate: \"repo:{repository\"\n    rules: [{role: ci}]\n", "'{'"},
		{"skew", "    audiences: [kobe-system]\n    clockSkew: 1h\n    rules: [{role: ci}]\n", "clockSkew"},
		{"unknown field", "    audiences: [kobe-system]\n    audience: x\n    rules: [{role: ci}]\n", "audience"},
		{"prefix without a separator", "    audiences: [kobe-system]\n    principalPrefix: gha\n    rules: [{role: ci}]\n", "principalPrefix"},
		{"prefix with a space", "    audiences: [kobe-system]\n    principalPrefix: \"g a:\"\n    rules: [{role: ci}]\n", "principalPrefix"},
		{"a prefix beginning another", "    audiences: [kobe-system]\n    principalPrefix: \"gh:\"\n    rules: [{role: ci}]\n" +
			"  - issuer: https://login.example.com\n    audiences: [kobe-portal]\n    principalPrefix: \"gh:sso:\"\n    rules: [{role: ci}]\n", "one begins the other"},
		{"a prefix beginning the default of another", "    audiences: [kobe-system]\n    rules: [{role: ci}]\n" +
			"  - issuer: https://login.example.com\n    audiences: [kobe-portal]\n    principalPrefix: \"https:\"\n    rules: [{role: ci}]\n", "one begins the other"},
		{"issuer with a fragment", "    audiences: [kobe-system]\n    rules: [{role: ci}]\n" +
			"  - issuer: https://login.example.com#x\n    audiences: [kobe-portal]\n    rules: [{role: ci}]\n", "fragment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := access.ParsePolicy([]byte(base + c.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	pol, err := access.ParsePolicy([]byte(base + "    audiences: [kobe-system]\n    rules: [{role: ci}]\n"))
	require.NoError(t, err)
	is := pol.OIDC.Issuers[0]
	assert.Equal(t, []string{"RS256", "ES256"}, is.Algorithms, "the default algorithms")
	assert.Equal(t, "{sub}", is.IdentityTemplate, "the default identity")
	assert.Equal(t, 30*time.Second, is.ClockSkewOrDefault())
}

func TestIdentityTemplate(t *testing.T) {
	claims := map[string]any{"sub": "s", "repository": "acme/app", "ctx": map[string]any{"team": "infra", "n": float64(7)}, "list": []any{"a"}}
	for tmpl, want := range map[string]string{
		"{sub}":                           "s",
		"repo:{repository}":               "repo:acme/app",
		"{ctx.team}/{ctx.n}@{repository}": "infra/7@acme/app",
	} {
		tp, err := access.ParseTemplate(tmpl)
		require.NoError(t, err)
		got, err := tp.Render(claims)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, tmpl := range []string{"{missing}", "{ctx}", "{list}", "{ctx.none}"} {
		tp, err := access.ParseTemplate(tmpl)
		require.NoError(t, err)
		_, err = tp.Render(claims)
		assert.ErrorIs(t, err, access.ErrTemplateClaim, tmpl)
	}
	rule := access.ClaimRule{Match: map[string]string{"list": "a", "ctx.team": "inf*"}}
	assert.True(t, rule.Matches(claims))
	rule.Match["ctx.team"] = "ops"
	assert.False(t, rule.Matches(claims))
}

// Item 8 of the review (7 of issue 39): two issuers with the default template {sub} named the
// same subject the same principal. Each principal now carries its issuer (or the issuer's
// configured principalPrefix).
func TestTwoIssuersNeverShareAPrincipal(t *testing.T) {
	a, b := oidcprovider.Start(t), oidcprovider.Start(t)
	pol, err := access.ParsePolicy([]byte(`roles:
  ci: {permissions: [lease]}
oidc:
  issuers:
  - issuer: ` + a.Issuer + `
    audiences: [kobe-system]
    rules: [{role: ci}]
  - issuer: ` + b.Issuer + `
    audiences: [kobe-system]
    rules: [{role: ci}]
`))
	require.NoError(t, err)
	v := identity.NewVerifier(pol, identity.Options{})
	job := oidcprovider.GitHubJob("acme/app", "refs/heads/main")
	pa, err := v.Verify(context.Background(), a.Token(t, job))
	require.NoError(t, err)
	pb, err := v.Verify(context.Background(), b.Token(t, job))
	require.NoError(t, err)
	assert.NotEqual(t, pa.Name, pb.Name, "the same subject of two issuers")
	assert.Equal(t, a.Issuer+"#repo:acme/app:ref:refs/heads/main", pa.Name)
	assert.Equal(t, b.Issuer+"#repo:acme/app:ref:refs/heads/main", pb.Name)
}

// The keys are fetched again after KeyMaxAge; while the provider cannot be reached the stale
// keys keep working for KeyStaleGrace more, then verification fails (503: the issuer cannot be
// reached), rather than trusting keys the provider may have withdrawn for ever.
func TestStaleKeysAreUsedOnlyForAGracePeriod(t *testing.T) {
	op := oidcprovider.Start(t)
	now := time.Now()
	v := identity.NewVerifier(policyFor(t, op.Issuer), identity.Options{KeyMaxAge: time.Hour})
	v.Now = func() time.Time { return now }
	ctx := context.Background()
	job := oidcprovider.GitHubJob("acme/app", "refs/heads/main")
	job.Lifetime = 24 * time.Hour
	tok := op.Token(t, job)
	_, err := v.Verify(ctx, tok)
	require.NoError(t, err)

	op.Close()
	now = now.Add(time.Hour + 30*time.Minute) // past KeyMaxAge, within the grace
	_, err = v.Verify(ctx, tok)
	require.NoError(t, err, "stale keys beat none for a while")
	now = now.Add(time.Hour) // 2h30 after the last fetch: past KeyMaxAge + the 1h grace
	_, err = v.Verify(ctx, tok)
	require.Error(t, err, "keys 2h30 old that cannot be fetched again are no longer trusted")
	assert.ErrorIs(t, err, access.ErrIdentityUnavailable)
	assert.Contains(t, err.Error(), "last fetched")
}
