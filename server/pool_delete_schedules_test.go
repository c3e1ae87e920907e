package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// schedulesOf lists the ids of the Temporal schedules of pool name.
func schedulesOf(t *testing.T, ctx context.Context, c client.Client, name string) []string {
	t.Helper()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	require.NoError(t, err)
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if strings.HasPrefix(e.ID, pool.ScheduleIDPrefix(name)) {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// A pool's schedules go with the pool, whatever state its workflow is in, on a real (embedded)
// Temporal server through the API. A pool with a sleep and a wake schedule whose workflow is
// no longer running (terminated here; an operator's, or a crash's, doing) is deleted: its
// schedules are deleted with its row. And a pool re-created under the name of one whose
// schedules were left behind (by a kobe before this one) inherits none of them: its first run
// makes Temporal's schedules of the pool exactly those it wants, here none.
func TestDeletedPoolTakesItsSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	testsuite.StartHostWorker(t, tmp.Client, "delsched", st, t.TempDir())
	pol, err := access.ParsePolicy([]byte("roles:\n  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}\n"))
	require.NoError(t, err)
	s := &server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "delsched", InsecureNoAuth: true, Policy: pol}
	h := s.Handler()
	call := func(method, path, body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec.Code
	}
	const head = `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"nightly"},
		"spec":{"size":0,"ttl":"10m","backend":{"type":"local"},"cluster":{"version":"v1.37.2"}`
	withSchedules := head + `,"sleep":{"schedule":"0 20 * * 1-5","wakeSchedule":"0 8 * * 1-5","timezone":"Europe/Berlin"}}}`
	without := head + `}}`
	prefix := pool.ScheduleIDPrefix("nightly")
	both := []string{prefix + "sleep", prefix + "wake"}
	madeBoth := func() bool { return slices.Equal(schedulesOf(t, ctx, tmp.Client, "nightly"), both) }
	stop := func() {
		require.NoError(t, tmp.Client.TerminateWorkflow(ctx, pool.WorkflowID("nightly"), "", "the test stops the pool's workflow"))
		desc, err := tmp.Client.DescribeWorkflowExecution(ctx, pool.WorkflowID("nightly"), "")
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, desc.GetWorkflowExecutionInfo().GetStatus())
	}

	// Deleted while its workflow is not running: the row and the schedules go at once.
	require.Equal(t, http.StatusCreated, call("PUT", "/v1/pools/nightly", withSchedules))
	require.Eventually(t, madeBoth, time.Minute, 100*time.Millisecond)
	stop()
	require.Equal(t, http.StatusNoContent, call("DELETE", "/v1/pools/nightly", ""))
	assert.Equal(t, http.StatusNotFound, call("GET", "/v1/pools/nightly", ""))
	assert.Empty(t, schedulesOf(t, ctx, tmp.Client, "nightly"), "the deleted pool's schedules are gone with it")

	// Schedules left behind by an older kobe (made again here the way it left them: the pool's
	// row forgotten, its schedules not), then the pool re-created without any.
	require.Equal(t, http.StatusCreated, call("PUT", "/v1/pools/nightly", withSchedules))
	require.Eventually(t, madeBoth, time.Minute, 100*time.Millisecond)
	stop()
	require.NoError(t, st.DeletePool(ctx, "nightly"))
	require.Equal(t, http.StatusCreated, call("PUT", "/v1/pools/nightly", without))
	require.Eventually(t, func() bool { return len(schedulesOf(t, ctx, tmp.Client, "nightly")) == 0 }, time.Minute, 100*time.Millisecond,
		"the re-created pool wants no schedule: the old ones are deleted, none acts on it")
}
