package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// TokenPrefix starts every kobe token, so that secret scanners (and our own log checks) can
// recognise one.
const TokenPrefix = "kobe_"

// Principal is an authenticated caller.
type Principal struct {
	Name    string
	Role    string
	TokenID string // a kobe token's id; empty for an OIDC token
	// SessionID is set for a portal session (a person logged in with SSO).
	SessionID string

	// Subject is an OIDC token's sub claim (the audit of a refusal names it).
	Subject string

	// Set for an OIDC token: the issuer, the rule's grant (Role with the rule's limits; see
	// Policy.RoleOf) and the token's expiry.
	Issuer    string
	Grant     *Role
	ExpiresAt time.Time
}

// BearerVerifier checks bearer tokens that are not kobe's own (package identity: OIDC).
type BearerVerifier interface {
	// Verify returns the principal of a token, or an error wrapping ErrUnauthenticated (a bad
	// token), ErrForbidden (a good token no rule admits) or ErrIdentityUnavailable.
	Verify(ctx context.Context, raw string) (Principal, error)
}

// ErrForbidden is a valid token that no access rule admits.
var ErrForbidden = errors.New("no access rule admits the token")

// ErrIdentityUnavailable is an issuer whose discovery document or keys cannot be fetched.
var ErrIdentityUnavailable = errors.New("the token's issuer cannot be reached")

// NewToken returns a fresh secret and the id under which its hash is stored.
func NewToken() (id, secret string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	idb := make([]byte, 6)
	if _, err := rand.Read(idb); err != nil {
		return "", "", err
	}
	return "tok-" + hex.EncodeToString(idb), TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is what the store keeps of a secret. Tokens are 256 random bits, so a plain
// SHA-256 is enough: there is nothing to brute-force.
func HashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// ErrUnauthenticated covers a missing, unknown, revoked or expired token alike.
var ErrUnauthenticated = errors.New("missing or invalid bearer token")

// Authenticator resolves bearer tokens to principals.
type Authenticator struct {
	Store  store.Store
	Policy *Policy
	// OIDC verifies the bearer tokens that are JWTs rather than kobe tokens; nil = none.
	OIDC BearerVerifier

	mu      sync.Mutex
	touched map[string]time.Time // token id → last recorded use
}

// Authenticate checks an Authorization header value ("Bearer <token>"): a kobe token, or, when
// OIDC issuers are trusted, a JWT (three dot-separated parts) of one of them.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	secret, ok := strings.CutPrefix(header, "Bearer ")
	secret = strings.TrimSpace(secret)
	if !ok || secret == "" {
		return Principal{}, ErrUnauthenticated
	}
	if a.OIDC != nil && !strings.HasPrefix(secret, TokenPrefix) && strings.Count(secret, ".") == 2 {
		return a.OIDC.Verify(ctx, secret)
	}
	t, err := a.Store.GetTokenByHash(ctx, HashToken(secret))
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, err
	}
	now := time.Now()
	if !t.RevokedAt.IsZero() || (!t.ExpiresAt.IsZero() && now.After(t.ExpiresAt)) {
		return Principal{}, ErrUnauthenticated
	}
	if _, ok := a.Policy.Role(t.Role); !ok {
		return Principal{}, ErrUnauthenticated // a role removed from the policy
	}
	if is, ok := a.Policy.InOIDCNamespace(t.Principal); ok {
		// Made before the issuer was trusted (creation refuses it): it would act as, and
		// share the leases of, an identity of that issuer.
		return Principal{}, fmt.Errorf("%w: the kobe token %s acts as %q, a name of OIDC issuer %s's identities; create another token",
			ErrUnauthenticated, t.ID, t.Principal, is.Issuer)
	}
	a.touch(ctx, t.ID, now)
	return Principal{Name: t.Principal, Role: t.Role, TokenID: t.ID}, nil
}

// touch records a token's use at most once a minute: a write per request would serialise
// every request on SQLite's single writer.
func (a *Authenticator) touch(ctx context.Context, id string, now time.Time) {
	a.mu.Lock()
	if a.touched == nil {
		a.touched = map[string]time.Time{}
	}
	last := a.touched[id]
	if now.Sub(last) < time.Minute {
		a.mu.Unlock()
		return
	}
	a.touched[id] = now
	a.mu.Unlock()
	_ = a.Store.TouchToken(ctx, id, now)
}
