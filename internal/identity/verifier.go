// Package identity verifies OpenID Connect tokens (a GitHub Actions job's, a person's ID token)
// for the API: which issuers are trusted, with what audiences and algorithms, and what a token's
// claims grant, is the access policy's (internal/access, oidc.go); this package fetches the
// issuers' discovery documents and keys, checks a token with go-oidc, and turns its claims into
// a principal.
package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/kunobi-ninja/kobe/internal/access"
)

// errUnavailable marks the failures of the provider rather than of the token.
var errUnavailable = access.ErrIdentityUnavailable

// Verifier checks bearer JWTs against the policy's issuers. It is an access.BearerVerifier.
type Verifier struct {
	policy  *access.Policy
	client  *http.Client
	issuers map[string]*issuer
	keyOpts Options
	// Now is the clock (tests move it); nil = time.Now.
	Now func() time.Time
}

type issuer struct {
	cfg      access.Issuer
	template access.Template
	algs     []jose.SignatureAlgorithm

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier // set once the keys' URL is known
	tried    time.Time             // last failed discovery
}

// Options tune a Verifier; the zero value is what kobe serves with.
type Options struct {
	// Client fetches discovery documents and keys; nil = a client with a 10 s timeout.
	Client *http.Client
	// KeyRefresh is the least time between two fetches of an issuer's keys caused by an unknown
	// key id; 0 = 10 s. KeyMaxAge is how long fetched keys are used before they are fetched
	// again; 0 = 1 h. KeyStaleGrace is how long past KeyMaxAge the keys are still used while
	// they cannot be fetched again; 0 = 1 h.
	KeyRefresh, KeyMaxAge, KeyStaleGrace time.Duration
}

// NewVerifier prepares the policy's issuers. It does not reach them: discovery and keys are
// fetched at the first token of each issuer, so kobe starts while a provider is down.
func NewVerifier(policy *access.Policy, opts Options) *Verifier {
	v := &Verifier{policy: policy, client: opts.Client, issuers: map[string]*issuer{}}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.KeyRefresh == 0 {
		opts.KeyRefresh = 10 * time.Second
	}
	if opts.KeyMaxAge == 0 {
		opts.KeyMaxAge = time.Hour
	}
	if opts.KeyStaleGrace == 0 {
		opts.KeyStaleGrace = time.Hour
	}
	if policy.OIDC == nil {
		return v
	}
	for _, cfg := range policy.OIDC.Issuers {
		tmpl, err := access.ParseTemplate(cfg.IdentityTemplate)
		if err != nil {
			panic("identity: the policy was not validated: " + err.Error())
		}
		is := &issuer{cfg: cfg, template: tmpl}
		for _, a := range cfg.Algorithms {
			is.algs = append(is.algs, jose.SignatureAlgorithm(a))
		}
		if cfg.JWKSURL != "" {
			is.verifier = v.newIDTokenVerifier(is, cfg.JWKSURL, opts)
		}
		v.issuers[cfg.Issuer] = is
	}
	v.keyOpts = opts
	return v
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) newIDTokenVerifier(is *issuer, jwksURL string, opts Options) *oidc.IDTokenVerifier {
	keys := &keySet{url: jwksURL, client: v.client, algorithms: is.algs, minRefresh: opts.KeyRefresh, maxAge: opts.KeyMaxAge,
		staleGrace: opts.KeyStaleGrace, now: v.now}
	return oidc.NewVerifier(is.cfg.Issuer, keys, &oidc.Config{
		SupportedSigningAlgs: is.cfg.Algorithms,
		SkipClientIDCheck:    true, // several audiences may be allowed: checked below
		SkipExpiryCheck:      true, // checked below, with the issuer's clock skew
		Now:                  v.now,
	})
}

// verifierOf returns the issuer's token verifier, discovering its keys' URL first if needed
// (at most one discovery attempt per 10 s while the provider fails).
func (v *Verifier) verifierOf(ctx context.Context, is *issuer) (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.verifier != nil {
		return is.verifier, nil
	}
	if !is.tried.IsZero() && v.now().Sub(is.tried) < v.keyOpts.KeyRefresh {
		return nil, fmt.Errorf("%w: discovery of %s failed a moment ago", errUnavailable, is.cfg.Issuer)
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), v.client), 10*time.Second)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, is.cfg.Issuer)
	if err != nil {
		is.tried = v.now()
		return nil, fmt.Errorf("%w: discovery of %s: %v", errUnavailable, is.cfg.Issuer, err)
	}
	var doc struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURL == "" {
		is.tried = v.now()
		return nil, fmt.Errorf("%w: the discovery document of %s has no jwks_uri", errUnavailable, is.cfg.Issuer)
	}
	is.verifier = v.newIDTokenVerifier(is, doc.JWKSURL, v.keyOpts)
	return is.verifier, nil
}

// unauthenticated wraps a token's fault.
func unauthenticated(format string, args ...any) error {
	return fmt.Errorf("%w: %s", access.ErrUnauthenticated, fmt.Sprintf(format, args...))
}

