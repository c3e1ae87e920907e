package lease_test

import (
	"context"
	"database/sql"
	"github.com/kunobi-ninja/kobe/poolspec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
	"github.com/kunobi-ninja/kobe/pool"
	kobetest "github.com/kunobi-ninja/kobe/testsuite"
)

// The orphan reaper on real parts (an embedded Temporal server, kobe's worker, each store
// driver), run through its schedule as a worker sets it up, with a short grace: of three
// Pending leases it fails only the one admitted long ago whose workflow never started. A
// lease as old whose workflow runs (queued in its pool) and a lease admitted a moment ago
// without one (its start may be under way) are left alone. The orphan's quota and alias are
// free again, its end audited once, and a second run finds nothing to do.
func TestOrphanReaperFailsOnlyOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Temporal server; skipped with -short")
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dsn, raw := orphanTestStore(t, driver)
			st, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			tmp := kobetest.StartTemporal(t)
			const queue, heldPool = "orphans", "held"
			kobetest.StartHostWorker(t, tmp.Client, queue, st, t.TempDir())
			// The pool's stand-in takes claims and never answers: a lease claiming from it
			// stays Pending, its workflow waiting in the queue.
			_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID(heldPool), TaskQueue: queue},
				doctor.WorkflowName, doctor.Input{ProbeID: queue, Hold: time.Hour})
			require.NoError(t, err)

			admit := func(id, principal string) error {
				_, _, err := st.AdmitLease(ctx, store.AdmitRequest{Lease: store.Lease{ID: id, Pool: heldPool, Principal: principal,
					Role: "dev", Alias: "mine", TTL: time.Hour}, MaxPerPrincipal: 1})
				return err
			}
			tenMinutesAgo := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Microsecond)
			backdate := func(id string) {
				q := `UPDATE leases SET created_at = ? WHERE id = ?`
				if driver == "postgres" {
					q = `UPDATE leases SET created_at = $1 WHERE id = $2`
				}
				_, err := raw.ExecContext(ctx, q, tenMinutesAgo, id)
				require.NoError(t, err)
			}
			// Its API died right after admitting it, ten minutes ago.
			require.NoError(t, admit("lease-orphan", "alice"))
			backdate("lease-orphan")
			// As old, but its workflow started and waits in the pool's queue.
			require.NoError(t, admit("lease-queued", "bob"))
			_, err = tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: leasestart.WorkflowID("lease-queued"), TaskQueue: queue,
				WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE},
				lease.WorkflowName, lease.Input{LeaseID: "lease-queued", Pool: heldPool, Principal: "bob",
					LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour}})
			require.NoError(t, err)
			backdate("lease-queued")
			// Admitted a moment ago: its API may be starting it now.
			require.NoError(t, admit("lease-young", "carol"))

			require.NoError(t, lease.EnsureOrphanSchedule(ctx, tmp.Client, queue, 30*time.Second))
			res := lastReap(ctx, t, tmp.Client, "")
			assert.Equal(t, []string{"lease-orphan"}, res.Reaped)
			assert.Empty(t, res.Kept)
			assert.Empty(t, res.Missed)

			got, err := st.GetLease(ctx, "lease-orphan")
			require.NoError(t, err)
			assert.Equal(t, api.LeaseFailed, got.Phase)
			assert.Equal(t, api.ReasonOrphaned, got.Reason)
			events, err := st.ListEvents(ctx, store.EventFilter{Target: "lease-orphan", Action: "lease.failed"})
			require.NoError(t, err)
			require.Len(t, events, 1)
			assert.Equal(t, "kobe", events[0].Actor)
			assert.JSONEq(t, `{"pool":"held","instance":"","reason":"orphaned"}`, string(events[0].Detail))
			for _, id := range []string{"lease-queued", "lease-young"} {
				l, err := st.GetLease(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, api.LeasePending, l.Phase, "%s is not an orphan", id)
			}
			require.NoError(t, admit("lease-retry", "alice"), "the orphan's quota and alias are free again")
			require.ErrorIs(t, admit("lease-bob-again", "bob"), store.ErrAliasTaken, "the queued lease still holds its own")

			// A second worker starting with another grace updates the schedule (no second
			// one) and its run finds no orphan left.
			first := lastRunID(ctx, t, tmp.Client)
			// A run's workflow id ends in the second it was started at: the next trigger
			// comes in a later second, or it would be taken for the same run.
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
			require.NoError(t, lease.EnsureOrphanSchedule(ctx, tmp.Client, queue, 45*time.Second))
			desc, err := tmp.Client.ScheduleClient().GetHandle(ctx, lease.OrphanScheduleID).Describe(ctx)
			require.NoError(t, err)
			assert.Contains(t, desc.Schedule.State.Note, "45s")
			require.Len(t, desc.Schedule.Spec.Intervals, 1)
			assert.Equal(t, lease.OrphanReapInterval, desc.Schedule.Spec.Intervals[0].Every)
			assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, desc.Schedule.Policy.Overlap, "never two reapers at once")
			res = lastReap(ctx, t, tmp.Client, first)
			assert.Empty(t, res.Reaped)
		})
	}
}

// orphanTestStore is a fresh store of the driver, and a raw connection to its database (the
// test backdates admissions through it).
func orphanTestStore(t *testing.T, driver string) (string, *sql.DB) {
	t.Helper()
	var dsn, rawDriver, rawDSN string
	switch driver {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "kobe.db")
		dsn, rawDriver, rawDSN = "sqlite://"+path, "sqlite", "file:"+path+"?_pragma=busy_timeout(5000)"
	case "postgres":
		dsn = kobetest.PostgresDSN(t)
		rawDriver, rawDSN = "pgx", dsn
	}
	raw, err := sql.Open(rawDriver, rawDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	return dsn, raw
}

// lastRunID is the workflow id of the schedule's newest run ("" if none).
func lastRunID(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	d, err := c.ScheduleClient().GetHandle(ctx, lease.OrphanScheduleID).Describe(ctx)
	require.NoError(t, err)
	if n := len(d.Info.RecentActions); n > 0 {
		return d.Info.RecentActions[n-1].StartWorkflowResult.WorkflowID
	}
	return ""
}

// lastReap waits for a run of the reaper's schedule newer than the run after (its workflow
// id; "" for any) to complete, and returns its result.
func lastReap(ctx context.Context, t *testing.T, c client.Client, after string) lease.ReapResult {
	t.Helper()
	var res lease.ReapResult
	require.Eventually(t, func() bool {
		d, err := c.ScheduleClient().GetHandle(ctx, lease.OrphanScheduleID).Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		run := d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult
		if run.WorkflowID == after {
			return false
		}
		return c.GetWorkflow(ctx, run.WorkflowID, run.FirstExecutionRunID).Get(ctx, &res) == nil
	}, time.Minute, 200*time.Millisecond)
	return res
}
