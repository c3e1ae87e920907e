package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// These tests run the API against a real embedded Temporal and a real SQLite store. Where the
// API only reads what a pool or lease workflow answers, a stand-in workflow of the same name
// answers with chosen values on a queue of its own, so that the API's mapping is checked apart
// from the workflows' own logic (tested in instance/, pool/, lease/ and testsuite/).

const stubQueue = "api-test-stubs"

// The roles of the tests: an admin, an operator (pool.admin without the admin role), a CI role
// limited to ci-* pools, and an auditor.
const testPolicy = `roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 1000, burst: 1000}}
  operator: {permissions: [lease, pool.read, pool.admin], rateLimit: {requestsPerSecond: 1000, burst: 1000}}
  ci: {permissions: [lease, pool.read], pools: ["ci-*"], rateLimit: {requestsPerSecond: 1000, burst: 1000}}
  auditor: {permissions: [audit.read], rateLimit: {requestsPerSecond: 1000, burst: 1000}}
`

type env struct {
	t   *testing.T
	tc  *testsuite.Temporal
	st  store.Store
	srv *server.Server
	url string
}

// stubPool stands in for a pool's workflow: it answers the status query with st and records the
// member actions it is signalled, which the "stub-actions" query returns.
func stubPool(ctx workflow.Context, st pool.Status) error {
	var actions []string
	if err := workflow.SetQueryHandler(ctx, pool.QueryPoolStatus, func() (pool.Status, error) { return st, nil }); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, "stub-actions", func() ([]string, error) { return actions, nil }); err != nil {
		return err
	}
	retry := workflow.GetSignalChannel(ctx, pool.SignalRetryTeardown)
	forget := workflow.GetSignalChannel(ctx, pool.SignalForgetMember)
	for {
		var a pool.MemberAction
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(retry, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &a)
			actions = append(actions, pool.SignalRetryTeardown+" "+a.InstanceID+" by "+a.Actor)
		})
		sel.AddReceive(forget, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &a)
			actions = append(actions, pool.SignalForgetMember+" "+a.InstanceID+" by "+a.Actor)
		})
		sel.Select(ctx)
	}
}

