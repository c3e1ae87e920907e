package server

import (
	"fmt"
	"strings"
	"sync"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// admit decides, without I/O, the terms a principal p of role is granted for a lease of pool
// pol asking ask: refused when the role may not lease from the pool, else the pool's terms
// narrowed by the grant's limits (poolspec.Policy.LeaseTerms, the one place they are worked
// out). Quotas and aliases are the store's (they need the other leases).
func admit(pol poolspec.Policy, p access.Principal, role access.Role, ask poolspec.LeaseAsk) (poolspec.LeaseTerms, error) {
	if !role.AllowsPool(pol.Name) {
		return poolspec.LeaseTerms{}, fmt.Errorf("role %s may lease from pools %s, not %s", p.Role, strings.Join(role.Pools, ", "), pol.Name)
	}
	ask.Owner, ask.GrantMaxTTL, ask.GrantMaxExtensions = p.Name, role.MaxTTLOrZero(), role.MaxExtensions
	return pol.LeaseTerms(ask), nil
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
