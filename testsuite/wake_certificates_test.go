package testsuite_test

import (
	"context"
	"github.com/kunobi-ninja/kobe/poolspec"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/logging"
	"github.com/kunobi-ninja/kobe/internal/metrics"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// TestWakeReissuesExpiredCertificates: a leased local cluster whose certificates are issued for
// two minutes sleeps past their expiry; its wake re-issues them (from the same CA) before it is
// handed back: the lease's kubeconfig, issued before the sleep, works again, the object made
// before the sleep is there, and the audit event and kobe_instance_cert_reissues_total say
// cause wake. With KOBE_RECORD_HISTORIES=1 it records the wake's history (the re-issue branch).
func TestWakeReissuesExpiredCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("a real cluster, and two minutes of certificate validity; skipped with -short")
	}
	// Mostly waiting (on a timer of the cluster's or the lease's), on its own Temporal, store and
	// state dir: it runs beside the package's other waiting test, not after it.
	t.Parallel()
	tmp := testsuite.StartTemporal(t)
	s := testsuite.NewStore(t, "sqlite")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The worker's client exports the SDK's metrics, the activities' among them, as kobe's does.
	sdkMetrics := metrics.NewSDKCollector()
	c, err := client.DialContext(ctx, client.Options{HostPort: tmp.Address, Namespace: "default",
		MetricsHandler: sdkMetrics.Handler(), Logger: logging.NewSDKLogger(zap.NewExample(zap.IncreaseLevel(zap.WarnLevel)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	acts := testsuite.StartHostWorker(t, c, "kobe", s, t.TempDir())

	pol := poolPolicy(t, `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: shortcerts}
spec:
  ttl: 20m
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
  scaling: {minReady: 1, maxClusters: 3, resumeTimeout: 3m}
  certificates: {validity: 2m, recycleBefore: 10s}
`)
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: pool.WorkflowID("shortcerts"), TaskQueue: "kobe"},
		pool.WorkflowName, pool.Snapshot{Policy: pol})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return poolStatus(t, c, "shortcerts").Ready >= 1 }, 3*time.Minute, 200*time.Millisecond)
	const id = "lease-shortcerts"
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"},
		lease.WorkflowName, lease.Input{LeaseID: id, Pool: "shortcerts", Principal: "alice",
			LeaseTerms: pol.LeaseTerms(poolspec.LeaseAsk{Owner: "alice"})})
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool { lv = leaseView(t, c, id); return lv.Phase == api.LeaseBound }, 2*time.Minute, 20*time.Millisecond)

	kube := leaseKube(t, s, acts, id)
	_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err, "the lease's kubeconfig works before the sleep")

	expiry := certificatesOf(t, s, lv.InstanceID)
	require.True(t, time.Now().Before(expiry.Serving), "the serving certificate (until %s) must still be valid when the cluster goes to sleep", expiry.Serving)

	// The lease shows Bound a moment before it takes sleeps (refused not_ready until then).
	require.Eventually(t, func() bool {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateSleep,
			Args: []any{lease.SleepRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, &lv)
		}
		if reason, refused := lease.IsSleepRejection(err); refused && reason == api.ReasonNotReady {
			return false
		}
		require.NoError(t, err)
		return true
	}, time.Minute, 50*time.Millisecond)
	require.True(t, lv.Sleeping)
	// The one wait tuned to time: the certificates' own expiry, which the test chose.
	t.Logf("asleep; waiting until the serving certificate expires at %s", expiry.Serving.Format(time.RFC3339))
	time.Sleep(time.Until(later(expiry.Serving, expiry.Client)) + time.Second)

	// Woken as the API wakes it: a request that says nothing, bounded by the lease's terms (the
	// pool's resume timeout and certificate minimum, granted at admission).
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lease.UpdateWake,
		Args: []any{lease.WakeRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	lv = lease.View{}
	require.NoError(t, h.Get(ctx, &lv))
	require.False(t, lv.Sleeping)
	requireCondition(t, lv, lease.ConditionSleeping, "False", api.ReasonAwake)

	cm, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err, "the lease's kubeconfig works again after the wake (the API serves a valid certificate from the same CA)")
	assert.Equal(t, "v", cm.Data["k"], "the object made before the sleep is still there")
	after := certificatesOf(t, s, lv.InstanceID)
	assert.True(t, after.Serving.After(time.Now()), "the recorded serving certificate is valid again: %s", after.Serving)
	assert.True(t, after.CA.Equal(expiry.CA), "the same CA")

	events, err := s.ListEvents(ctx, store.EventFilter{Action: instance.ActionCertificatesReissued, Target: lv.InstanceID})
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, "ok", events[0].Result)
	assert.Contains(t, string(events[0].Detail), `"cause":"wake"`)
	assert.Contains(t, string(events[0].Detail), `"leaseId":"`+id+`"`)
	assert.Equal(t, 1.0, counterValue(t, sdkMetrics, instance.MetricCertReissues, map[string]string{"cause": "wake", "result": "ok", "profile": "shortcerts"}))

	if os.Getenv("KOBE_RECORD_HISTORIES") == "1" {
		file := filepath.Join("..", "worker", "testdata", "histories", "wake-reissue-"+recordVersion+".json")
		if _, err := os.Stat(file); os.IsNotExist(err) {
			writeHistory(t, ctx, c, instance.WakeWorkflowID(lv.InstanceID, 2), file)
		}
	}
	require.NoError(t, c.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
	require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, &lv))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// certificatesOf is the certificate expiry recorded for an instance.
func certificatesOf(t *testing.T, s store.Store, instanceID string) store.InstanceCertificates {
	t.Helper()
	rows, err := s.ListInstanceCertificates(context.Background())
	require.NoError(t, err)
	for _, r := range rows {
		if r.InstanceID == instanceID {
			return r
		}
	}
	t.Fatalf("no certificate expiry recorded for instance %s", instanceID)
	return store.InstanceCertificates{}
}

// counterValue reads a counter of the SDK's metrics, as /metrics would export it, by labels
// (0 when there is none).
func counterValue(t *testing.T, c *metrics.SDKCollector, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
