package vcluster_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/hostcluster"
	"github.com/kunobi-ninja/kobe/worker"
)

// PUT /v1/pools/{name} with a vcluster pool is judged by the real backend on a worker: values
// that are not YAML are a 400 naming the line, a chart version the chart source does not have
// is a 400, a chart source or host cluster that does not answer is a 503; nothing is recorded
// in any of these cases. (The host here is an address nothing listens on: no case gets as far
// as creating anything.)
func TestPoolApplyJudgesTheVClusterSpec(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal; skipped with -short")
	}
	chartDir, chartVersion := vcluster.ToolsChart(local.DefaultToolsDir())
	if chartDir == "" {
		t.Skipf("no vcluster chart in %s/versions.env: run `make tools` (hack/build-vcluster-tools.sh)", local.DefaultToolsDir())
	}
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	b, err := vcluster.New(vcluster.Config{REST: &rest.Config{Host: "https://127.0.0.1:1", Timeout: 5 * time.Second}, Chart: chartDir, ChartVersion: chartVersion, StateDir: t.TempDir()})
	require.NoError(t, err)
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends[vcluster.Name] = b
	w := worker.New(tmp.Client, "vcluster-apply", acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	h := (&server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "vcluster-apply", InsecureNoAuth: true}).Handler()

	put := func(name, section string) (int, api.ErrorBody) {
		rec := httptest.NewRecorder()
		body := `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"` + name + `"},
			"spec":{"size":0,"ttl":"10m","backend":{"type":"vcluster","vcluster":` + section + `},"cluster":{"version":"v1.37.2"}}}`
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/pools/"+name, strings.NewReader(body)))
		var eb api.ErrorBody
		if rec.Code >= 400 {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), rec.Body.String())
		}
		return rec.Code, eb
	}
	for _, tc := range []struct {
		pool, section string
		code          int
		want          string
	}{
		{"badyaml", `{"values":"sync:\n  toHost:\n    pods: [enabled\n"}`, 400, "spec.backend.vcluster.values: line 3"},
		{"badversion", `{"chartVersion":"0.33.9"}`, 400, "is version " + chartVersion + ", not 0.33.9"},
		{"badfield", `{"replicas":2}`, 400, `spec.backend.vcluster: unknown field "replicas"`},
		{"nosource", `{"chart":"oci://127.0.0.1:1/charts/vcluster","chartVersion":"0.34.0"}`, 503, "127.0.0.1:1"},
		{"nohost", `{}`, 503, "vcluster host cluster"},
	} {
		code, eb := put(tc.pool, tc.section)
		assert.Equal(t, tc.code, code, "%s: %+v", tc.pool, eb)
		assert.Contains(t, eb.Detail, tc.want, tc.pool)
		_, err := st.GetPool(ctx, tc.pool)
		assert.ErrorIs(t, err, store.ErrNotFound, "no row for pool %s", tc.pool)
	}
}

// A chart source that goes away after the pool was applied is found when a member is created:
// the apply passed (a worker loaded the chart), the chart directory was removed, the worker
// restarted (its successor has never loaded the chart), and a lease asks the pool for a member.
// The pool's status names the missing chart (lastFailureReason, GET /v1/pools/{name}) and the
// host is left as it was: the backend loads the chart before it creates anything.
func TestChartGoneAfterApplyShowsInThePoolStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal and a host cluster; skipped with -short")
	}
	chartDir, chartVersion := vcluster.ToolsChart(local.DefaultToolsDir())
	if chartDir == "" {
		t.Skipf("no vcluster chart in %s/versions.env: run `make tools` (hack/build-vcluster-tools.sh)", local.DefaultToolsDir())
	}
	host := hostcluster.Start(t, hostcluster.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	startWorker := func() func() {
		b, err := vcluster.New(vcluster.Config{REST: host.Config, Chart: chartDir, ChartVersion: chartVersion, StateDir: t.TempDir()})
		require.NoError(t, err)
		acts := worker.NewActivities(st, zap.NewNop())
		acts.Backends[vcluster.Name] = b
		acts.SharedQueue = "vcluster-later"
		w := worker.New(tmp.Client, "vcluster-later", acts)
		require.NoError(t, w.Start())
		return w.Stop
	}
	stop := startWorker()
	srv := httptest.NewServer((&server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "vcluster-later", InsecureNoAuth: true}).Handler())
	t.Cleanup(srv.Close)
	kobe, err := api.NewClient(srv.URL)
	require.NoError(t, err)

	// The pool's chart is a copy of the tools' chart: the operator's directory, removed later.
	copied := filepath.Join(t.TempDir(), "vcluster")
	require.NoError(t, os.CopyFS(copied, os.DirFS(chartDir)))
	_, _, err = kobe.ApplyPool(ctx, []byte(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"later"},
		"spec":{"size":0,"ttl":"10m","backend":{"type":"vcluster","vcluster":{"chart":"`+copied+`","chartVersion":"`+chartVersion+`"}},
		"cluster":{"version":"v1.37.2"}}}`))
	require.NoError(t, err, "the chart is there at apply")
	require.NoError(t, os.RemoveAll(copied))
	stop()
	stop = startWorker()
	defer stop()

	l, _, err := kobe.CreateLease(ctx, api.LeaseRequest{Pool: "later"})
	require.NoError(t, err)
	var p api.PoolView
	require.Eventually(t, func() bool {
		p, err = kobe.GetPool(ctx, "later")
		return err == nil && p.ConsecutiveFailures > 0
	}, 2*time.Minute, 200*time.Millisecond, "a failed creation (last seen: %+v, %v)", p, err)
	t.Logf("pool %s: %s", p.Phase, p.LastFailureReason)
	assert.Contains(t, p.LastFailureReason, "spec.backend.vcluster.chart/chartVersion: chart not found: "+copied)
	assert.Contains(t, []api.PoolPhase{api.PoolBackoff, api.PoolFailing}, p.Phase)
	nss, err := host.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: vcluster.LabelBackend + "=" + vcluster.Name})
	require.NoError(t, err)
	assert.Empty(t, nss.Items, "nothing was created on the host")

	require.NoError(t, kobe.ReleaseLease(ctx, l.ID))
	_, err = kobe.DeletePool(ctx, "later")
	require.NoError(t, err)
	require.NoError(t, tmp.Client.GetWorkflow(ctx, pool.WorkflowID("later"), "").Get(ctx, nil), "the pool drains and ends")
}
