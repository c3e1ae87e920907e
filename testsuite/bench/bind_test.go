// Package bench measures kobe's lease path on the embedded stack: a real Temporal server, the
// real worker and local backend, real clusters. Run with `make bench` (or
// `go test -run '^$' -bench . ./testsuite/bench/`); each benchmark reports its percentiles as
// custom metrics, so the figures print in the usual benchmark table.
package bench

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/pools"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/workflows"
)

var (
	clientsFlag = flag.String("bench.clients", "1,10,50", "concurrent clients of the bind benchmark (one round each)")
	roundsFlag  = flag.Int("bench.rounds", 3, "rounds of the bind benchmark per client count")
	cyclesFlag  = flag.Int("bench.lifecycles", 20, "lease lifecycles of the lifecycle benchmark")
)

// stack is the embedded kobe: Temporal, store, worker with the local backend, one pool.
type stack struct {
	c    client.Client
	pool string
}

func startStack(b *testing.B, pool string, size, maxClusters int) *stack {
	tmp := testsuite.StartTemporal(b)
	s := testsuite.NewStore(b, "sqlite")
	testsuite.StartHostWorker(b, tmp.Client, "kobe", s, b.TempDir())
	manifest := fmt.Sprintf(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: %s}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  ttl: 1h
  maxConcurrentProvisions: 4
  scaling: {minReady: %d, maxClusters: %d, queueTimeout: 10m, scaleDownAfter: 1h}
`, pool, size, maxClusters)
	p, err := pools.Parse([]byte(manifest))
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(b, api.EnsurePool(ctx, tmp.Client, s, "kobe", p))
	return &stack{c: tmp.Client, pool: pool}
}

func (st *stack) status(b *testing.B) workflows.PoolStatus {
	v, err := st.c.QueryWorkflow(context.Background(), workflows.PoolWorkflowID(st.pool), "", workflows.QueryPoolStatus)
	require.NoError(b, err)
	var ps workflows.PoolStatus
	require.NoError(b, v.Get(&ps))
	return ps
}

// waitWarm waits until the pool has n Ready members and nothing in flight.
func (st *stack) waitWarm(b *testing.B, n int) {
	deadline := time.Now().Add(15 * time.Minute)
	for time.Now().Before(deadline) {
		ps := st.status(b)
		if ps.Ready >= n && ps.Creating == 0 && ps.Deleting == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("pool %s did not reach %d Ready members", st.pool, n)
}

// lease starts a lease and waits until it is Bound (update-with-start on the lease's
// wait-bound update: no polling). It returns the time from the request to Bound.
func (st *stack) lease(ctx context.Context, id string) (time.Duration, workflows.LeaseView, error) {
	start := time.Now()
	in := workflows.LeaseInput{LeaseID: id, Pool: st.pool, Principal: "bench", TTL: time.Hour, MaxTTL: 2 * time.Hour, MaxExtensions: 2}
	op := st.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: "kobe",
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, workflows.LeaseWorkflowName, in)
	h, err := st.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.UpdateWaitBound,
			WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	var v workflows.LeaseView
	if err == nil {
		err = h.Get(ctx, &v)
	}
	d := time.Since(start)
	if err == nil && v.Phase != workflows.LeaseBound {
		err = fmt.Errorf("lease %s ended %s (%s)", id, v.Phase, v.Reason)
	}
	return d, v, err
}

func (st *stack) release(ctx context.Context, id string) error {
	return st.c.SignalWorkflow(ctx, id, "", workflows.SignalReleaseLease, nil)
}

func clientCounts(b *testing.B) []int {
	var out []int
	for _, f := range strings.Split(*clientsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "-bench.clients")
		out = append(out, n)
	}
	return out
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkBindLatency: from a warm pool with one Ready cluster per client, every client leases
// at the same moment; the time from the request to Bound (kubeconfig issued) is recorded. The
// leases are released and the pool refilled between rounds, outside the measurement.
func BenchmarkBindLatency(b *testing.B) {
	counts := clientCounts(b)
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	st := startStack(b, "bench", most, 2*most)
	seq := 0
	for _, n := range counts {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			var all []time.Duration
			for range b.N {
				for range *roundsFlag {
					st.waitWarm(b, most)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					ids := make([]string, n)
					lat := make([]time.Duration, n)
					errs := make([]error, n)
					var wg sync.WaitGroup
					for i := range n {
						seq++
						ids[i] = fmt.Sprintf("lease-bench-%d", seq)
						wg.Add(1)
						go func(i int) {
							defer wg.Done()
							lat[i], _, errs[i] = st.lease(ctx, ids[i])
						}(i)
					}
					wg.Wait()
					for i := range n {
						require.NoError(b, errs[i])
						require.NoError(b, st.release(ctx, ids[i]))
					}
					cancel()
					all = append(all, lat...)
				}
			}
			b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
			b.ReportMetric(ms(percentile(all, 0.95)), "p95-ms")
			b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
			b.ReportMetric(float64(len(all)), "binds")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkLeaseLifecycles: a fixed number of full lifecycles (request → Bound → release →
// instance torn down and verified gone) by a few concurrent clients on a small warm pool;
// reports lifecycles per second. Throughput is bound by re-provisioning (a fresh cluster per
// lease: an instance is never reused).
func BenchmarkLeaseLifecycles(b *testing.B) {
	const warm, clients = 4, 4
	st := startStack(b, "cycles", warm, 2*warm)
	for range b.N {
		st.waitWarm(b, warm)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		work := make(chan int)
		var mu sync.Mutex
		var failures []error
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					id := fmt.Sprintf("lease-cycle-%d-%d", time.Now().UnixNano(), i)
					_, v, err := st.lease(ctx, id)
					if err == nil {
						err = st.release(ctx, id)
					}
					if err == nil {
						err = st.waitGone(ctx, v.InstanceID)
					}
					if err != nil {
						mu.Lock()
						failures = append(failures, err)
						mu.Unlock()
					}
				}
			}()
		}
		for i := range *cyclesFlag {
			work <- i
		}
		close(work)
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		require.Empty(b, failures)
		b.ReportMetric(float64(*cyclesFlag)/elapsed.Seconds(), "lifecycles/s")
		b.ReportMetric(0, "ns/op")
	}
}

// waitGone waits until the pool no longer has the instance (its teardown verified it gone).
func (st *stack) waitGone(ctx context.Context, instanceID string) error {
	for {
		v, err := st.c.QueryWorkflow(ctx, workflows.PoolWorkflowID(st.pool), "", workflows.QueryPoolStatus)
		if err != nil {
			return err
		}
		var ps workflows.PoolStatus
		if err := v.Get(&ps); err != nil {
			return err
		}
		found := false
		for _, m := range ps.Members {
			found = found || m.ID == instanceID
		}
		if !found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %s not torn down: %w", instanceID, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
