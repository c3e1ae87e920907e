package readiness_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/internal/readiness"
)

// X509Valid's judgement: the first certificate expiring within minRemaining is named, and the
// error says the gate cannot pass by waiting.
func TestRemainingAtLeast(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	certs := []readiness.Certificate{
		{Kind: "ca", Subject: "kobe-x-ca", NotAfter: now.Add(24 * time.Hour)},
		{Kind: "client", Subject: "kobe-admin", NotAfter: now.Add(3 * time.Minute)},
		{Kind: "serving", Subject: "kube-apiserver", NotAfter: now.Add(2 * time.Minute)},
	}
	require.NoError(t, readiness.RemainingAtLeast(certs, now, time.Minute))
	err := readiness.RemainingAtLeast(certs, now, 10*time.Minute)
	require.Error(t, err)
	assert.True(t, errors.Is(err, readiness.ErrNeverPasses))
	assert.Contains(t, err.Error(), `the client certificate "kobe-admin" expires at 2026-12-01T12:03:00Z, in 3m0s: less than the 10m0s required`)
	assert.Error(t, readiness.RemainingAtLeast(certs[:1], now.Add(25*time.Hour), 0), "an expired certificate fails any minRemaining")
}