// Verify checks a JWT: a trusted issuer, an allowed algorithm and a signature by one of the
// issuer's current keys (go-oidc), an allowed audience and authorized party, exp, nbf and iat
// within the clock skew; then names the principal with the identity template and finds the
// first rule its claims match.
func (v *Verifier) Verify(ctx context.Context, raw string) (access.Principal, error) {
	p, _, err := v.VerifyClaims(ctx, raw)
	if err != nil {
		return p, err // a good token no rule admits names its identity (the audit of the 403)
	}
	return p, nil
}

// VerifyClaims is Verify that also returns the token's claims (a login checks its nonce).
func (v *Verifier) VerifyClaims(ctx context.Context, raw string) (access.Principal, map[string]any, error) {
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return access.Principal{}, nil, unauthenticated("%v", err)
	}
	is, ok := v.issuers[iss]
	if !ok {
		return access.Principal{}, nil, unauthenticated("issuer %q is not trusted by this kobe", iss)
	}
	ver, err := v.verifierOf(ctx, is)
	if err != nil {
		return access.Principal{}, nil, err
	}
	tok, err := ver.Verify(ctx, raw)
	if errors.Is(err, errUnavailable) {
		return access.Principal{}, nil, err
	}
	if err != nil && strings.Contains(err.Error(), errUnavailable.Error()) {
		// go-oidc wraps the key set's error with %v: the provider's fault, not the token's.
		return access.Principal{}, nil, fmt.Errorf("%w: %s", errUnavailable, strings.TrimPrefix(err.Error(), "oidc: "))
	}
	if err != nil {
		return access.Principal{}, nil, unauthenticated("%s", strings.TrimPrefix(err.Error(), "oidc: "))
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(is.cfg.Audiences, a) }) {
		return access.Principal{}, nil, unauthenticated("audience %q is not one of %q", tok.Audience, is.cfg.Audiences)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return access.Principal{}, nil, unauthenticated("claims: %v", err)
	}
	if len(is.cfg.AuthorizedParties) > 0 {
		azp, _ := claims["azp"].(string)
		if !slices.Contains(is.cfg.AuthorizedParties, azp) {
			return access.Principal{}, nil, unauthenticated("authorized party (azp) %q is not one of %q", azp, is.cfg.AuthorizedParties)
		}
	}
	if err := checkTimes(claims, v.now(), is.cfg.ClockSkewOrDefault()); err != nil {
		return access.Principal{}, nil, err
	}
	p, err := v.Admit(iss, claims)
	if err != nil {
		return p, claims, err // a good token no rule admits still names its identity (the audit log)
	}
	p.ExpiresAt = tok.Expiry
	return p, claims, nil
}

// Admit names the principal of verified claims of a trusted issuer with its identity template
// and finds the first rule they match: what a token's claims grant, and what a portal
// session's (whose claims were verified at login) grant now, under the policy in force.
func (v *Verifier) Admit(iss string, claims map[string]any) (access.Principal, error) {
	is, ok := v.issuers[iss]
	if !ok {
		return access.Principal{}, unauthenticated("issuer %q is not trusted by this kobe", iss)
	}
	name, err := is.template.Render(claims)
	if err != nil {
		return access.Principal{}, unauthenticated("%v", err)
	}
	// The issuer's prefix keeps its principals apart from every other issuer's and from kobe
	// tokens' (access.Issuer.Prefix): the same subject of two issuers is two principals.
	name = is.cfg.Prefix() + name
	sub, _ := claims["sub"].(string)
	for _, rule := range is.cfg.Rules {
		if rule.Matches(claims) {
			grant := v.policy.Grant(rule)
			return access.Principal{Name: name, Role: rule.Role, Issuer: iss, Subject: sub, Grant: &grant}, nil
		}
	}
	return access.Principal{Name: name, Issuer: iss, Subject: sub}, fmt.Errorf("%w: no rule of issuer %s matches the claims of %s", access.ErrForbidden, iss, name)
}

// checkTimes: exp is required and must not have passed, nbf and iat must not be in the future,
// each with the issuer's skew.
func checkTimes(claims map[string]any, now time.Time, skew time.Duration) error {
	num := func(name string) (time.Time, bool, error) {
		v, ok := claims[name]
		if !ok {
			return time.Time{}, false, nil
		}
		f, isNum := v.(float64)
		if !isNum {
			return time.Time{}, true, unauthenticated("claim %s is not a number of seconds", name)
		}
		return time.Unix(int64(f), 0), true, nil
	}
	exp, ok, err := num("exp")
	if err != nil {
		return err
	}
	if !ok {
		return unauthenticated("the token has no exp claim")
	}
	if now.After(exp.Add(skew)) {
		return unauthenticated("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	nbf, ok, err := num("nbf")
	if err != nil {
		return err
	}
	if ok && now.Add(skew).Before(nbf) {
		return unauthenticated("the token is not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	iat, ok, err := num("iat")
	if err != nil {
		return err
	}
	if ok && now.Add(skew).Before(iat) {
		return unauthenticated("the token was issued in the future (%s)", iat.UTC().Format(time.RFC3339))
	}
	return nil
}

// unverifiedIssuer reads the iss claim of a JWT before verifying it, only to choose the
// issuer whose keys verify it (the verification checks iss again).
func unverifiedIssuer(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", errors.New("not a JWT: the payload is not base64url")
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", errors.New("not a JWT: the payload is not a JSON object")
	}
	if c.Iss == "" {
		return "", errors.New("the token has no iss claim")
	}
	return c.Iss, nil
}
