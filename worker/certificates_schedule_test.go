package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// The certificate workflow's schedule on a real (embedded) Temporal: created once (a second
// worker's call finds it), listed through the client, daily, and triggered at start: the sweep
// runs and reaches the pools in the store.
func TestCertificateScheduleOnTemporal(t *testing.T) {
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "certs", s, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.UpsertPool(ctx, store.Pool{Name: "nowhere", Backend: "local", Spec: []byte(`{}`)}))
	require.NoError(t, pool.EnsureCertificateSchedule(ctx, tmp.Client, "certs"))
	require.NoError(t, pool.EnsureCertificateSchedule(ctx, tmp.Client, "certs"), "a second worker starting finds it")

	it, err := tmp.Client.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	require.NoError(t, err)
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	assert.Contains(t, ids, pool.CertificateScheduleID)
	desc, err := tmp.Client.ScheduleClient().GetHandle(ctx, pool.CertificateScheduleID).Describe(ctx)
	require.NoError(t, err)
	require.Len(t, desc.Schedule.Spec.Intervals, 1)
	assert.Equal(t, pool.CertificateSweepInterval, desc.Schedule.Spec.Intervals[0].Every)

	// The run triggered at start completes: its result names the pool it could not reach.
	var res pool.SweepResult
	require.Eventually(t, func() bool {
		d, err := tmp.Client.ScheduleClient().GetHandle(ctx, pool.CertificateScheduleID).Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		run := tmp.Client.GetWorkflow(ctx, d.Info.RecentActions[0].StartWorkflowResult.WorkflowID, d.Info.RecentActions[0].StartWorkflowResult.FirstExecutionRunID)
		return run.Get(ctx, &res) == nil
	}, 45*time.Second, 200*time.Millisecond)
	assert.Equal(t, []string{"nowhere"}, res.Missed)
}
