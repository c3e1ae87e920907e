package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kunobi-ninja/kobe/backends"
)

// The binary's backends that can prepare a member's lease credential (a warm bind answers
// without calling the member). Not capi yet: the API server of the workload clusters it is
// tested with (CAPD's in-memory one) does not authenticate, so nothing here could prove that
// a prepared token works and is refused once revoked.
func TestWhichBackendsWarmBind(t *testing.T) {
	got := map[string]bool{}
	for _, c := range backends.Matrix() {
		got[c.Backend] = c.WarmBind
	}
	assert.Equal(t, map[string]bool{"local": true, "k3s": true, "k0s": true, "vcluster": true, "capi": false}, got)
}