// stubLease stands in for a lease's workflow: it answers the lease query with v.
func stubLease(ctx workflow.Context, v lease.View) error {
	if err := workflow.SetQueryHandler(ctx, lease.QueryLease, func() (lease.View, error) { return v, nil }); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

func newEnv(t *testing.T) *env {
	t.Helper()
	tc := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	w := sdkworker.New(tc.Client, stubQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(stubPool, workflow.RegisterOptions{Name: pool.WorkflowName})
	w.RegisterWorkflowWithOptions(stubLease, workflow.RegisterOptions{Name: lease.WorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	pol, err := access.ParsePolicy([]byte(testPolicy))
	require.NoError(t, err)
	srv := &server.Server{Temporal: tc.Client, TemporalAddress: tc.Address, Namespace: "default", TaskQueue: "kobe-api-test",
		Store: st, Policy: pol, Backends: []string{"local"}, InstanceName: "api-test", Secrets: secretbox.Random()}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &env{t: t, tc: tc, st: st, srv: srv, url: hs.URL}
}

// token registers a token of a role for a principal and returns its secret.
func (e *env) token(name, role string, expires time.Time) string {
	e.t.Helper()
	id, secret, err := access.NewToken()
	require.NoError(e.t, err)
	_, err = e.st.CreateToken(context.Background(), store.Token{ID: id, Name: name, Role: role, Principal: name,
		Hash: access.HashToken(secret), ExpiresAt: expires})
	require.NoError(e.t, err)
	return secret
}

// do sends a request and returns the status and the raw body.
func (e *env) do(token, method, path, body string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, raw
}

// getJSON sends a request that must answer want, and decodes its body into out.
func (e *env) getJSON(token, method, path, body string, want int, out any) {
	e.t.Helper()
	status, raw := e.do(token, method, path, body)
	require.Equal(e.t, want, status, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(e.t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
}

func (e *env) reason(raw []byte) string {
	var eb api.ErrorBody
	require.NoError(e.t, json.Unmarshal(raw, &eb), "an error envelope: %s", raw)
	return string(eb.Reason)
}

func (e *env) pool(name string) {
	e.t.Helper()
	spec := `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"` + name +
		`"},"spec":{"size":1,"backend":{"type":"local"},"cluster":{"version":"v1.37.2"}}}`
	require.NoError(e.t, e.st.UpsertPool(context.Background(), store.Pool{Name: name, Backend: "local", Spec: json.RawMessage(spec)}))
}

// startStubPool runs the stand-in pool workflow for a pool.
func (e *env) startStubPool(name string, st pool.Status) {
	e.t.Helper()
	_, err := e.tc.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: pool.WorkflowID(name), TaskQueue: stubQueue},
		pool.WorkflowName, st)
	require.NoError(e.t, err)
}

func (e *env) stubActions(name string) []string {
	e.t.Helper()
	v, err := e.tc.Client.QueryWorkflow(context.Background(), pool.WorkflowID(name), "", "stub-actions")
	require.NoError(e.t, err)
	var out []string
	require.NoError(e.t, v.Get(&out))
	return out
}

// /v1/status says which authentication is in force, lists no pool without a token, describes a
// token's session (never its secret) and lists the pools its role may use; a bad token is 401.
func TestStatusIsTruthful(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"ci-a", "ci-b", "secret-team"} {
		e.pool(p)
	}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	ciTok := e.token("github", "ci", exp)
	adminTok := e.token("root", "admin", time.Time{})

	type session struct {
		Principal string     `json:"principal"`
		Role      string     `json:"role"`
		TokenName string     `json:"tokenName"`
		TokenID   string     `json:"tokenId"`
		ExpiresAt *time.Time `json:"expiresAt"`
	}
	type status struct {
		Auth struct {
			Methods  []string  `json:"methods"`
			Sessions []session `json:"sessions"`
		} `json:"auth"`
		Pools []struct {
			Name string `json:"name"`
		} `json:"pools"`
	}
	names := func(st status) []string {
		var out []string
		for _, p := range st.Pools {
			out = append(out, p.Name)
		}
		return out
	}

	var anon status
	e.getJSON("", "GET", "/v1/status", "", 200, &anon)
	assert.Equal(t, []string{"bearer"}, anon.Auth.Methods, "bearer tokens are enforced")
	assert.Empty(t, anon.Auth.Sessions)
	assert.Empty(t, anon.Pools, "no pools without a token")

	var ci status
	e.getJSON(ciTok, "GET", "/v1/status", "", 200, &ci)
	require.Len(t, ci.Auth.Sessions, 1)
	s := ci.Auth.Sessions[0]
	assert.Equal(t, "github", s.Principal)
	assert.Equal(t, "ci", s.Role)
	assert.Equal(t, "github", s.TokenName)
	assert.True(t, strings.HasPrefix(s.TokenID, "tok-"), s.TokenID)
	require.NotNil(t, s.ExpiresAt)
	assert.True(t, exp.Equal(*s.ExpiresAt), "expiry %v", s.ExpiresAt)
	assert.Equal(t, []string{"ci-a", "ci-b"}, names(ci), "only the pools of the role's globs")
	_, raw := e.do(ciTok, "GET", "/v1/status", "")
	assert.NotContains(t, string(raw), ciTok, "the secret is never shown")

	var admin status
	e.getJSON(adminTok, "GET", "/v1/status", "", 200, &admin)
	assert.Equal(t, []string{"ci-a", "ci-b", "secret-team"}, names(admin))
	assert.Nil(t, admin.Auth.Sessions[0].ExpiresAt)

	status401, raw := e.do("kobe_nonsense", "GET", "/v1/status", "")
	assert.Equal(t, 401, status401, "an invalid bearer is refused, not taken for anonymous: %s", raw)
	assert.Equal(t, "unauthorized", e.reason(raw))
}

// Leases and pools are listed as bare JSON arrays, as upstream; a pool is a "Cluster" resource
// whose capabilities are what the caller may do; a pool's leases hide other tenants.
func TestListShapesAndPoolLeases(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ci-a")
	e.startStubPool("ci-a", pool.Status{Name: "ci-a", Phase: "Healthy", Ready: 1, Leased: 2, Unhealthy: 2, Quarantined: 1})
	ciTok := e.token("alice", "ci", time.Time{})
	adminTok := e.token("root", "admin", time.Time{})
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for _, l := range []store.Lease{
		{ID: "lease-a1", Pool: "ci-a", Principal: "alice", Role: "ci", Phase: "Bound", InstanceID: "ci-a-1", Alias: "mine", Metadata: map[string]string{"job": "1"}, ExpiresAt: exp},
		{ID: "lease-b1", Pool: "ci-a", Principal: "bob", Role: "ci", Phase: "Bound", InstanceID: "ci-a-2", Alias: "bobs", Metadata: map[string]string{"secret": "x"}, ExpiresAt: exp},
		{ID: "lease-b2", Pool: "ci-a", Principal: "bob", Role: "ci", Phase: "Released"},
	} {
		l.TTL = time.Hour
		require.NoError(t, e.st.UpsertLease(ctx, l))
	}

	var leases []map[string]any
	e.getJSON(ciTok, "GET", "/v1/leases", "", 200, &leases)
	require.Len(t, leases, 1, "a bare array of the caller's active leases")
	assert.Equal(t, "lease-a1", leases[0]["id"])
	assert.Equal(t, "Cluster", leases[0]["resourceKind"])
	assert.Equal(t, []any{"kubeconfig", "extend", "release"}, leases[0]["capabilities"])

	var pools []map[string]any
	e.getJSON(ciTok, "GET", "/v1/pools", "", 200, &pools)
	require.Len(t, pools, 1, "a bare array")
	p := pools[0]
	assert.Equal(t, "Cluster", p["resourceKind"])
	assert.Equal(t, []any{"lease", "kubeconfig", "extend", "release"}, p["capabilities"], "the operations open to a ci caller")
	assert.Equal(t, float64(2), p["unhealthy"], "from the pool's status")
	assert.Equal(t, float64(1), p["quarantined"], "from the pool's status")
	var adminPool map[string]any
	e.getJSON(adminTok, "GET", "/v1/pools/ci-a", "", 200, &adminPool)
	assert.Equal(t, []any{"lease", "kubeconfig", "extend", "release", "apply", "delete"}, adminPool["capabilities"])

	var mine []map[string]any
	e.getJSON(ciTok, "GET", "/v1/pools/ci-a/leases", "", 200, &mine)
	require.Len(t, mine, 2, "the pool's active leases")
	byID := map[string]map[string]any{}
	for _, l := range mine {
		byID[l["id"].(string)] = l
	}
	assert.Equal(t, "alice", byID["lease-a1"]["requester"], "one's own lease is shown whole")
	assert.Equal(t, "mine", byID["lease-a1"]["alias"])
	assert.Equal(t, "ci-a-2", byID["lease-b1"]["cluster_name"])
	assert.Equal(t, "Bound", byID["lease-b1"]["phase"])
	assert.Equal(t, "ci-a", byID["lease-b1"]["profile"])
	assert.NotNil(t, byID["lease-b1"]["expires_at"])
	for _, k := range []string{"requester", "alias", "metadata"} {
		assert.NotContains(t, byID["lease-b1"], k, "another tenant's %s is redacted", k)
	}
	var all []map[string]any
	e.getJSON(adminTok, "GET", "/v1/pools/ci-a/leases?all=true", "", 200, &all)
	require.Len(t, all, 3)
	for _, l := range all {
		assert.NotEmpty(t, l["requester"], "an admin sees every requester")
	}
	status, raw := e.do(ciTok, "GET", "/v1/pools/nope/leases", "")
	assert.Equal(t, 404, status)
	assert.Equal(t, "not_found", e.reason(raw))
}

// GET /v1/leases/{id} shows the conditions the lease's workflow reports.
func TestLeaseShowsConditions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ci-a")
	tok := e.token("alice", "ci", time.Time{})
	require.NoError(t, e.st.UpsertLease(ctx, store.Lease{ID: "lease-c1", Pool: "ci-a", Principal: "alice", Role: "ci", Phase: "Bound", TTL: time.Hour}))
	sealed, err := e.srv.Secrets.Seal([]byte("apiVersion: v1\n"), []byte("lease-c1"))
	require.NoError(t, err)
	require.NoError(t, e.st.PutLeaseCredential(ctx, store.LeaseCredential{LeaseID: "lease-c1", Sealed: sealed, ExpiresAt: time.Now().Add(time.Hour)}))
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err = e.tc.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: leasestart.WorkflowID("lease-c1"), TaskQueue: stubQueue},
		lease.WorkflowName, lease.View{ID: "lease-c1", Pool: "ci-a", Phase: "Bound", InstanceID: "ci-a-1",
			Conditions: []api.LeaseCondition{{Type: lease.ConditionInstanceHealthy, Status: "False", Reason: pool.ReasonHealthFailed,
				Message: "3 failed checks: connection refused", LastTransitionTime: at}}})
	require.NoError(t, err)
	var l map[string]any
	e.getJSON(tok, "GET", "/v1/leases/lease-c1", "", 200, &l)
	assert.Equal(t, []any{map[string]any{"type": "InstanceHealthy", "status": "False", "reason": "health_failed",
		"message": "3 failed checks: connection refused", "lastTransitionTime": "2030-01-02T03:04:05Z"}}, l["conditions"])
	assert.Equal(t, "apiVersion: v1\n", l["kubeconfig"])
}

