package access

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
)

// OIDC is the part of the policy that trusts OpenID Connect issuers: a CI job (a GitHub Actions
// OIDC token) or a person's ID token is accepted as a bearer token beside kobe's own tokens,
// and the token's claims decide, rule by rule, what its holder may do.
type OIDC struct {
	Issuers []Issuer `json:"issuers"`
	// Login lets people log in to the portal (and `kobe login`) with one of the issuers
	// (login.go); nil = no SSO login.
	Login *Login `json:"login,omitempty"`
}

// Issuer is one trusted OpenID provider.
type Issuer struct {
	// Issuer is the provider's issuer URL, exactly as its tokens' iss claim spells it.
	Issuer string `json:"issuer"`
	// JWKSURL is where the signing keys are; empty = the jwks_uri of the issuer's discovery
	// document (<issuer>/.well-known/openid-configuration).
	JWKSURL string `json:"jwksUrl,omitempty"`
	// Audiences: a token's aud must name at least one of them (GitHub Actions: kobe-system).
	Audiences []string `json:"audiences"`
	// AuthorizedParties: when set, a token's azp must be one of them.
	AuthorizedParties []string `json:"authorizedParties,omitempty"`
	// Algorithms a token may be signed with: RS256 and ES256 (the default is both). HS* and
	// none are refused: a symmetric key would have to be shared with every verifier.
	Algorithms []string `json:"algorithms,omitempty"`
	// ClockSkew tolerated on exp, nbf and iat; default 30s, at most 5m.
	ClockSkew string `json:"clockSkew,omitempty"`
	// IdentityTemplate makes the principal's name from the claims: {claim} or {a.b.c} for a
	// nested claim, e.g. "repo:{repository}:ref:{ref}". Default "{sub}". Leases are the
	// principal's: two tokens of one identity see the same leases, two identities never.
	IdentityTemplate string `json:"identityTemplate,omitempty"`
	// PrincipalPrefix starts the name of every principal of this issuer, before the rendered
	// template (e.g. "gha:"); default the issuer's URL and "#". No issuer's prefix may begin
	// another's, and no kobe token may be named in an issuer's namespace, so two issuers never
	// yield the same principal, nor an OIDC identity a kobe token's.
	PrincipalPrefix string `json:"principalPrefix,omitempty"`
	// Rules are tried first to last; the first whose match holds decides. A token no rule
	// matches is refused (403).
	Rules []ClaimRule `json:"rules"`

	clockSkew time.Duration
}

// ClaimRule grants a role's permissions, with its own limits, to the tokens whose claims match.
type ClaimRule struct {
	// Match maps a claim (dot path for nested claims) to a glob (path.Match) its value must
	// match; a list claim matches when one of its items does. Every entry must match; an empty
	// match matches every token of the issuer.
	Match map[string]string `json:"match,omitempty"`
	// Role names a role of the policy: its permissions, rate limit and quota apply.
	Role string `json:"role"`
	// Pools the holder may lease from, as globs; empty = the role's.
	Pools []string `json:"pools,omitempty"`
	// MaxTTL caps a lease's TTL and extensions; empty = the role's.
	MaxTTL string `json:"maxTtl,omitempty"`
	// MaxConcurrentLeases per identity; 0 = the role's.
	MaxConcurrentLeases int `json:"maxConcurrentLeases,omitempty"`
	// MaxExtensions per lease; absent = the role's.
	MaxExtensions *int `json:"maxExtensions,omitempty"`
}

// The signing algorithms an issuer may allow.
var allowedAlgorithms = []string{"RS256", "ES256"}

// DefaultIdentityTemplate names an OIDC principal by its subject.
const DefaultIdentityTemplate = "{sub}"

// DefaultClockSkew is tolerated on exp, nbf and iat when an issuer sets none.
const DefaultClockSkew = 30 * time.Second

// Prefix is what every principal name of the issuer starts with.
func (is Issuer) Prefix() string {
	if is.PrincipalPrefix != "" {
		return is.PrincipalPrefix
	}
	return is.Issuer + "#"
}

// InOIDCNamespace returns the issuer whose principals' names name starts like, if any: a kobe
// token may not be named so (it would share that identity's leases and limits).
func (p *Policy) InOIDCNamespace(name string) (Issuer, bool) {
	if p == nil || p.OIDC == nil {
		return Issuer{}, false
	}
	for _, is := range p.OIDC.Issuers {
		if strings.HasPrefix(name, is.Prefix()) {
			return is, true
		}
	}
	return Issuer{}, false
}

