package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A lease is told of its holder's requests at most once per period, each lease on its own.
func TestLeaseActivityIsThrottledPerLease(t *testing.T) {
	var a leaseActivity
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	assert.True(t, a.due("lease-a", time.Minute, t0))
	assert.False(t, a.due("lease-a", time.Minute, t0.Add(59*time.Second)), "within the period: no signal")
	assert.True(t, a.due("lease-b", time.Minute, t0.Add(59*time.Second)), "another lease has its own period")
	assert.True(t, a.due("lease-a", time.Minute, t0.Add(time.Minute)))
	assert.True(t, a.due("lease-c", time.Minute, t0.Add(2*time.Hour)))
	assert.Len(t, a.sent, 1, "leases not heard of for an hour are forgotten")
}
