package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/identity"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
)

// An issuer with an explicit jwksUrl (no discovery) and ES256 keys; the time claims are checked
// with the issuer's skew (10 s here): a token expired 5 s ago passes, 15 s ago does not; nbf and
// iat in the future past the skew are refused; a token without exp is refused.
func TestES256JWKSURLAndClockSkew(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	jwks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "ec-1", Algorithm: "ES256", Use: "sig"}}}
	fetches := 0
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches++
		_ = json.NewEncoder(w).Encode(jwks)
	}))
	t.Cleanup(keys.Close)
	const iss = "https://issuer.example.test" // never reached: the keys' URL is given
	pol, err := access.ParsePolicy([]byte(`roles:
  ci: {permissions: [lease]}
oidc:
  issuers:
  - issuer: ` + iss + `
    jwksUrl: ` + keys.URL + `
    audiences: [kobe-system, other]
    algorithms: [ES256]
    clockSkew: 10s
    rules: [{role: ci}]
`))
	require.NoError(t, err)
	now := time.Now()
	v := identity.NewVerifier(pol, identity.Options{})
	v.Now = func() time.Time { return now }
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "ec-1"))
	require.NoError(t, err)
	mint := func(claims map[string]any) string {
		base := map[string]any{"iss": iss, "sub": "job-1", "aud": []string{"other"}, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		for k, v := range claims {
			if v == nil {
				delete(base, k)
			} else {
				base[k] = v
			}
		}
		payload, _ := json.Marshal(base)
		jws, err := signer.Sign(payload)
		require.NoError(t, err)
		s, err := jws.CompactSerialize()
		require.NoError(t, err)
		return s
	}
	ctx := context.Background()
	p, err := v.Verify(ctx, mint(nil))
	require.NoError(t, err, "ES256, one of the audiences")
	assert.Equal(t, iss+"#job-1", p.Name, "the issuer scopes the subject")
	_, err = v.Verify(ctx, mint(map[string]any{"exp": now.Add(-5 * time.Second).Unix()}))
	assert.NoError(t, err, "expired 5 s ago, within the 10 s skew")
	for name, claims := range map[string]map[string]any{
		"expired":              {"exp": now.Add(-15 * time.Second).Unix()},
		"no exp":               {"exp": nil},
		"not yet valid":        {"nbf": now.Add(time.Minute).Unix()},
		"issued in the future": {"iat": now.Add(time.Minute).Unix()},
		"exp not a number":     {"exp": "tomorrow"},
	} {
		_, err := v.Verify(ctx, mint(claims))
		assert.ErrorIs(t, err, access.ErrUnauthenticated, name)
	}
	assert.Equal(t, 1, fetches, "the keys are fetched once and cached")
}

// authorizedParties: a token must name one of them in azp.
func TestAuthorizedParties(t *testing.T) {
	op := oidcprovider.Start(t)
	pol, err := access.ParsePolicy([]byte(`roles:
  dev: {permissions: [lease]}
oidc:
  issuers:
  - issuer: ` + op.Issuer + `
    audiences: [kobe-system]
    authorizedParties: [kobe-portal]
    rules: [{role: dev}]
`))
	require.NoError(t, err)
	v := identity.NewVerifier(pol, identity.Options{})
	job := oidcprovider.GitHubJob("acme/app", "refs/heads/main")
	_, err = v.Verify(context.Background(), op.Token(t, job))
	require.ErrorIs(t, err, access.ErrUnauthenticated, "no azp")
	assert.Contains(t, err.Error(), "azp")
	job.Claims["azp"] = "kobe-portal"
	job.ClientID += "-portal"
	_, err = v.Verify(context.Background(), op.Token(t, job))
	require.NoError(t, err)
}
