package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
)

func (e *env) instance(id, pool string, phase api.InstancePhase, host, message string) {
	e.t.Helper()
	data, _ := json.Marshal(map[string]string{"message": message})
	require.NoError(e.t, e.st.UpsertInstance(context.Background(), store.Instance{ID: id, Pool: pool, Backend: "local", Host: host,
		Phase: phase, Endpoint: "https://127.0.0.1:1", Data: data}))
}

func (e *env) auditActions(target string) []string {
	e.t.Helper()
	evs, err := e.st.ListEvents(context.Background(), store.EventFilter{Target: target})
	require.NoError(e.t, err)
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Action+" "+ev.Actor+" "+ev.Result)
	}
	return out
}

// Quarantined instances through the API: operators and admins list and read them; a retry of
// the teardown goes to the pool's workflow, or, when the pool is gone, to a Teardown workflow the
// API starts itself; only an admin forgets one; every action is audited.
func TestQuarantinedInstances(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A real worker with the local backend on the server's queue runs the Teardown workflows.
	acts := testsuite.StartHostWorker(t, e.tc.Client, e.srv.TaskQueue, e.st, t.TempDir())
	e.pool("ci-a")
	e.startStubPool("ci-a", pool.Status{Name: "ci-a", Phase: "Healthy"})
	e.instance("ci-a-1", "ci-a", "Quarantined", acts.HostID, "deleting ci-a-1: kube-apiserver pid 42 still running")
	e.instance("ci-a-2", "ci-a", "Ready", acts.HostID, "")
	e.instance("gone-1", "gone", "Quarantined", acts.HostID, "deleting gone-1: permission denied")
	e.instance("ci-a-3", "ci-a", "Quarantined", acts.HostID, "")
	admin := e.token("root", "admin", time.Time{})
	operator := e.token("ops", "operator", time.Time{})
	ci := e.token("alice", "ci", time.Time{})
	auditor := e.token("audrey", "auditor", time.Time{})

	t.Run("list and get: operators and admins only", func(t *testing.T) {
		var all []map[string]any
		e.getJSON(operator, "GET", "/v1/instances", "", 200, &all)
		assert.Len(t, all, 4, "a bare array of every instance")
		var q []map[string]any
		e.getJSON(admin, "GET", "/v1/instances?phase=Quarantined&pool=ci-a", "", 200, &q)
		require.Len(t, q, 2)
		var one map[string]any
		e.getJSON(operator, "GET", "/v1/instances/ci-a-1", "", 200, &one)
		assert.Equal(t, "ci-a-1", one["id"])
		assert.Equal(t, "ci-a", one["pool"])
		assert.Equal(t, "local", one["backend"])
		assert.Equal(t, acts.HostID, one["host"])
		assert.Equal(t, "Quarantined", one["phase"])
		assert.Equal(t, "https://127.0.0.1:1", one["endpoint"])
		assert.Equal(t, "deleting ci-a-1: kube-apiserver pid 42 still running", one["message"])
		assert.NotEmpty(t, one["created_at"])
		assert.NotEmpty(t, one["updated_at"])
		for _, tok := range []string{ci, auditor} {
			status, raw := e.do(tok, "GET", "/v1/instances", "")
			assert.Equal(t, 403, status, "%s", raw)
			assert.Equal(t, "forbidden", e.reason(raw))
			status, _ = e.do(tok, "GET", "/v1/instances/ci-a-1", "")
			assert.Equal(t, 403, status)
		}
		status, raw := e.do(admin, "GET", "/v1/instances/nope", "")
		assert.Equal(t, 404, status)
		assert.Equal(t, "not_found", e.reason(raw))
		status, _ = e.do("", "GET", "/v1/instances", "")
		assert.Equal(t, 401, status)
	})

	t.Run("retry-teardown of an instance that is not Quarantined", func(t *testing.T) {
		status, raw := e.do(operator, "POST", "/v1/instances/ci-a-2/retry-teardown", "")
		assert.Equal(t, 409, status, "%s", raw)
		assert.Equal(t, "not_quarantined", e.reason(raw))
		assert.Contains(t, string(raw), "Ready")
		status, raw = e.do(ci, "POST", "/v1/instances/ci-a-1/retry-teardown", "")
		assert.Equal(t, 403, status, "%s", raw)
		status, _ = e.do(operator, "POST", "/v1/instances/nope/retry-teardown", "")
		assert.Equal(t, 404, status)
		assert.Empty(t, e.stubActions("ci-a"), "the pool was told nothing")
	})

	t.Run("retry-teardown goes to the running pool", func(t *testing.T) {
		var out map[string]any
		e.getJSON(operator, "POST", "/v1/instances/ci-a-1/retry-teardown", "", 202, &out)
		assert.Equal(t, "pool", out["via"])
		assert.Equal(t, []string{"retry-teardown ci-a-1 by ops"}, e.stubActions("ci-a"))
		assert.Contains(t, e.auditActions("ci-a-1"), "instance.retry_teardown ops accepted")
	})

	t.Run("retry-teardown of a pool that is gone runs a Teardown", func(t *testing.T) {
		var out map[string]any
		e.getJSON(admin, "POST", "/v1/instances/gone-1/retry-teardown", "", 202, &out)
		assert.Equal(t, "teardown", out["via"])
		id, _ := out["workflowId"].(string)
		require.NotEmpty(t, id)
		// The real Teardown ran on the host's queue: the local backend found nothing left and
		// the row is gone.
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, e.tc.Client.GetWorkflow(wctx, id, "").Get(wctx, nil))
		_, err := e.st.GetInstance(ctx, "gone-1")
		assert.True(t, errors.Is(err, store.ErrNotFound), "the row is removed: %v", err)
		assert.Contains(t, e.auditActions("gone-1"), "instance.retry_teardown root accepted")
		// Its input: the store row, on the queue of the instance's host, telling no pool.
		hist := e.tc.Client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		first, err := hist.Next()
		require.NoError(t, err)
		attrs := first.GetWorkflowExecutionStartedEventAttributes()
		assert.Equal(t, instance.TeardownWorkflowName, attrs.GetWorkflowType().GetName())
		var in instance.TeardownInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in))
		assert.Equal(t, instance.TeardownInput{Backend: "local", Spec: backends.InstanceSpec{ID: "gone-1", Pool: "gone"},
			Placement: instance.HostAssignment{HostID: acts.HostID, TaskQueue: instance.HostQueue(e.srv.TaskQueue, acts.HostID)}}, in)
		// A second retry starts another run, under another id.
		e.instance("gone-1", "gone", "Quarantined", acts.HostID, "again")
		var again map[string]any
		e.getJSON(admin, "POST", "/v1/instances/gone-1/retry-teardown", "", 202, &again)
		assert.NotEqual(t, id, again["workflowId"])
	})

	t.Run("forget: admin only, audited, the row goes", func(t *testing.T) {
		status, raw := e.do(operator, "DELETE", "/v1/instances/ci-a-3", "")
		assert.Equal(t, 403, status, "%s", raw)
		assert.Equal(t, "forbidden", e.reason(raw))
		status, raw = e.do(admin, "DELETE", "/v1/instances/ci-a-2", "")
		assert.Equal(t, 409, status, "a Ready instance is not forgotten: %s", raw)
		assert.Equal(t, "not_quarantined", e.reason(raw))

		status, raw = e.do(admin, "DELETE", "/v1/instances/ci-a-3", "")
		assert.Equal(t, 204, status, "%s", raw)
		assert.Empty(t, raw)
		_, err := e.st.GetInstance(ctx, "ci-a-3")
		assert.True(t, errors.Is(err, store.ErrNotFound), "the row is removed: %v", err)
		assert.Contains(t, e.stubActions("ci-a"), "forget-member ci-a-3 by root")
		assert.Contains(t, e.auditActions("ci-a-3"), "instance.forget root ok")
		status, _ = e.do(admin, "DELETE", "/v1/instances/ci-a-3", "")
		assert.Equal(t, 404, status, "forgotten")

		// force=true forgets an instance in any phase (a row left behind by an older kobe).
		status, raw = e.do(admin, "DELETE", "/v1/instances/ci-a-2?force=true", "")
		assert.Equal(t, 204, status, "%s", raw)
	})
}
