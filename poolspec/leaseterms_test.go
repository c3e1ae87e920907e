package poolspec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// The terms of a lease are the pool's, narrowed by the grant of who asks, and its sleep and wake
// settings are the pool's too: every case below starts from a manifest, as a lease's do.
func TestLeaseTermsOfAPool(t *testing.T) {
	pol := policyOf(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: terms}
spec:
  cluster: {version: v1.37.2}
  ttl: 1h
  maxTtl: 4h
  maxExtensions: 3
  scaling: {minReady: 1, maxClusters: 2, resumeTimeout: 7m}
  certificates: {recycleBefore: 10d}
  sleep:
    afterInactivity: 20m
    exclude: [{owner: robot}]
`)
	two := 2
	for _, tc := range []struct {
		name string
		ask  poolspec.LeaseAsk
		want poolspec.LeaseTerms
	}{
		{"the pool's defaults", poolspec.LeaseAsk{Owner: "ann"},
			poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3, AfterInactivity: 20 * time.Minute,
				ResumeTimeout: 7 * time.Minute, CertificatesMinRemaining: 10 * 24 * time.Hour}},
		{"a ttl asked within the ceiling", poolspec.LeaseAsk{Owner: "ann", TTL: 2 * time.Hour},
			poolspec.LeaseTerms{TTL: 2 * time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3, AfterInactivity: 20 * time.Minute,
				ResumeTimeout: 7 * time.Minute, CertificatesMinRemaining: 10 * 24 * time.Hour}},
		{"a ttl past the ceiling is clamped", poolspec.LeaseAsk{Owner: "ann", TTL: 9 * time.Hour},
			poolspec.LeaseTerms{TTL: 4 * time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3, AfterInactivity: 20 * time.Minute,
				ResumeTimeout: 7 * time.Minute, CertificatesMinRemaining: 10 * 24 * time.Hour}},
		{"a tighter grant narrows the ceiling, the ttl and the budget",
			poolspec.LeaseAsk{Owner: "ann", TTL: 3 * time.Hour, GrantMaxTTL: 90 * time.Minute, GrantMaxExtensions: &two},
			poolspec.LeaseTerms{TTL: 90 * time.Minute, MaxTTL: 90 * time.Minute, MaxExtensions: 2, AfterInactivity: 20 * time.Minute,
				ResumeTimeout: 7 * time.Minute, CertificatesMinRemaining: 10 * 24 * time.Hour}},
		{"a looser grant changes nothing", poolspec.LeaseAsk{Owner: "ann", GrantMaxTTL: 48 * time.Hour},
			poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3, AfterInactivity: 20 * time.Minute,
				ResumeTimeout: 7 * time.Minute, CertificatesMinRemaining: 10 * 24 * time.Hour}},
		{"an excluded owner never sleeps by inactivity", poolspec.LeaseAsk{Owner: "robot"},
			poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 4 * time.Hour, MaxExtensions: 3,
				ResumeTimeout: 7 * time.Minute, CertificatesMinRemaining: 10 * 24 * time.Hour}},
	} {
		assert.Equal(t, tc.want, pol.LeaseTerms(tc.ask), tc.name)
	}
}

// A pool that says nothing of them gets the documented defaults: ttl 2h, maxTtl 24h, two
// extensions, no sleep, a 5m resume and the default certificate horizon.
func TestLeaseTermsOfAPoolWithDefaults(t *testing.T) {
	pol := policyOf(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: plain}
spec: {size: 1, cluster: {version: v1.37.2}}
`)
	assert.Equal(t, poolspec.LeaseTerms{TTL: 2 * time.Hour, MaxTTL: poolspec.DefaultMaxTTL, MaxExtensions: 2,
		ResumeTimeout: poolspec.DefaultResumeTimeout, CertificatesMinRemaining: poolspec.DefaultRecycleBefore},
		pol.LeaseTerms(poolspec.LeaseAsk{Owner: "ann"}))
	// A policy stored before resumeTimeout existed still gives a wake a bound.
	assert.Equal(t, poolspec.DefaultResumeTimeout, poolspec.Policy{}.LeaseTerms(poolspec.LeaseAsk{}).ResumeTimeout)
}

func TestWakeCertificateMinimum(t *testing.T) {
	assert.Equal(t, poolspec.DefaultRecycleBefore, poolspec.Policy{}.WakeCertificateMinimum())
	assert.Equal(t, 10*time.Second, poolspec.Policy{RecycleBefore: 10 * time.Second}.WakeCertificateMinimum())
	assert.Equal(t, 40*24*time.Hour, poolspec.Policy{RecycleBefore: 10 * time.Second,
		Gates: []poolspec.ReadinessGate{{Type: "CRDExists", Name: "x"}, {Type: "X509Valid", MinRemaining: "40d"}}}.WakeCertificateMinimum())
}

func policyOf(t *testing.T, manifest string) poolspec.Policy {
	t.Helper()
	pol, err := poolspec.ParseStored([]byte(manifest))
	require.NoError(t, err)
	return pol
}
