package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/workflows"
)

// PoolCollector exports each pool's member counts and queue depth, read from the pool workflows
// at scrape time. The pool label is "profile", as upstream, so existing dashboards keep working.
type PoolCollector struct {
	Temporal client.Client
	Store    store.Store
}

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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ps, err := c.Store.ListPools(ctx)
	if err != nil {
		return
	}
	for _, p := range ps {
		v, err := c.Temporal.QueryWorkflow(ctx, workflows.PoolWorkflowID(p.Name), "", workflows.QueryPoolStatus)
		if err != nil {
			continue
		}
		var st workflows.PoolStatus
		if v.Get(&st) != nil {
			continue
		}
		// "recycling" is upstream's name for members being torn down.
		for state, n := range map[string]int{"ready": st.Ready, "leased": st.Leased, "creating": st.Creating, "recycling": st.Deleting} {
			ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(n), p.Name, state)
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(st.QueueDepth), p.Name)
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.GaugeValue, float64(st.ConsecutiveFailures), p.Name)
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, age(st.OldestPendingSince), p.Name)
		ch <- prometheus.MustNewConstMetric(creatingDesc, prometheus.GaugeValue, age(st.OldestCreatingSince), p.Name)
		ch <- prometheus.MustNewConstMetric(outdatedDesc, prometheus.GaugeValue, float64(st.Outdated), p.Name)
	}
}

func age(since time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	return time.Since(since).Seconds()
}
