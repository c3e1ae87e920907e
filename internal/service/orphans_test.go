package service_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// The review's item 12 (issue 39, item 10): an API that dies between a lease's admission and
// its start leaves a Pending row that no workflow will ever end. Without an idempotency key
// the client's retry is a new lease, refused while the orphan holds the principal's quota and
// its alias. A `kobe worker` schedules the orphan reaper when it starts (and runs it at
// once): the row is failed with reason orphaned, its lease.failed event written, and the
// quota and the alias are free again. Real embedded Temporal, the real worker process, a real
// store file.
func TestWorkerReapsAnOrphanedPendingLease(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	path := filepath.Join(t.TempDir(), "kobe.db")
	dsn := "sqlite://" + path
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	admit := func(id string) error {
		_, _, err := st.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: id, Pool: "ci", Principal: "alice", Role: "dev",
			Alias: "mine", TTL: time.Hour}, MaxPerPrincipal: 1})
		return err
	}
	require.NoError(t, admit("lease-orphan"))
	require.ErrorIs(t, admit("lease-retry"), store.ErrAliasTaken, "the orphan holds the alias")
	// The API died ten minutes ago, right after the admission: well past any grace.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	_, err = raw.ExecContext(ctx, `UPDATE leases SET created_at = ?, updated_at = ? WHERE id = ?`,
		time.Now().Add(-10*time.Minute).UTC().Truncate(time.Microsecond), time.Now().Add(-10*time.Minute).UTC().Truncate(time.Microsecond), "lease-orphan")
	require.NoError(t, err)

	c := config.Default()
	c.Store = dsn
	c.Temporal.Address = tmp.Address
	c.Temporal.TaskQueue = "kobe-orphans"
	c.MetricsAddress = "127.0.0.1:0"
	c.StateDir = t.TempDir()
	start(t, c, config.ModeWorker)

	var got store.Lease
	deadline := time.Now().Add(time.Minute)
	for {
		got, err = st.GetLease(ctx, "lease-orphan")
		require.NoError(t, err)
		if got.Phase != api.LeasePending || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, api.LeaseFailed, got.Phase, "the orphaned lease is failed within a minute of the worker's start (it stays %s)", got.Phase)
	assert.Equal(t, api.ReasonOrphaned, got.Reason)
	events, err := st.ListEvents(ctx, store.EventFilter{Target: "lease-orphan", Action: "lease.failed"})
	require.NoError(t, err)
	require.Len(t, events, 1, "the lease's end is audited once")
	assert.Contains(t, string(events[0].Detail), `"reason":"orphaned"`)
	require.NoError(t, admit("lease-retry"), "the quota and the alias are free again")
}
