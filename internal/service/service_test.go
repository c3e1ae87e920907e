package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/kunobi-ninja/kobe/poolspec"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/service"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

func freePort(t *testing.T) int {
	p, err := devserver.FreePort("127.0.0.1")
	require.NoError(t, err)
	return p
}

func devConfig(t *testing.T) config.Config {
	c := config.Default()
	c.Ephemeral = true
	c.NoDefaultPool = true
	c.APIAddress = "127.0.0.1:0"
	c.TemporalPort = freePort(t)
	c.UIPort = freePort(t)
	return c
}

func start(t *testing.T, c config.Config, mode config.Mode) *service.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := service.Start(ctx, c, mode, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	return p
}

// migrated brings the store at dsn to this kobe's schema, as `kobe migrate up` does before a
// server or a worker starts on it, and returns dsn.
func migrated(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	m, err := store.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Up(ctx)
	require.NoError(t, err)
	return dsn
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// doctorClient is a client of p's API with a token (POST /v1/doctor needs one): the admin
// token of dev mode, else one made in p's store.
func doctorClient(t testing.TB, p *service.Process) *api.Client {
	t.Helper()
	c, err := api.NewClient(p.APIURL)
	require.NoError(t, err)
	if p.AdminTokenFile != "" {
		tok, err := os.ReadFile(p.AdminTokenFile)
		require.NoError(t, err)
		c.Token = strings.TrimSpace(string(tok))
		return c
	}
	id, secret, err := access.NewToken()
	require.NoError(t, err)
	_, err = p.Store.CreateToken(context.Background(), store.Token{ID: id, Name: "doctor", Role: access.RoleAdmin, Principal: "doctor", Hash: access.HashToken(secret)})
	require.NoError(t, err)
	c.Token = secret
	return c
}

func runDoctor(t *testing.T, p *service.Process, hold time.Duration) api.DoctorReport {
	t.Helper()
	c := doctorClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+hold)
	defer cancel()
	started, err := c.StartDoctor(ctx, hold)
	require.NoError(t, err)
	for {
		rep, err := c.GetDoctor(ctx, started.ID, 10*time.Second)
		require.NoError(t, err)
		if rep.Status != "Running" {
			return rep
		}
	}
}

func requireAllHopsOK(t *testing.T, rep api.DoctorReport) {
	t.Helper()
	require.Equal(t, "Completed", rep.Status, rep.Error)
	require.NotEmpty(t, rep.Hops)
	for _, h := range rep.Hops {
		assert.True(t, h.OK, "hop %s: %s", h.Name, h.Detail)
	}
}

// TestDevModeServesEverything starts `kobe dev` in memory and checks every endpoint the issue names.
func TestDevModeServesEverything(t *testing.T) {
	cfg := devConfig(t)
	cfg.ProfileAddress = "127.0.0.1:0"
	p := start(t, cfg, config.ModeDev)

	// Go's profiles, on their own listener only.
	require.NotEmpty(t, p.ProfileURL)
	code, body := get(t, p.ProfileURL+"/debug/pprof/goroutine?debug=1")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "goroutine profile:")
	code, _ = get(t, p.APIURL+"/debug/pprof/")
	assert.Equal(t, 404, code, "the profiles are not on the API's address")

	code, body = get(t, p.APIURL+"/healthz")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)

	code, body = get(t, p.APIURL+"/readyz")
	assert.Equal(t, 200, code, body)

	code, body = get(t, p.APIURL+"/v1/status")
	require.Equal(t, 200, code)
	var st api.Status
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.True(t, st.Temporal.Healthy)
	assert.Equal(t, "default", st.Temporal.Namespace)
	assert.True(t, st.Store.Healthy)
	assert.Equal(t, "sqlite", st.Store.Driver)
	assert.Equal(t, store.ExpectedSchemaVersion(), st.Store.SchemaVersion)
	assert.NotEmpty(t, st.Version)
	assert.NotNil(t, st.Backends)

	code, body = get(t, p.UIURL+"/")
	assert.Equal(t, 200, code)
	assert.Contains(t, strings.ToLower(body), "<!doctype html>")

	rep := runDoctor(t, p, 0)
	requireAllHopsOK(t, rep)
	names := ""
	for _, h := range rep.Hops {
		names += h.Name + ";"
	}
	assert.Contains(t, names, "workflow → worker activity")
	assert.Contains(t, names, "api → store read of the worker's probe")

	// After a workflow ran, the SDK's worker and client metrics are on /metrics beside kobe's own.
	code, body = get(t, p.APIURL+"/metrics")
	require.Equal(t, 200, code)
	assert.Contains(t, body, "kobe_build_info{")
	assert.Contains(t, body, "temporal_workflow_completed")
	assert.Contains(t, body, "temporal_activity_execution_latency")
	assert.Contains(t, body, "go_goroutines")

	code, body = get(t, p.APIURL+"/v1/nope")
	assert.Equal(t, 404, code)
	assert.Contains(t, body, `"reason": "not_found"`)
}

