package server

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// admission is what a lease is granted: its TTL, the ceiling extensions cannot pass, and how
// many extensions it may ask for.
type admission struct {
	ttl           time.Duration
	ceiling       time.Duration
	maxExtensions int
}

// admit decides, without I/O, what a role's principal is granted for a create request on a pool:
// refused (the role may not lease from the pool), or the requested TTL (or the pool's default)
// clamped to the tighter of the pool's and the role's ceilings, and the tighter of their
// extension budgets. Quotas and aliases are the store's (they need the other leases).
func admit(pol poolspec.Policy, roleName string, role access.Role, c leaseCreate) (admission, error) {
	if !role.AllowsPool(c.pool) {
		return admission{}, fmt.Errorf("role %s may lease from pools %s, not %s", roleName, strings.Join(role.Pools, ", "), c.pool)
	}
	a := admission{ceiling: pol.MaxTTL, maxExtensions: pol.MaxExtensions}
	if rm := role.MaxTTLOrZero(); rm > 0 && rm < a.ceiling {
		a.ceiling = rm
	}
	a.ttl = c.ttl
	if a.ttl == 0 {
		a.ttl = pol.TTL
	}
	a.ttl = min(a.ttl, a.ceiling)
	if role.MaxExtensions != nil {
		a.maxExtensions = min(a.maxExtensions, *role.MaxExtensions)
	}
	return a, nil
}

// policyCache keeps each pool's resolved policy by the generation of its store row, so that a
// lease create reads the row but parses and validates its manifest only after an apply.
type policyCache struct {
	mu       sync.Mutex
	policies map[string]cachedPolicy
}

type cachedPolicy struct {
	generation int64
	policy     poolspec.Policy
}

func (c *policyCache) get(name string, generation int64) (poolspec.Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.policies[name]
	return p.policy, ok && p.generation == generation
}

func (c *policyCache) put(name string, generation int64, pol poolspec.Policy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policies == nil {
		c.policies = map[string]cachedPolicy{}
	}
	c.policies[name] = cachedPolicy{generation: generation, policy: pol}
}
