package vcluster_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
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
