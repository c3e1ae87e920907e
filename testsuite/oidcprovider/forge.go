package oidcprovider

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// BadToken is a token a verifier must refuse, and why.
type BadToken struct {
	Name, Token string
	// Want is a piece of the reason the verifier should give.
	Want string
}

// BadTokens are the tokens an attacker or a misconfigured job would send for job j: real ones
// the provider issued wrongly for kobe (expired, for another audience, from an untrusted issuer)
// and forged ones (a key the provider never published, alg none, HS256 keyed with the public
// key, a payload changed after signing).
func (p *Provider) BadTokens(t testing.TB, j Job) []BadToken {
	t.Helper()
	expired := j
	expired.ClientID += "-expired"
	expired.Lifetime = -10 * time.Minute
	otherAudience := j
	otherAudience.ClientID += "-aud"
	otherAudience.Audience = []string{"https://github.com/acme"}
	stranger := Start(t) // a real provider kobe does not trust
	good := p.Token(t, j)
	header, payload, _ := split(t, good)
	_, kid := p.PublicKey()

	// Signed by a key the provider never published, under a key id it does not have.
	rogue, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	unknownKid := sign(t, jose.RS256, rogue, "unknown-kid", payload)
	// Signed by a key the provider never published, under the provider's own key id.
	wrongKey := sign(t, jose.RS256, rogue, kid, payload)

	// alg none: no signature at all.
	none := enc(map[string]any{"alg": "none", "typ": "JWT", "kid": kid}) + "." + enc64(payload) + "."

	// HS256 keyed with the provider's public key (the classic algorithm confusion).
	pub, _ := p.PublicKey()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hsInput := enc(map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid}) + "." + enc64(payload)
	mac := hmac.New(sha256.New, pemKey)
	mac.Write([]byte(hsInput))
	hs256 := hsInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))

	// The payload of a good token changed after signing: another repository.
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims["repository"] = "acme/other"
	claims["sub"] = "repo:acme/other:ref:refs/heads/main"
	changed, _ := json.Marshal(claims)
	parts := strings.Split(good, ".")
	tampered := header + "." + enc64(changed) + "." + parts[2]

	return []BadToken{
		{Name: "expired", Token: p.Token(t, expired), Want: "expired"},
		{Name: "wrong audience", Token: p.Token(t, otherAudience), Want: "audience"},
		{Name: "wrong issuer", Token: stranger.Token(t, j), Want: "not trusted"},
		{Name: "unknown key id", Token: unknownKid, Want: "unknown-kid"},
		{Name: "wrong key under the right key id", Token: wrongKey, Want: "signature"},
		{Name: "alg none", Token: none, Want: "none"},
		{Name: "HS256 keyed with the public key", Token: hs256, Want: "HS256"},
		{Name: "tampered payload", Token: tampered, Want: "signature"},
		{Name: "not a JWT", Token: "a.b.c", Want: "JWT"},
	}
}

func split(t testing.TB, tok string) (header string, payload []byte, sig string) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return parts[0], payload, parts[2]
}

func enc(v any) string {
	b, _ := json.Marshal(v)
	return enc64(b)
}

func enc64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, payload []byte) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
