package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
)

// The reaper's decision: only a lease that is Pending, older than the grace and without any
// workflow (running or closed) is an orphan. A queued lease has its workflow (waiting in its
// pool's queue) however old it is; a young one may be starting.
func TestIsOrphan(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	const grace = 2 * time.Minute
	for _, c := range []struct {
		name     string
		phase    api.LeasePhase
		age      time.Duration
		workflow bool
		want     bool
	}{
		{"pending, past the grace, no workflow", api.LeasePending, 10 * time.Minute, false, true},
		{"pending, just past the grace, no workflow", api.LeasePending, grace + time.Millisecond, false, true},
		{"pending, exactly the grace old: not yet", api.LeasePending, grace, false, false},
		{"pending, young, no workflow: may be starting", api.LeasePending, 30 * time.Second, false, false},
		{"pending, old, its workflow exists (queued)", api.LeasePending, time.Hour, true, false},
		{"pending, young, its workflow exists", api.LeasePending, time.Second, true, false},
		{"bound, old, no workflow", api.LeaseBound, time.Hour, false, false},
		{"released, old, no workflow", api.LeaseReleased, time.Hour, false, false},
		{"expired, old, no workflow", api.LeaseExpired, time.Hour, false, false},
		{"failed, old, no workflow", api.LeaseFailed, time.Hour, false, false},
		{"pending, admitted in the future (clocks apart)", api.LeasePending, -time.Minute, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := store.Lease{ID: "lease-x", Phase: c.phase, CreatedAt: now.Add(-c.age)}
			assert.Equal(t, c.want, lease.IsOrphan(l, now, grace, c.workflow))
		})
	}
}