func (o *OIDC) validate(p *Policy) error {
	seen := map[string]bool{}
	prefixes := map[string]string{} // prefix → field
	for i := range o.Issuers {
		is := &o.Issuers[i]
		field := fmt.Sprintf("oidc.issuers[%d]", i)
		u, err := url.Parse(is.Issuer)
		if is.Issuer == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%s.issuer: %q is not an http(s) URL", field, is.Issuer)
		}
		if seen[is.Issuer] {
			return fmt.Errorf("%s.issuer: %s is listed twice", field, is.Issuer)
		}
		seen[is.Issuer] = true
		if strings.Contains(is.Issuer, "#") {
			return fmt.Errorf("%s.issuer: %q has a fragment (an OpenID issuer has none)", field, is.Issuer)
		}
		if pp := is.PrincipalPrefix; pp != "" {
			if len(pp) > 64 || strings.ContainsFunc(pp, func(r rune) bool { return r <= ' ' || r == 0x7f }) ||
				!strings.ContainsAny(pp[len(pp)-1:], ":#/@") {
				return fmt.Errorf("%s.principalPrefix: %q must be at most 64 characters without spaces, ending in ':', '#', '/' or '@' (e.g. \"gha:\")", field, pp)
			}
		}
		for other, of := range prefixes {
			if strings.HasPrefix(is.Prefix(), other) || strings.HasPrefix(other, is.Prefix()) {
				return fmt.Errorf("%s.principalPrefix: %q and %s's %q: one begins the other, so their issuers could name the same principal",
					field, is.Prefix(), of, other)
			}
		}
		prefixes[is.Prefix()] = field
		if is.JWKSURL != "" {
			if u, err := url.Parse(is.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("%s.jwksUrl: %q is not an http(s) URL", field, is.JWKSURL)
			}
		}
		if len(is.Audiences) == 0 {
			return fmt.Errorf("%s.audiences: at least one audience is required (GitHub Actions: kobe-system)", field)
		}
		if len(is.Algorithms) == 0 {
			is.Algorithms = append([]string{}, allowedAlgorithms...)
		}
		for j, alg := range is.Algorithms {
			if !slices.Contains(allowedAlgorithms, alg) {
				return fmt.Errorf("%s.algorithms[%d]: %q is not allowed (only %s; never HS* or none)", field, j, alg, strings.Join(allowedAlgorithms, ", "))
			}
		}
		is.clockSkew = DefaultClockSkew
		if is.ClockSkew != "" {
			d, err := time.ParseDuration(is.ClockSkew)
			if err != nil || d < 0 || d > 5*time.Minute {
				return fmt.Errorf("%s.clockSkew: %q is not a duration between 0s and 5m", field, is.ClockSkew)
			}
			is.clockSkew = d
		}
		if is.IdentityTemplate == "" {
			is.IdentityTemplate = DefaultIdentityTemplate
		}
		if _, err := ParseTemplate(is.IdentityTemplate); err != nil {
			return fmt.Errorf("%s.identityTemplate: %w", field, err)
		}
		if len(is.Rules) == 0 {
			return fmt.Errorf("%s.rules: at least one rule is required (a token no rule matches is refused)", field)
		}
		for j, r := range is.Rules {
			rf := fmt.Sprintf("%s.rules[%d]", field, j)
			if _, ok := p.Roles[r.Role]; !ok {
				return fmt.Errorf("%s.role: %q is not a role of the policy (roles: %s)", rf, r.Role, strings.Join(p.RoleNames(), ", "))
			}
			for claim, g := range r.Match {
				if claim == "" || strings.HasPrefix(claim, ".") || strings.HasSuffix(claim, ".") || strings.Contains(claim, "..") {
					return fmt.Errorf("%s.match: %q is not a claim name or dot path", rf, claim)
				}
				if _, err := path.Match(g, ""); err != nil {
					return fmt.Errorf("%s.match.%s: %q is not a valid glob", rf, claim, g)
				}
			}
			for k, g := range r.Pools {
				if _, err := path.Match(g, ""); err != nil {
					return fmt.Errorf("%s.pools[%d]: %q is not a valid glob", rf, k, g)
				}
			}
			if r.MaxTTL != "" {
				if d, err := time.ParseDuration(r.MaxTTL); err != nil || d <= 0 {
					return fmt.Errorf("%s.maxTtl: %q is not a positive duration (e.g. 2h)", rf, r.MaxTTL)
				}
			}
			if r.MaxConcurrentLeases < 0 {
				return fmt.Errorf("%s.maxConcurrentLeases: must not be negative", rf)
			}
			if r.MaxExtensions != nil && *r.MaxExtensions < 0 {
				return fmt.Errorf("%s.maxExtensions: must not be negative", rf)
			}
		}
	}
	if o.Login != nil {
		return o.Login.validate(o)
	}
	return nil
}

