// Package access decides who may do what through the API: bearer tokens (hashed at rest), the
// access policy (roles → rules, from the --policy YAML file), and per-principal rate limits.
package access

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Permissions a role may hold.
const (
	PermLease     = "lease"      // create and manage one's own leases
	PermPoolRead  = "pool.read"  // list and read pools
	PermPoolAdmin = "pool.admin" // apply and delete pools
	PermAudit     = "audit.read" // read the audit log
	PermTokens    = "tokens"     // create, list and revoke tokens
)

var knownPermissions = []string{PermLease, PermPoolRead, PermPoolAdmin, PermAudit, PermTokens}

// Policy maps role names to their rules.
type Policy struct {
	Roles map[string]Role `json:"roles"`
	// OIDC trusts OpenID Connect issuers' tokens beside kobe's own (see oidc.go).
	OIDC *OIDC `json:"oidc,omitempty"`
}

// Role is what the holders of a role may do, and how much.
type Role struct {
	// Permissions, from: lease, pool.read, pool.admin, audit.read, tokens.
	Permissions []string `json:"permissions"`
	// Pools the role may lease from, as globs (path.Match: "ci-*"); empty = every pool.
	Pools []string `json:"pools,omitempty"`
	// MaxTTL caps a lease's TTL and extensions under this role (also capped by the pool's maxTtl).
	MaxTTL string `json:"maxTtl,omitempty"`
	// MaxExtensions caps a lease's extensions (also capped by the pool's).
	MaxExtensions *int `json:"maxExtensions,omitempty"`
	// MaxConcurrentLeases per principal of the role; 0 = no limit.
	MaxConcurrentLeases int `json:"maxConcurrentLeases,omitempty"`
	// Quota is the aggregate of active leases of all principals of the role; 0 = no limit.
	Quota int `json:"quota,omitempty"`
	// RateLimit per principal: requests per second and burst; 0 = the default (20/s, burst 40).
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	maxTTL time.Duration
}

// RateLimit is a token bucket.
type RateLimit struct {
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	Burst             int     `json:"burst"`
}

// Built-in role names of the default policy.
const (
	RoleAdmin   = "admin"
	RoleCI      = "ci"
	RoleDev     = "dev"
	RoleAuditor = "auditor"
)

// DefaultPolicy is used without --policy: an admin that may do everything, ci and dev roles
// that lease from any pool (ci: 10 at once per principal), an auditor that reads the log.
func DefaultPolicy() *Policy {
	p := &Policy{Roles: map[string]Role{
		RoleAdmin:   {Permissions: knownPermissions},
		RoleCI:      {Permissions: []string{PermLease, PermPoolRead}, MaxConcurrentLeases: 10},
		RoleDev:     {Permissions: []string{PermLease, PermPoolRead}, MaxConcurrentLeases: 3},
		RoleAuditor: {Permissions: []string{PermAudit, PermPoolRead}},
	}}
	if err := p.validate(); err != nil {
		panic(err)
	}
	return p
}

// LoadPolicy reads and validates a policy file.
func LoadPolicy(file string) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("--policy %s: %w", file, err)
	}
	return p, nil
}

// ParsePolicy parses a policy document strictly: unknown fields are errors naming the field.
func ParsePolicy(data []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("not a valid policy: %w", err)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Policy) validate() error {
	if len(p.Roles) == 0 {
		return errors.New("roles: at least one role is required")
	}
	for name, r := range p.Roles {
		field := "roles." + name
		if name == "" || strings.ContainsAny(name, " \t:") {
			return fmt.Errorf("%s: a role name is a word without spaces or colons", field)
		}
		if len(r.Permissions) == 0 {
			return fmt.Errorf("%s.permissions: at least one of %s", field, strings.Join(knownPermissions, ", "))
		}
		for i, perm := range r.Permissions {
			if !slices.Contains(knownPermissions, perm) {
				return fmt.Errorf("%s.permissions[%d]: unknown permission %q (known: %s)", field, i, perm, strings.Join(knownPermissions, ", "))
			}
		}
		for i, g := range r.Pools {
			if _, err := path.Match(g, ""); err != nil {
				return fmt.Errorf("%s.pools[%d]: %q is not a valid glob", field, i, g)
			}
		}
		if r.MaxTTL != "" {
			d, err := time.ParseDuration(r.MaxTTL)
			if err != nil || d <= 0 {
				return fmt.Errorf("%s.maxTtl: %q is not a positive duration (e.g. 2h)", field, r.MaxTTL)
			}
			r.maxTTL = d
		}
		if r.MaxExtensions != nil && *r.MaxExtensions < 0 {
			return fmt.Errorf("%s.maxExtensions: must not be negative", field)
		}
		if r.MaxConcurrentLeases < 0 || r.Quota < 0 {
			return fmt.Errorf("%s: maxConcurrentLeases and quota must not be negative", field)
		}
		if rl := r.RateLimit; rl != nil && (rl.RequestsPerSecond <= 0 || rl.Burst <= 0) {
			return fmt.Errorf("%s.rateLimit: requestsPerSecond and burst must be positive", field)
		}
		p.Roles[name] = r
	}
	if p.OIDC != nil {
		return p.OIDC.validate(p)
	}
	return nil
}

// RoleOf is the role a principal acts with: the grant of the claim rule that admitted its OIDC
// token, or else its token's role from the policy.
func (p *Policy) RoleOf(pr Principal) (Role, bool) {
	if pr.Grant != nil {
		return *pr.Grant, true
	}
	return p.Role(pr.Role)
}

// Issuers lists the trusted OIDC issuers' URLs.
func (p *Policy) Issuers() []string {
	if p.OIDC == nil {
		return nil
	}
	out := make([]string, 0, len(p.OIDC.Issuers))
	for _, is := range p.OIDC.Issuers {
		out = append(out, is.Issuer)
	}
	return out
}

// Role returns a role by name.
func (p *Policy) Role(name string) (Role, bool) {
	r, ok := p.Roles[name]
	return r, ok
}

// RoleNames lists the roles, sorted.
func (p *Policy) RoleNames() []string {
	names := make([]string, 0, len(p.Roles))
	for n := range p.Roles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Can says whether the role holds a permission.
func (r Role) Can(perm string) bool { return slices.Contains(r.Permissions, perm) }

// AllowsPool says whether the role may lease from a pool.
func (r Role) AllowsPool(pool string) bool {
	if len(r.Pools) == 0 {
		return true
	}
	for _, g := range r.Pools {
		if ok, _ := path.Match(g, pool); ok {
			return true
		}
	}
	return false
}

// MaxTTLOrZero is the role's TTL ceiling, zero when it has none.
func (r Role) MaxTTLOrZero() time.Duration { return r.maxTTL }