func TestDoctorAPIValidatesInput(t *testing.T) {
	p := start(t, devConfig(t), config.ModeDev)
	// Without a token a probe is refused before its body is read: even a valid body is 401.
	resp, err := http.Post(p.APIURL+"/v1/doctor", "application/json", strings.NewReader(`{"hold":"1s"}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 401, resp.StatusCode, string(b))
	var unauth api.ErrorBody
	require.NoError(t, json.Unmarshal(b, &unauth))
	assert.Equal(t, api.ReasonUnauthorized, unauth.Reason)

	// With a token, bad input is 400 invalid_request.
	c := doctorClient(t, p)
	for _, body := range []string{`{"hold":"forever"}`, `{"hold":"-1s"}`, `{"hold":"2h"}`, `{"unknown":1}`, `not json`} {
		req, err := http.NewRequest("POST", p.APIURL+"/v1/doctor", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 400, resp.StatusCode, body)
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(b, &e))
		assert.Equal(t, api.ReasonInvalidRequest, e.Reason, body)
	}
	code, _ := get(t, p.APIURL+"/v1/doctor/doctor-doesnotexist")
	assert.Equal(t, 404, code)
	code, _ = get(t, p.APIURL+"/v1/doctor/lease-123")
	assert.Equal(t, 404, code)
}

// TestServerAndWorkerShareExternalTemporalAndPostgres runs the production layout: an external
// Temporal, a PostgreSQL store, and separate server and worker processes (here: two Process values).
func TestServerAndWorkerShareExternalTemporalAndPostgres(t *testing.T) {
	tmp := testsuite.StartTemporal(t)
	dsn := migrated(t, testsuite.PostgresDSN(t))

	c := config.Default()
	c.Store = dsn
	c.Temporal.Address = tmp.Address
	c.Temporal.TaskQueue = "kobe-prod-layout"
	c.APIAddress = "127.0.0.1:0"
	c.MetricsAddress = "127.0.0.1:0"

	srv := start(t, c, config.ModeServer)
	wrk := start(t, c, config.ModeWorker)
	require.Equal(t, "postgres", srv.Store.Driver())

	code, body := get(t, srv.APIURL+"/readyz")
	require.Equal(t, 200, code, body)

	rep := runDoctor(t, srv, 0)
	requireAllHopsOK(t, rep)
	assert.Equal(t, "postgres", rep.Hops[1].Detail, "the worker wrote to PostgreSQL")

	code, body = get(t, wrk.MetricsURL+"/metrics")
	require.Equal(t, 200, code)
	assert.Contains(t, body, "temporal_activity_execution_latency", "the worker's own metrics show its activity")
	code, _ = get(t, wrk.MetricsURL+"/healthz")
	assert.Equal(t, 200, code)

	var st api.Status
	_, body = get(t, srv.APIURL+"/v1/status")
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.NotEmpty(t, st.Workers, "status lists the worker polling the task queue")
}

// TestStartFailsFastAndLeavesNothing covers the bad configurations an operator meets first.
func TestStartFailsFastAndLeavesNothing(t *testing.T) {
	ctx := context.Background()
	tmp := testsuite.StartTemporal(t)
	apiPort := freePort(t)
	base := config.Default()
	base.Store = migrated(t, "sqlite://"+t.TempDir()+"/kobe.db")
	base.Temporal.Address = tmp.Address
	base.APIAddress = fmt.Sprintf("127.0.0.1:%d", apiPort)

	closed := freePort(t) // nothing listens here
	cases := []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"unreachable temporal", func(c *config.Config) { c.Temporal.Address = fmt.Sprintf("127.0.0.1:%d", closed) },
			fmt.Sprintf("cannot reach Temporal at 127.0.0.1:%d", closed)},
		{"unknown namespace", func(c *config.Config) { c.Temporal.Namespace = "nope" }, `has no namespace "nope"`},
		{"unreachable postgres", func(c *config.Config) { c.Store = fmt.Sprintf("postgres://kobe:secret@127.0.0.1:%d/kobe", closed) },
			"cannot connect"},
		{"bad store scheme", func(c *config.Config) { c.Store = "mongodb://x" }, "unsupported scheme"},
		{"store not migrated", func(c *config.Config) { c.Store = "sqlite://" + filepath.Join(t.TempDir(), "new.db") },
			"has no schema yet (this kobe expects version 12): run `kobe migrate up --store sqlite://"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			t0 := time.Now()
			_, err := service.Start(ctx, c, config.ModeServer, zap.NewNop())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
			assert.NotContains(t, err.Error(), "secret", "no password in errors")
			assert.Less(t, time.Since(t0), 20*time.Second, "fails fast, not after minutes")
			// Nothing is left behind: the API port is free again.
			l, err := net.Listen("tcp", c.APIAddress)
			require.NoError(t, err, "the API port was released")
			l.Close()
		})
	}

	t.Run("port in use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		c := base
		c.APIAddress = l.Addr().String()
		_, err = service.Start(ctx, c, config.ModeServer, zap.NewNop())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--api-address "+l.Addr().String()+" is already in use")

		d := devConfig(t)
		tl, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", d.TemporalPort))
		require.NoError(t, err)
		defer tl.Close()
		_, err = service.Start(ctx, d, config.ModeDev, zap.NewNop())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--temporal-port")
		assert.Contains(t, err.Error(), "already in use")
	})
}

