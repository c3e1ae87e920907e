package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/datastore"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/dbtest"
	"github.com/kunobi-ninja/kobe/worker"
)

// PUT /v1/pools with the local backend on a shared datastore, judged by a real worker against
// its secrets and the machine's real servers: a missing secret or key, goldenTemplates on NATS
// and a Kubernetes version the worker does not have are 400 (invalid_request) naming the field;
// a server that does not answer is 503 (backend_error) without its password; each leaves no
// pool row, no workflow, no instance and nothing on the datastore servers.
func TestPoolApplyRefusesBadDatastoreInput(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded Temporal and the machine's datastore servers; skipped with -short")
	}
	ctx := context.Background()
	secrets := t.TempDir()
	secret := func(name, key, url string) {
		require.NoError(t, os.MkdirAll(filepath.Join(secrets, name), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(secrets, name, key), []byte(url), 0o600))
	}
	pg, nats := dbtest.PostgresAdminURL(t), dbtest.NATSURL(t)
	secret("pg", datastore.DefaultSecretKey, pg)
	secret("nats", datastore.DefaultSecretKey, nats)
	secret("down", datastore.DefaultSecretKey, "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	tools := local.DefaultToolsDir()
	versions := local.Tools{Dir: tools}.KubernetesVersions()
	if len(versions) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` (or set KOBE_TOOLS_DIR)", tools)
	}
	lb, err := local.New(local.Config{StateDir: t.TempDir(), HostID: "test-host", ToolsDir: tools, SecretsDir: secrets})
	require.NoError(t, err)

	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	acts := worker.NewActivities(st, zap.NewNop())
	acts.Backends["local"] = lb
	w := worker.New(tmp.Client, "ds-preflight", acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	h := (&server.Server{Store: st, Temporal: tmp.Client, TaskQueue: "ds-preflight", InsecureNoAuth: true}).Handler()
	put := func(name, version, datastoreJSON string) (int, api.ErrorBody) {
		rec := httptest.NewRecorder()
		body := `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"` + name + `"},
			"spec":{"size":1,"ttl":"10m","backend":{"type":"local","datastore":` + datastoreJSON + `},"cluster":{"version":"` + version + `"}}}`
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/pools/"+name, strings.NewReader(body)))
		var eb api.ErrorBody
		if rec.Code >= 400 {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), rec.Body.String())
		}
		return rec.Code, eb
	}
	for _, c := range []struct {
		pool, version, datastore string
		code                     int
		reason                   api.ReasonCode
		detail                   string
	}{
		{"no-secret", versions[0], `{"secretRef":"absent"}`, 400, api.ReasonInvalidRequest, `spec.backend.local.datastore.secretRef: secret "absent" not found on this worker`},
		{"no-key", versions[0], `{"secretRef":"pg","secretKey":"url"}`, 400, api.ReasonInvalidRequest, `spec.backend.local.datastore.secretKey: secret "pg" has no key "url"`},
		{"nats-golden", versions[0], `{"secretRef":"nats","goldenTemplates":true}`, 400, api.ReasonInvalidRequest, "spec.backend.local.datastore.goldenTemplates: the nats datastore of secret \"nats\" cannot hold templates"},
		{"old-version", "v1.1.0", `{"secretRef":"pg"}`, 400, api.ReasonInvalidRequest, "v1.1.0"},
		{"down", versions[0], `{"secretRef":"down"}`, 503, api.ReasonBackendError, "cannot reach the postgres datastore postgres://postgres:xxxxx@127.0.0.1:1"},
	} {
		code, eb := put(c.pool, c.version, c.datastore)
		assert.Equal(t, c.code, code, c.pool)
		assert.Equal(t, c.reason, eb.Reason, c.pool)
		assert.Contains(t, eb.Detail, c.detail, c.pool)
		assert.NotContains(t, eb.Detail+eb.Error, "hunter2", c.pool)
		_, err := st.GetPool(ctx, c.pool)
		assert.ErrorIs(t, err, store.ErrNotFound, "no row for pool %s", c.pool)
		_, err = tmp.Client.DescribeWorkflowExecution(ctx, pool.WorkflowID(c.pool), "")
		assert.Error(t, err, "no workflow for pool %s", c.pool)
	}
	assert.Empty(t, lb.InstanceIDs(), "no instance was created")
	for _, url := range []string{pg, nats} {
		s, err := datastore.Parse(url)
		require.NoError(t, err)
		for _, p := range []string{"no-secret", "no-key", "nats-golden", "old-version", "down"} {
			left, err := s.Leftovers(ctx, p)
			require.NoError(t, err)
			assert.Empty(t, left, "nothing of pool %s on %s", p, s)
		}
	}
}