// ClockSkewOrDefault is the skew tolerated on the issuer's time claims.
func (is Issuer) ClockSkewOrDefault() time.Duration {
	if is.clockSkew == 0 && is.ClockSkew == "" {
		return DefaultClockSkew
	}
	return is.clockSkew
}

// Grant is the role a rule gives: the policy's role with the rule's limits in place of its own.
func (p *Policy) Grant(r ClaimRule) Role {
	role := p.Roles[r.Role]
	if len(r.Pools) > 0 {
		role.Pools = append([]string{}, r.Pools...)
	}
	if r.MaxTTL != "" {
		d, _ := time.ParseDuration(r.MaxTTL) // validated
		role.MaxTTL, role.maxTTL = r.MaxTTL, d
	}
	if r.MaxConcurrentLeases > 0 {
		role.MaxConcurrentLeases = r.MaxConcurrentLeases
	}
	if r.MaxExtensions != nil {
		n := *r.MaxExtensions
		role.MaxExtensions = &n
	}
	return role
}

// Match says whether a rule holds for a token's claims.
func (r ClaimRule) Matches(claims map[string]any) bool {
	for claim, glob := range r.Match {
		v, ok := ClaimAt(claims, claim)
		if !ok {
			return false
		}
		if !valueMatches(glob, v) {
			return false
		}
	}
	return true
}

func valueMatches(glob string, v any) bool {
	if list, ok := v.([]any); ok {
		for _, item := range list {
			if s, ok := scalarString(item); ok {
				if m, _ := path.Match(glob, s); m {
					return true
				}
			}
		}
		return false
	}
	s, ok := scalarString(v)
	if !ok {
		return false
	}
	m, _ := path.Match(glob, s)
	return m
}

// ClaimAt finds a claim by name or dot path ("a.b.c" looks in nested objects). A claim whose
// own name contains dots is found too (the whole path is tried first).
func ClaimAt(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	head, rest, ok := strings.Cut(name, ".")
	if !ok {
		return nil, false
	}
	inner, isMap := claims[head].(map[string]any)
	if !isMap {
		return nil, false
	}
	return ClaimAt(inner, rest)
}

// scalarString writes a string, number or boolean claim as text; objects, lists and null are
// not scalars.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return fmt.Sprint(x), true
	case float64:
		return fmt.Sprint(x), true
	case interface{ String() string }: // json.Number
		return x.String(), true
	}
	return "", false
}

// Template is a parsed identity template: literal text and {claim} placeholders.
type Template struct {
	parts []templatePart
}

type templatePart struct {
	literal string
	claim   string // set for a placeholder
}

// ParseTemplate parses "repo:{repository}:ref:{ref}". Braces do not nest; a template needs at
// least one placeholder (a constant identity would merge every token's leases).
func ParseTemplate(s string) (Template, error) {
	var t Template
	rest := s
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if rest[open] == '}' {
			return Template{}, fmt.Errorf("%q: a '}' without its '{'", s)
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] != '}' {
			return Template{}, fmt.Errorf("%q: a '{' without its '}'", s)
		}
		claim := rest[open+1 : open+1+end]
		if claim == "" || strings.HasPrefix(claim, ".") || strings.HasSuffix(claim, ".") || strings.Contains(claim, "..") {
			return Template{}, fmt.Errorf("%q: {%s} is not a claim name or dot path", s, claim)
		}
		t.parts = append(t.parts, templatePart{claim: claim})
		rest = rest[open+1+end+1:]
	}
	if !slices.ContainsFunc(t.parts, func(p templatePart) bool { return p.claim != "" }) {
		return Template{}, fmt.Errorf("%q: no {claim} placeholder (every token would be the same identity)", s)
	}
	return t, nil
}

// ErrTemplateClaim is returned when a token lacks a claim its identity template needs.
var ErrTemplateClaim = errors.New("identity template")

// Render fills the template from the claims; a missing, empty or non-scalar claim is an error.
func (t Template) Render(claims map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.claim == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok := ClaimAt(claims, p.claim)
		s, scalar := scalarString(v)
		if !ok || !scalar || s == "" {
			return "", fmt.Errorf("%w: the token has no %s claim (a non-empty string or number)", ErrTemplateClaim, p.claim)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
