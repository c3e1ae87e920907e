package leasecred

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kunobi-ninja/kobe/backends"
)

func TestCheck(t *testing.T) {
	assert.NoError(t, Check(backends.CredentialRequest{User: "lease-1", TTL: time.Hour}))
	assert.EqualError(t, Check(backends.CredentialRequest{User: "Lease_1", TTL: time.Hour}), `credential user "Lease_1": must be a DNS label`)
	assert.EqualError(t, Check(backends.CredentialRequest{User: "lease-1"}), "credential for lease-1: ttl must be positive")
	assert.Equal(t, "kobe-lease-lease-1", BindingName("lease-1"))
}
