package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// The terms a principal is granted are its pool's narrowed by its role (poolspec's LeaseTerms,
// whose own test covers the sleep and wake terms); a role that may not use the pool is refused.
func TestAdmitClampsToTheTighterOfPoolAndRole(t *testing.T) {
	policy, err := access.ParsePolicy([]byte(`roles:
  open: {permissions: [lease]}
  tight: {permissions: [lease], maxTtl: 2h, maxExtensions: 1}
  loose: {permissions: [lease], maxTtl: 10h, maxExtensions: 9}
  ci-only: {permissions: [lease], pools: ["ci-*"]}
`))
	require.NoError(t, err)
	role := func(name string) access.Role { r, _ := policy.Role(name); return r }
	terms := func(ttl, ceiling time.Duration, extensions int) poolspec.LeaseTerms {
		return poolspec.LeaseTerms{TTL: ttl, MaxTTL: ceiling, MaxExtensions: extensions,
			ResumeTimeout: poolspec.DefaultResumeTimeout, CertificatesMinRemaining: poolspec.DefaultRecycleBefore}
	}
	for name, tc := range map[string]struct {
		role    string
		pool    string
		ttl     time.Duration
		want    poolspec.LeaseTerms
		refused string
	}{
		"the pool's default TTL":             {role: "open", pool: "ci", want: terms(time.Hour, 4*time.Hour, 3)},
		"a requested TTL within the ceiling": {role: "open", pool: "ci", ttl: 3 * time.Hour, want: terms(3*time.Hour, 4*time.Hour, 3)},
		"a TTL past the pool's ceiling":      {role: "open", pool: "ci", ttl: 9 * time.Hour, want: terms(4*time.Hour, 4*time.Hour, 3)},
		"the role's tighter ceiling and budget": {role: "tight", pool: "ci", ttl: 3 * time.Hour,
			want: terms(2*time.Hour, 2*time.Hour, 1)},
		"a looser role does not widen the pool": {role: "loose", pool: "ci", ttl: 9 * time.Hour,
			want: terms(4*time.Hour, 4*time.Hour, 3)},
		"a pool the role may use": {role: "ci-only", pool: "ci-a", want: terms(time.Hour, 4*time.Hour, 3)},
		"a pool the role may not": {role: "ci-only", pool: "prod", refused: "role ci-only may lease from pools ci-*, not prod"},
	} {
		t.Run(name, func(t *testing.T) {
			pol := poolspec.Policy{Name: tc.pool, TTL: time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3}
			got, err := admit(pol, access.Principal{Name: "ann", Role: tc.role}, role(tc.role), poolspec.LeaseAsk{TTL: tc.ttl})
			if tc.refused != "" {
				assert.EqualError(t, err, tc.refused)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A pool's manifest is parsed once per apply: a second read of the same generation is served
// from the cache, a new generation is parsed again.
func TestPolicyCacheFollowsTheGeneration(t *testing.T) {
	var c policyCache
	_, ok := c.get("ci", 1)
	assert.False(t, ok)
	c.put("ci", 1, poolspec.Policy{Name: "ci", TTL: time.Hour})
	got, ok := c.get("ci", 1)
	assert.True(t, ok)
	assert.Equal(t, time.Hour, got.TTL)
	_, ok = c.get("ci", 2)
	assert.False(t, ok, "an apply since: parsed again")
}
