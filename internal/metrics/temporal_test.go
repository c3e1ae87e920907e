package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestSDKCollectorExportsInconsistentTagSets(t *testing.T) {
	c := NewSDKCollector()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))

	h := c.Handler().WithTags(map[string]string{"namespace": "default"})
	h.Counter("temporal_request").Inc(2)
	h.WithTags(map[string]string{"operation": "StartWorkflowExecution"}).Counter("temporal_request").Inc(1)
	h.Gauge("temporal_worker_task_slots_available").Update(7)
	h.Timer("temporal_request_latency").Record(30 * time.Millisecond)
	h.Timer("temporal_request_latency").Record(2 * time.Second)
	h.Timer("temporal_request").Record(time.Millisecond) // same name, other kind: kept apart

	expected := `
# HELP temporal_request Temporal SDK metric temporal_request.
# TYPE temporal_request counter
temporal_request{namespace="default",operation=""} 2
temporal_request{namespace="default",operation="StartWorkflowExecution"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "temporal_request"))
	n, err := testutil.GatherAndCount(reg, "temporal_request_latency", "temporal_worker_task_slots_available", "temporal_request_histogram")
	require.NoError(t, err)
	require.Equal(t, 3, n)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "temporal_request_latency" {
			hist := mf.GetMetric()[0].GetHistogram()
			require.Equal(t, uint64(2), hist.GetSampleCount())
			require.InDelta(t, 2.03, hist.GetSampleSum(), 1e-9)
		}
	}
}