// TestDevRestartResumesInFlightWorkflows stops `kobe dev` while a doctor run waits in its durable
// timer and starts it again on the same state directory: the run completes.
// (The kill -9 variant runs the real binary: see testsuite/e2e.)
func TestDevRestartResumesInFlightWorkflows(t *testing.T) {
	dir := t.TempDir()
	c := devConfig(t)
	c.Ephemeral = false
	c.StateDir = dir
	c.UIPort = 0

	ctx := context.Background()
	p1, err := service.Start(ctx, c, config.ModeDev, zap.NewNop())
	require.NoError(t, err)

	// A second kobe on the same state dir is refused while the first runs.
	c2 := devConfig(t)
	c2.Ephemeral, c2.StateDir, c2.UIPort = false, dir, 0
	_, err = service.Start(ctx, c2, config.ModeDev, zap.NewNop())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is in use by another kobe")

	client := doctorClient(t, p1)
	started, err := client.StartDoctor(ctx, 3*time.Second)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rep, err := client.GetDoctor(ctx, started.ID, 0)
		return err == nil && rep.Stage == "holding"
	}, 30*time.Second, 50*time.Millisecond)
	p1.Stop()

	c.APIAddress = "127.0.0.1:0"
	p2 := start(t, c, config.ModeDev)
	client, err = api.NewClient(p2.APIURL)
	require.NoError(t, err)
	var rep api.DoctorReport
	require.Eventually(t, func() bool {
		rep, err = client.GetDoctor(ctx, started.ID, 5*time.Second)
		return err == nil && rep.Status != "Running"
	}, time.Minute, 100*time.Millisecond)
	requireAllHopsOK(t, rep)
}

// TestDevWithoutWorker: `kobe dev --no-worker` serves Temporal, the API and the store, and starts
// the default pool without waiting for a worker; a separate worker against its Temporal port and
// store file does the work.
func TestDevWithoutWorker(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := devConfig(t)
	c.Ephemeral, c.StateDir, c.UIPort = false, dir, 0
	c.NoWorker, c.NoDefaultPool = true, false
	t0 := time.Now()
	dev := start(t, c, config.ModeDev)
	t.Logf("dev --no-worker started in %s", time.Since(t0).Round(time.Millisecond))
	assert.Empty(t, dev.HostID, "no worker in this process")
	assert.Equal(t, "sqlite://"+filepath.Join(dir, "kobe.db"), dev.StoreDSN)

	// The default pool is declared and its workflow waits for a worker.
	_, err := dev.Store.GetPool(ctx, "dev")
	require.NoError(t, err)
	desc, err := dev.Temporal.DescribeWorkflowExecution(ctx, pool.WorkflowID("dev"), "")
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.WorkflowExecutionInfo.Status)
	var st api.Status
	_, body := get(t, dev.APIURL+"/v1/status")
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Empty(t, st.Workers, "nobody polls the task queue")
	// (No clusters in this test: the pool goes before a worker could provision it.)
	require.NoError(t, dev.Temporal.TerminateWorkflow(ctx, pool.WorkflowID("dev"), "", "test"))

	w := config.Default()
	w.Temporal.Address = dev.TemporalAddress
	w.Store = "sqlite://" + filepath.Join(dir, "kobe.db")
	w.StateDir = dir
	w.SecretKeyFile = filepath.Join(dir, "secret.key")
	w.MetricsAddress = "127.0.0.1:0"
	wrk := start(t, w, config.ModeWorker)
	assert.NotEmpty(t, wrk.HostID)

	// The worker writes the probe row, the dev API reads it: one store file, two connections.
	requireAllHopsOK(t, runDoctor(t, dev, 0))
	_, body = get(t, dev.APIURL+"/v1/status")
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.NotEmpty(t, st.Workers, "status lists the separate worker")
}

