package instance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
)

// Only the sync errors seen within SyncErrorWindow count; the newest gives the reason.
func TestSyncStateKeepsRecentErrors(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	errs := []backends.SyncError{ // newest first, as backends report them
		{Reason: api.ReasonHostQuotaExceeded, Object: "Pod default/over", Message: "exceeded quota: full", Last: now.Add(-time.Minute)},
		{Reason: api.ReasonSyncDenied, Object: "Pod default/privileged", Message: "violates PodSecurity", Last: now.Add(-5 * time.Minute)},
		{Reason: api.ReasonSyncConflict, Object: "Service default/web", Message: "already exists", Last: now.Add(-SyncErrorWindow - time.Second)},
	}
	assert.Equal(t, &SyncState{Reason: api.ReasonHostQuotaExceeded, Message: "Pod default/over: exceeded quota: full", Objects: 2},
		syncStateOf(errs, now))
	assert.Equal(t, &SyncState{}, syncStateOf(errs[2:], now), "an error older than the window is over")
	assert.Equal(t, &SyncState{}, syncStateOf(nil, now), "nothing failed: synced")

	long := []backends.SyncError{{Reason: api.ReasonSyncFailed, Object: "Pod default/x", Message: strings.Repeat("m", 1000), Last: now}}
	assert.LessOrEqual(t, len(syncStateOf(long, now).Message), 304, "the message is bounded (it goes into workflow history)")
}
