package poolspec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/poolspec"
)

// spec.certificates: defaults, days, and the values refused at apply with the field named.
func TestCertificates(t *testing.T) {
	validate := func(extra string) (poolspec.Policy, error) {
		p, err := poolspec.Parse([]byte(base + extra))
		require.NoError(t, err)
		return p.Validate()
	}
	pol, err := validate("")
	require.NoError(t, err)
	assert.Equal(t, 30*24*time.Hour, pol.RecycleBefore, "default 30d")
	assert.Zero(t, pol.CertificateValidity, "the backend's default")

	pol, err = validate("  certificates: {validity: 90d, recycleBefore: 7d}\n")
	require.NoError(t, err)
	assert.Equal(t, 90*24*time.Hour, pol.CertificateValidity)
	assert.Equal(t, 7*24*time.Hour, pol.RecycleBefore)

	pol, err = validate("  certificates: {validity: 3m, recycleBefore: 2m}\n")
	require.NoError(t, err, "short validity, for tests")
	assert.Equal(t, 3*time.Minute, pol.CertificateValidity)

	for extra, want := range map[string]string{
		"  certificates: {validity: 3m}\n":                                     "spec.certificates.recycleBefore: required",
		"  certificates: {validity: 3m, recycleBefore: 3m}\n":                  "must be shorter than validity",
		"  certificates: {validity: 10s, recycleBefore: 5s}\n":                 "spec.certificates.validity: 10s must be between",
		"  certificates: {validity: soon}\n":                                   `spec.certificates.validity: "soon" is not a duration`,
		"  certificates: {recycleBefore: 0s}\n":                                "spec.certificates.recycleBefore: must be positive",
		"  certificates: {recycleBefore: xd}\n":                                "spec.certificates.recycleBefore",
		"  certificates: {lifetime: 3m}\n":                                     "spec.certificates.lifetime",
		"  readinessGates: [{type: X509Valid}]\n":                              "spec.readinessGates[0].minRemaining: required for a X509Valid gate",
		"  readinessGates: [{type: X509Valid, minRemaining: 0s}]\n":            "spec.readinessGates[0].minRemaining: must be positive",
		"  readinessGates: [{type: NodesReady, count: 1, minRemaining: 1h}]\n": "minRemaining: not used by a NodesReady gate",
	} {
		p, err := poolspec.Parse([]byte(base + extra))
		if err == nil {
			_, err = p.Validate()
		}
		require.Error(t, err, extra)
		assert.Contains(t, err.Error(), want, extra)
	}
	pol, err = validate("  readinessGates: [{type: X509Valid, minRemaining: 7d}]\n")
	require.NoError(t, err)
	assert.Equal(t, poolspec.Duration("7d"), pol.Gates[0].MinRemaining)
}

// spec.certificates is refused for a backend that cannot report or re-issue certificates.
func TestCertificatesRefusedWithoutCertManager(t *testing.T) {
	p, err := poolspec.Parse([]byte("apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: h}\nspec:\n  backend: {type: k3s}\n  cluster: {version: v1.33.1+k3s1}\n  certificates: {recycleBefore: 7d}\n"))
	require.NoError(t, err)
	_, err = p.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.certificates is not supported by the k3s backend")
}
