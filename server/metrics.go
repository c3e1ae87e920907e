package server

import (
	"context"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/pool"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// PoolCollector exports each pool's member counts and queue depth, read from the pool workflows
// at scrape time. The pool label is "profile", as upstream, so existing dashboards keep working.
//
// kobe_clusters{profile,state} and kobe_queue_depth{profile} are on every scrape for every pool
// (upstream's contract: alerts on them must not go quiet when kobe is in trouble): when a pool's
// workflow cannot answer they come from the store's instance and lease rows, and when the store
// cannot list the pools, the pools of the last successful listing are reported (zeros where
// nothing can say). The other pool gauges need the workflow and are left out without it.
type PoolCollector struct {
	Temporal client.Client
	Store    store.Store

	mu    sync.Mutex
	known []string // pool names of the last successful listing
}

// clusterStates are the values of kobe_clusters' state label ("recycling" is upstream's name
// for members being torn down).
var clusterStates = []string{"ready", "leased", "creating", "recycling", "unhealthy", "quarantined"}

var (
	clustersDesc = prometheus.NewDesc("kobe_clusters", "Clusters of a pool by state.", []string{"profile", "state"}, nil)
	queueDesc    = prometheus.NewDesc("kobe_queue_depth", "Leases waiting for a cluster of a pool.", []string{"profile"}, nil)
	failuresDesc = prometheus.NewDesc("kobe_pool_consecutive_failures", "Consecutive provisioning failures of a pool.", []string{"profile"}, nil)
	pendingDesc  = prometheus.NewDesc("kobe_lease_oldest_pending_age_seconds", "Age of the oldest lease waiting for a cluster of a pool (0 when none waits).", []string{"profile"}, nil)
	creatingDesc = prometheus.NewDesc("kobe_instance_oldest_creating_age_seconds", "Age of the oldest cluster of a pool still being created (0 when none is).", []string{"profile"}, nil)
	outdatedDesc = prometheus.NewDesc("kobe_pool_outdated_clusters", "Ready clusters of a pool made from an older spec, waiting to be rolled.", []string{"profile"}, nil)
)

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clustersDesc
	ch <- queueDesc
	ch <- failuresDesc
	ch <- pendingDesc
	ch <- creatingDesc
	ch <- outdatedDesc
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	names := c.poolNames()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.collectPool(ch, name)
		}()
	}
	wg.Wait()
}

// poolNames lists the pools from the store, or the last listing when the store fails.
func (c *PoolCollector) poolNames() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, err := c.Store.ListPools(ctx)
	if err != nil {
		return c.known
	}
	c.known = make([]string, 0, len(ps))
	for _, p := range ps {
		c.known = append(c.known, p.Name)
	}
	return c.known
}

func (c *PoolCollector) collectPool(ch chan<- prometheus.Metric, name string) {
	// Each pool has its own deadlines: a workflow that does not answer (no worker) must not use
	// up the time of the others, nor that of its own store fallback.
	qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var st pool.Status
	v, err := c.Temporal.QueryWorkflow(qctx, pool.WorkflowID(name), "", pool.QueryPoolStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sc := storePoolCounts(sctx, c.Store, name)
		counts := map[string]int{"ready": sc.Ready, "leased": sc.Leased, "creating": sc.Creating, "recycling": sc.Recycling, "quarantined": sc.Quarantined}
		for _, state := range clusterStates {
			ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(counts[state]), name, state)
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(sc.QueueDepth), name)
		return
	}
	counts := map[string]int{"ready": st.Ready, "leased": st.Leased, "creating": st.Creating, "recycling": st.Deleting,
		"unhealthy": st.Unhealthy, "quarantined": st.Quarantined}
	for _, state := range clusterStates {
		ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(counts[state]), name, state)
	}
	ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(st.QueueDepth), name)
	ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.GaugeValue, float64(st.ConsecutiveFailures), name)
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, age(st.OldestPendingSince), name)
	ch <- prometheus.MustNewConstMetric(creatingDesc, prometheus.GaugeValue, age(st.OldestCreatingSince), name)
	ch <- prometheus.MustNewConstMetric(outdatedDesc, prometheus.GaugeValue, float64(st.Outdated), name)
}

func age(since time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	return time.Since(since).Seconds()
}

// CertificateCollector exports when each instance's certificates expire, from the store's rows
// (written when an instance is Ready, by the certificate workflow's checks and by every
// re-issue): kobe_instance_cert_expiry_seconds{instance,pool,kind} is the expiry as a Unix
// time, kind one of ca, serving, client. An alert on `kobe_instance_cert_expiry_seconds - time()`
// sees a member that kobe failed to recycle or re-issue.
type CertificateCollector struct {
	Store store.Store
}

var certExpiryDesc = prometheus.NewDesc("kobe_instance_cert_expiry_seconds",
	"When an instance's certificate expires (Unix time), by kind: ca, serving, client.", []string{"instance", "pool", "kind"}, nil)

// Describe implements prometheus.Collector.
func (c *CertificateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

// Collect implements prometheus.Collector. A store that cannot answer leaves the gauge out of
// this scrape (absent, not zero: a zero would read as long expired).
func (c *CertificateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.Store.ListInstanceCertificates(ctx)
	if err != nil {
		return
	}
	for _, r := range rows {
		for kind, t := range map[string]time.Time{"ca": r.CA, "serving": r.Serving, "client": r.Client} {
			ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(t.Unix()), r.InstanceID, r.Pool, kind)
		}
	}
}
