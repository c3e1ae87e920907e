package testsuite_test

import (
	"context"
	"fmt"
	"github.com/kunobi-ninja/kobe/poolspec"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// memberWorker runs the real Pool and Lease workflows on a real Temporal server, with member
// workflows and backend activities that succeed at once: what is under test is the pool's and
// the leases' own bookkeeping, at a pace no real cluster allows.
func memberWorker(t *testing.T, c client.Client, queue string) {
	t.Helper()
	memberWorkerWith(t, c, queue, memberOptions{})
}

// memberOptions change memberWorker's members: prepared lease credentials (warm binds), and
// the thaw activity (nil: 300 ms, then done).
type memberOptions struct {
	prepared bool
	thaw     func(context.Context, instance.BackendRequest) error
}

func memberWorkerWith(t *testing.T, c client.Client, queue string, o memberOptions) {
	t.Helper()
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	w.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, in instance.ProvisionInput) (instance.ProvisionResult, error) {
		place := instance.HostAssignment{HostID: "h", TaskQueue: queue}
		err := workflow.SignalExternalWorkflow(ctx, in.NotifyPool, "", instance.SignalMemberReady,
			instance.MemberReport{InstanceID: in.Spec.ID, Placement: place, Endpoint: "https://" + in.Spec.ID, Prepared: o.prepared}).Get(ctx, nil)
		return instance.ProvisionResult{Placement: place}, err
	}, workflow.RegisterOptions{Name: instance.ProvisionWorkflowName})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, in instance.TeardownInput) error {
		return workflow.SignalExternalWorkflow(ctx, in.NotifyPool, "", instance.SignalMemberGone,
			instance.MemberReport{InstanceID: in.Spec.ID, Placement: in.Placement}).Get(ctx, nil)
	}, workflow.RegisterOptions{Name: instance.TeardownWorkflowName})
	ok := func(name string, fn any) { w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	ok("RecordLease", func(context.Context, lease.View) error { return nil })
	ok("IssueLeaseCredentials", func(context.Context, lease.CredentialRequest) error { return nil })
	ok("RevokeLeaseCredentials", func(context.Context, lease.CredentialRequest) error { return nil })
	ok("RecordInstance", func(context.Context, instance.Record) error { return nil })
	ok("ForgetPool", func(context.Context, string) error { return nil })
	// A freeze or thaw takes as long as it can on a loaded host: long enough for signals to come
	// while the pool waits for one.
	slow := func(context.Context, instance.BackendRequest) error { time.Sleep(300 * time.Millisecond); return nil }
	ok("BackendFreeze", slow)
	if o.thaw != nil {
		ok("BackendThaw", o.thaw)
	} else {
		ok("BackendThaw", slow)
	}
	ok("CheckHealth", func(_ context.Context, req instance.HealthRequest) ([]instance.HealthResult, error) {
		out := make([]instance.HealthResult, 0, len(req.InstanceIDs))
		for _, id := range req.InstanceIDs {
			out = append(out, instance.HealthResult{InstanceID: id, Healthy: true})
		}
		return out, nil
	})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

// A flood of leases, releases and member reports against a pool that continues as new every
// few dozen events and freezes its spares beyond one: no signal is lost across the runs. Before
// the fix the pool drained only its claims before continuing, so a release or a member-gone
// that had arrived meanwhile was dropped and its member stayed Leased or Deleting for good; and
// later it drained its signals before it waited for the freezes under way, so those delivered
// during that wait were dropped the same way.
func TestPoolLosesNothingAcrossContinueAsNew(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Temporal server; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	queue := "flood"
	memberWorker(t, tmp.Client, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: flood}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 3, maxClusters: 40, thawedSpares: 1}
  maxConcurrentProvisions: 20
`)
	first, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("flood"), TaskQueue: queue},
		pool.WorkflowName, pool.Snapshot{Policy: pol, ContinueAsNewAfter: 40})
	require.NoError(t, err)

	const leases = 60
	var wg sync.WaitGroup
	errs := make(chan error, leases)
	for i := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("lease-%02d", i)
			run, err := tmp.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue},
				lease.WorkflowName, lease.Input{LeaseID: id, Pool: "flood", Principal: "p",
					LeaseTerms: poolspec.LeaseTerms{TTL: time.Duration(1+i%3) * time.Second, MaxTTL: time.Hour, MaxExtensions: 2}})
			if err != nil {
				errs <- err
				return
			}
			if i%2 == 0 { // half are released early, half expire
				_ = tmp.Client.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil)
			}
			var lv lease.View
			if err := run.Get(ctx, &lv); err != nil {
				errs <- fmt.Errorf("%s: %w", id, err)
				return
			}
			if lv.Phase != api.LeaseReleased && lv.Phase != api.LeaseExpired {
				errs <- fmt.Errorf("%s ended %s (%s)", id, lv.Phase, lv.Reason)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	var st pool.Status
	require.Eventually(t, func() bool {
		st = poolStatus(t, tmp.Client, "flood")
		return st.Leased == 0 && st.Deleting == 0 && st.Creating == 0 && st.Ready == 3 && st.Frozen == 2
	}, 2*time.Minute, 200*time.Millisecond, "every member given back is gone and the pool is back at its size, its 2 spares beyond the one running frozen")
	desc, err := tmp.Client.DescribeWorkflowExecution(ctx, pool.WorkflowID("flood"), "")
	require.NoError(t, err)
	assert.NotEqual(t, first.GetRunID(), desc.WorkflowExecutionInfo.Execution.RunId, "the pool continued as new")
	runs := 0
	// Walk the chain of runs back from the current one; every run replays against the code
	// (the new pool shape has no recorded history yet: this is its replay test).
	replayer := sdkworker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(pool.Pool, workflow.RegisterOptions{Name: pool.WorkflowName})
	for run := desc.WorkflowExecutionInfo.Execution.RunId; run != ""; runs++ {
		hist := &historypb.History{}
		it := tmp.Client.GetWorkflowHistory(ctx, pool.WorkflowID("flood"), run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			hist.Events = append(hist.Events, e)
		}
		require.NoError(t, replayer.ReplayWorkflowHistory(nil, hist), "pool run %s replays", run)
		run = hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
	}
	assert.GreaterOrEqual(t, runs, 3, "the pool continued as new several times")
	t.Logf("%d leases over %d pool runs, each replayed; final: %+v", leases, runs, st)
}

// Leases one at a time from a pool that freezes its spares and continues as new every 100
// events, on a real Temporal with memberWorker's instant members and 300 ms freezes and thaws:
// every claim is served across the runs. Before pool-settle-before-continuing a claim that came
// while the run waited for a thaw to continue was dropped ("Workflow has unhandled signals
// [claim]") and its lease stayed Pending.
func TestFrozenPoolServesEveryClaimAcrossContinueAsNew(t *testing.T) {
	if testing.Short() {
		t.Skip("a real Temporal server; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	leasesUntilContinued(t, tmp.Client, "frozen-claims")
}

// TestRecordPoolFreezeHistory records the first run of leasesUntilContinued (pool-freeze-spares
// and pool-settle-before-continuing: members frozen, a claim taking a running member, a release,
// the continue-as-new after the run settled). It writes the file only when it is absent.
func TestRecordPoolFreezeHistory(t *testing.T) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		t.Skip("set KOBE_RECORD_HISTORIES=1 to record workflow histories into worker/testdata/histories")
	}
	path := filepath.Join("..", "worker", "testdata", "histories", "pool-settle-"+recordVersion+".json")
	if _, err := os.Stat(path); err == nil {
		t.Skipf("%s is recorded already", path)
	}
	tmp := testsuite.StartTemporal(t)
	first := leasesUntilContinued(t, tmp.Client, "rec-freeze")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	writeRunHistory(t, ctx, tmp.Client, pool.WorkflowID("rec-freeze"), first, path)
}

// leasesUntilContinued runs pool name (2 Ready, 1 kept running, the other frozen; continue as
// new past 100 events) on memberWorker and leases from it one lease at a time, each bound,
// released and the pool back to 2 Ready with 1 frozen, until the pool has continued as new. It
// returns the id of the pool's first run.
func leasesUntilContinued(t *testing.T, c client.Client, name string) string {
	t.Helper()
	queue := name
	memberWorker(t, c, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pol := poolPolicy(t, fmt.Sprintf(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: %s}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 2, maxClusters: 6, thawedSpares: 1}
`, name))
	first, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID(name), TaskQueue: queue},
		pool.WorkflowName, pool.Snapshot{Policy: pol, ContinueAsNewAfter: 100})
	require.NoError(t, err)
	settled := func() bool {
		st := poolStatus(t, c, name)
		return st.Ready == 2 && st.Frozen == 1 && st.Leased == 0 && st.Deleting == 0 && st.Creating == 0
	}
	require.Eventually(t, settled, time.Minute, 50*time.Millisecond, "2 Ready, 1 of them frozen")
	for i := 0; ; i++ {
		desc, err := c.DescribeWorkflowExecution(ctx, pool.WorkflowID(name), "")
		require.NoError(t, err)
		if desc.WorkflowExecutionInfo.Execution.RunId != first.GetRunID() {
			return first.GetRunID()
		}
		require.Less(t, i, 20, "the pool continues as new within 20 leases")
		id := fmt.Sprintf("lease-%s-%d", name, i)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue},
			lease.WorkflowName, lease.Input{LeaseID: id, Pool: name, Principal: "p",
				LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: time.Hour}})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return leaseView(t, c, id).Phase == api.LeaseBound }, time.Minute,
			50*time.Millisecond, "%s is bound", id)
		require.NoError(t, c.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
		require.NoError(t, run.Get(ctx, nil))
		require.Eventually(t, settled, time.Minute, 50*time.Millisecond, "back to 2 Ready, 1 frozen")
	}
}
