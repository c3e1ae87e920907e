package poolspec

import "time"

// LeaseTerms are what a pool's policy grants one lease: worked out once, by Policy.LeaseTerms,
// when the lease is admitted, and carried in its workflow's start input (leasestart.Input
// embeds them, so their JSON names are the input's own). The lease decides by them for its
// whole life; the API and the pool's schedules never read the pool's policy again for a lease.
//
// A lease keeps the terms it was admitted under: a pool applied again with other terms governs
// its new leases, not those already held.
type LeaseTerms struct {
	// TTL is the lease's time from its bind: the one asked for (the pool's spec.ttl when none
	// was), at most MaxTTL.
	TTL time.Duration `json:"ttl"`
	// MaxTTL is the ceiling of its expiry from its bind, extensions included: the pool's
	// spec.maxTtl, or the principal's grant's maxTtl when that is shorter.
	MaxTTL time.Duration `json:"maxTtl"`
	// MaxExtensions is its extension budget: the pool's spec.maxExtensions, or the grant's when
	// that is smaller.
	MaxExtensions int `json:"maxExtensions"`
	// AfterInactivity, when set, puts the Bound lease to sleep once nothing was seen of it for
	// that long (spec.sleep.afterInactivity, zero when spec.sleep.exclude matches the lease).
	AfterInactivity time.Duration `json:"afterInactivity,omitempty"`
	// ResumeTimeout bounds each wake of its instance (spec.scaling.resumeTimeout), and
	// CertificatesMinRemaining is how long the instance's certificates must still be valid
	// after a wake (Policy.WakeCertificateMinimum). Zero in leases admitted by v0.1.0: their
	// wakes use the defaults (poolspec.DefaultResumeTimeout, DefaultRecycleBefore).
	ResumeTimeout            time.Duration `json:"resumeTimeout,omitempty"`
	CertificatesMinRemaining time.Duration `json:"certificatesMinRemaining,omitempty"`
}

// LeaseAsk is what a new lease asks of its pool's terms, and the limits of who asks.
type LeaseAsk struct {
	// TTL is the ttl asked for; zero takes the pool's spec.ttl.
	TTL time.Duration
	// Owner, Alias and Metadata are the lease's, matched against spec.sleep.exclude.
	Owner    string
	Alias    string
	Metadata map[string]string
	// GrantMaxTTL and GrantMaxExtensions are the limits of the principal's grant (its role or
	// its OIDC claim rule): zero and nil are none.
	GrantMaxTTL        time.Duration
	GrantMaxExtensions *int
}

// LeaseTerms are the terms of a lease of this pool that asks ask: the TTL asked (or the pool's)
// clamped to the tighter of the pool's and the grant's ceilings, the smaller of their extension
// budgets, the inactivity after which it sleeps (unless excluded), and its wakes' bounds.
func (p Policy) LeaseTerms(ask LeaseAsk) LeaseTerms {
	t := LeaseTerms{MaxTTL: p.MaxTTL, MaxExtensions: p.MaxExtensions, ResumeTimeout: p.ResumeTimeout,
		CertificatesMinRemaining: p.WakeCertificateMinimum()}
	if ask.GrantMaxTTL > 0 && ask.GrantMaxTTL < t.MaxTTL {
		t.MaxTTL = ask.GrantMaxTTL
	}
	if ask.GrantMaxExtensions != nil {
		t.MaxExtensions = min(t.MaxExtensions, *ask.GrantMaxExtensions)
	}
	t.TTL = ask.TTL
	if t.TTL == 0 {
		t.TTL = p.TTL
	}
	t.TTL = min(t.TTL, t.MaxTTL)
	if t.ResumeTimeout <= 0 {
		t.ResumeTimeout = DefaultResumeTimeout // a policy resolved before spec.scaling.resumeTimeout
	}
	t.AfterInactivity = p.Sleep.InactivityFor(ask.Owner, ask.Alias, ask.Metadata)
	return t
}

// WakeCertificateMinimum is how long a woken member's certificates must still be valid for its
// pool, or the wake re-issues them: the longer of the pool's recycleBefore (the certificate
// workflow's horizon: what it would re-issue anyway; DefaultRecycleBefore in a policy that
// predates it) and the minRemaining of its X509Valid readiness gates (what the pool refuses to
// hand out).
func (p Policy) WakeCertificateMinimum() time.Duration {
	need := p.RecycleBefore
	if need <= 0 {
		need = DefaultRecycleBefore
	}
	for _, g := range p.Gates {
		if g.Type != "X509Valid" {
			continue
		}
		if d, err := ParseDays("minRemaining", g.MinRemaining); err == nil && d > need {
			need = d
		}
	}
	return need
}
