package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Only a Bound lease sleeps or wakes: an ended one is refused with not_ready (and nothing is
// sent to a workflow); another principal's lease is not found.
func TestLeaseSleepRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ci-a")
	tok := e.token("alice", "ci", time.Time{})
	require.NoError(t, e.st.UpsertLease(ctx, store.Lease{ID: "lease-s1", Pool: "ci-a", Principal: "alice", Role: "ci", Phase: api.LeaseReleased, TTL: time.Hour}))
	for _, verb := range []string{"sleep", "wake"} {
		status, raw := e.do(tok, "POST", "/v1/leases/lease-s1/"+verb, "")
		assert.Equal(t, 409, status, "%s: %s", verb, raw)
		assert.Equal(t, string(api.ReasonNotReady), e.reason(raw))
		status, _ = e.do(e.token("bob-"+verb, "ci", time.Time{}), "POST", "/v1/leases/lease-s1/"+verb, "")
		assert.Equal(t, 404, status, "someone else's lease")
	}
}