// kobe_clusters{profile,state} and kobe_queue_depth{profile} are on every scrape, for every
// pool: from the pool's workflow when it answers, from the store's rows when it does not (here:
// a pool whose workflow is not running), and as zeros for the pools already known when the
// store cannot list them.
func TestPoolMetricsOnEveryScrape(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("ci-a")
	e.pool("ci-gone")
	e.startStubPool("ci-a", pool.Status{Name: "ci-a", Phase: "Healthy", Ready: 3, Leased: 1, Creating: 1, Deleting: 1, Unhealthy: 1, Quarantined: 2, QueueDepth: 4})
	for i, phase := range []api.InstancePhase{"Ready", "Ready", "Creating", "Quarantined"} {
		require.NoError(t, e.st.UpsertInstance(ctx, store.Instance{ID: "ci-gone-" + string(rune('a'+i)), Pool: "ci-gone", Backend: "local", Phase: phase}))
	}
	require.NoError(t, e.st.UpsertLease(ctx, store.Lease{ID: "lease-q", Pool: "ci-gone", Principal: "p", Phase: "Pending", TTL: time.Hour}))

	reg := prometheusRegistry(&server.PoolCollector{Temporal: e.tc.Client, Store: e.st})
	want := map[string]float64{
		`kobe_clusters{profile="ci-a",state="ready"}`: 3, `kobe_clusters{profile="ci-a",state="leased"}`: 1,
		`kobe_clusters{profile="ci-a",state="creating"}`: 1, `kobe_clusters{profile="ci-a",state="recycling"}`: 1,
		`kobe_clusters{profile="ci-a",state="unhealthy"}`: 1, `kobe_clusters{profile="ci-a",state="quarantined"}`: 2,
		`kobe_queue_depth{profile="ci-a"}`:               4,
		`kobe_clusters{profile="ci-gone",state="ready"}`: 2, `kobe_clusters{profile="ci-gone",state="leased"}`: 0,
		`kobe_clusters{profile="ci-gone",state="creating"}`: 1, `kobe_clusters{profile="ci-gone",state="recycling"}`: 0,
		`kobe_clusters{profile="ci-gone",state="unhealthy"}`: 0, `kobe_clusters{profile="ci-gone",state="quarantined"}`: 1,
		`kobe_queue_depth{profile="ci-gone"}`: 1,
	}
	got := scrape(t, reg)
	for k, v := range want {
		if assert.Contains(t, got, k, "present on the scrape") {
			assert.Equal(t, v, got[k], k)
		}
	}

	// The store goes away: the pools seen before are still reported (their workflows' counts
	// where they answer, zeros where nothing can say).
	require.NoError(t, e.st.Close())
	got = scrape(t, reg)
	assert.Equal(t, float64(3), got[`kobe_clusters{profile="ci-a",state="ready"}`])
	for _, k := range []string{`kobe_clusters{profile="ci-gone",state="ready"}`, `kobe_queue_depth{profile="ci-gone"}`} {
		if assert.Contains(t, got, k, "present although the store failed") {
			assert.Equal(t, float64(0), got[k], k)
		}
	}
}