// TestDevStartsDefaultPool: `kobe dev` starts the "dev" pool of two warm local clusters; an
// ephemeral run deletes them at stop, leaving no process behind.
func TestDevStartsDefaultPool(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	c := devConfig(t)
	c.NoDefaultPool = false
	c.UIPort = 0
	ctx := context.Background()
	p, err := service.Start(ctx, c, config.ModeDev, zap.NewNop())
	require.NoError(t, err)
	defer p.Stop()

	var st pool.Status
	require.Eventually(t, func() bool {
		v, err := p.Temporal.QueryWorkflow(ctx, pool.WorkflowID("dev"), "", pool.QueryPoolStatus)
		if err != nil {
			return false
		}
		return v.Get(&st) == nil && st.Ready == 2
	}, 3*time.Minute, 200*time.Millisecond)
	assert.Equal(t, api.PoolHealthy, st.Phase)
	// Without a token the status lists no pools (upstream); with the admin token, the dev pool.
	_, body := get(t, p.APIURL+"/v1/status")
	assert.NotContains(t, body, `"name": "dev"`)
	token, err := os.ReadFile(p.AdminTokenFile)
	require.NoError(t, err)
	admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(token))}
	var status map[string]any
	code, _, _ := admin.do("GET", "/v1/status", nil, &status)
	require.Equal(t, 200, code)
	pools, _ := status["pools"].([]any)
	require.Len(t, pools, 1, "%v", status)
	assert.Equal(t, "dev", pools[0].(map[string]any)["name"])
	instances, err := p.Store.ListInstances(ctx, store.InstanceFilter{Pool: "dev", Phase: "Ready"})
	require.NoError(t, err)
	require.Len(t, instances, 2)
	_, body = get(t, p.APIURL+"/metrics")
	assert.Contains(t, body, `kobe_clusters{profile="dev",state="ready"} 2`)
	assert.Contains(t, body, `kobe_queue_depth{profile="dev"} 0`)

	// Lease one, release it: the lease metrics appear, and the lease can be found by its
	// search attributes (what an operator filters on in the Web UI).
	require.True(t, p.SearchAttributes, "kobe dev registers its search attributes")
	in := lease.Input{LeaseID: "lease-metrics", Pool: "dev", Principal: "alice",
		LeaseTerms: poolspec.LeaseTerms{TTL: 10 * time.Minute, MaxTTL: time.Hour, MaxExtensions: 1}}
	_, err = lease.Start(ctx, p.Temporal, "kobe", in, true)
	require.NoError(t, err)
	var lv lease.View
	require.Eventually(t, func() bool {
		v, err := p.Temporal.QueryWorkflow(ctx, "lease-metrics", "", lease.QueryLease)
		return err == nil && v.Get(&lv) == nil && lv.Phase == api.LeaseBound
	}, time.Minute, 50*time.Millisecond)
	findLease := func(query string) bool {
		resp, err := p.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Logf("list %q: %v", query, err)
			return false
		}
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetWorkflowId() == "lease-metrics" {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		return findLease(`KobePool = "dev" AND KobeOwner = "alice" AND KobePhase = "Bound"`)
	}, 30*time.Second, 200*time.Millisecond)
	require.NoError(t, p.Temporal.SignalWorkflow(ctx, "lease-metrics", "", lease.SignalReleaseLease, nil))
	require.Eventually(t, func() bool {
		return findLease(`KobePool = "dev" AND KobePhase = "Released"`)
	}, time.Minute, 200*time.Millisecond)
	require.Eventually(t, func() bool {
		_, body = get(t, p.APIURL+"/metrics")
		return strings.Contains(body, `reason="lease_released"`)
	}, time.Minute, 200*time.Millisecond)
	for _, series := range []string{"kobe_claim_bind_duration_seconds_count", `event="created_fast"`, `event="released"`,
		"kobe_instance_create_duration_seconds_bucket", "kobe_instance_creates_total", `outcome="success"`,
		"kobe_lease_oldest_pending_age_seconds", "kobe_instance_oldest_creating_age_seconds"} {
		assert.Contains(t, body, series)
	}

	p.Stop()
	assert.Empty(t, kubeAPIServersNaming("kobe-ephemeral-"), "an ephemeral run leaves no cluster running")
}

func kubeAPIServersNaming(s string) []leaks.Process {
	return leaks.Named(leaks.ProcessesNaming(s), "kube-apiserver")
}
