package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/testsuite"
	"github.com/kunobi-ninja/kobe/testsuite/oidcprovider"
	"github.com/kunobi-ninja/kobe/worker"
)

// The upstream GitHub Action's flow against a real kobe (embedded Temporal, SQLite store, a
// worker with the local backend running real kube-apiservers) and a real OpenID provider: the
// job's OIDC token (audience kobe-system) POSTs {profile, ttl}, polls until Bound, uses the
// kubeconfig, and DELETEs with a freshly minted token. The claim rule's limits apply (TTL
// clamped to its maxTtl, its maxConcurrentLeases, its maxExtensions); a job of another
// repository gets the same 404 as for an unknown lease; a repository no rule admits is 403;
// /v1/status advertises bearer and oidc and describes the job's session; the audit log names
// the job's identity.
func TestGitHubActionsFlowWithOIDCToken(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	op := oidcprovider.Start(t)
	tc := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	box := secretbox.Random()
	const queue = "kobe-oidc-test"
	h, err := worker.StartHost(worker.HostConfig{Client: tc.Client, Store: st, SharedQueue: queue, StateDir: t.TempDir(), Secrets: box})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := h.DeleteInstances(); err != nil {
			t.Logf("deleting the host's instances: %v", err)
		}
	})
	t.Cleanup(h.Stop)

	pol, err := access.ParsePolicy([]byte(`roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens], rateLimit: {requestsPerSecond: 1000, burst: 1000}}
  ci: {permissions: [lease, pool.read], maxConcurrentLeases: 10, rateLimit: {requestsPerSecond: 1000, burst: 1000}}
oidc:
  issuers:
  - issuer: ` + op.Issuer + `
    audiences: [kobe-system]
    rules:
    - match: {repository: "acme/*"}
      role: ci
      pools: ["ci-*"]
      maxTtl: 15m
      maxConcurrentLeases: 1
      maxExtensions: 1
`))
	require.NoError(t, err)
	srv := &server.Server{Temporal: tc.Client, TemporalAddress: tc.Address, Namespace: "default", TaskQueue: queue,
		Store: st, Policy: pol, Backends: []string{"local"}, InstanceName: "oidc-test", Secrets: box}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	do := func(token, method, path, body string) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, hs.URL+path, rd)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, raw
	}
	reason := func(raw []byte) api.ReasonCode {
		var eb api.ErrorBody
		require.NoError(t, json.Unmarshal(raw, &eb), "%s", raw)
		return eb.Reason
	}

	// The operator applies a pool with kobe's own admin token.
	id, adminToken, err := access.NewToken()
	require.NoError(t, err)
	_, err = st.CreateToken(context.Background(), store.Token{ID: id, Name: "root", Role: "admin", Principal: "root", Hash: access.HashToken(adminToken)})
	require.NoError(t, err)
	status, raw := do(adminToken, "PUT", "/v1/pools/ci-small", `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"ci-small"},
		"spec":{"size":1,"ttl":"10m","backend":{"type":"local"},"cluster":{"version":"v1.37.2"}}}`)
	require.Contains(t, []int{200, 201}, status, "%s", raw)

	jobA := oidcprovider.GitHubJob("acme/app", "refs/heads/main")
	jobB := oidcprovider.GitHubJob("acme/other", "refs/heads/main")
	identityA := op.Issuer + "#repo:acme/app:ref:refs/heads/main" // the default prefix: the issuer

	// The action's request: {profile, ttl} with the job's token. The rule's maxTtl clamps 1h.
	status, raw = do(op.Token(t, jobA), "POST", "/v1/leases", `{"profile":"ci-small","ttl":"1h"}`)
	require.Contains(t, []int{200, 202}, status, "200 Bound on a warm bind, else 202 Pending: %s", raw)
	var l api.Lease
	require.NoError(t, json.Unmarshal(raw, &l))
	assert.Equal(t, "15m0s", l.EffectiveTTL, "the rule's maxTtl")
	if status == 202 {
		assert.Equal(t, api.LeasePending, l.Phase)
	} else {
		assert.Equal(t, api.LeaseBound, l.Phase)
	}

	// The rule's maxConcurrentLeases is 1 for this identity.
	status, raw = do(op.Token(t, jobA), "POST", "/v1/leases", `{"profile":"ci-small","ttl":"5m"}`)
	assert.Equal(t, 429, status, "%s", raw)
	assert.Equal(t, api.ReasonQuotaExhausted, reason(raw))
	// The rule's pools: ci-* only.
	status, raw = do(op.Token(t, jobA), "POST", "/v1/leases", `{"profile":"default","ttl":"5m"}`)
	assert.Contains(t, []int{403, 404}, status, "%s", raw)

	// Poll like the action, each poll with the job's token, until Bound.
	deadline := time.Now().Add(5 * time.Minute)
	for l.Phase != api.LeaseBound {
		require.True(t, time.Now().Before(deadline), "the lease did not bind: %+v", l)
		status, raw = do(op.Token(t, jobA), "GET", "/v1/leases/"+l.ID+"?wait=30s", "")
		require.Equal(t, 200, status, "%s", raw)
		require.NoError(t, json.Unmarshal(raw, &l))
		require.NotContains(t, []api.LeasePhase{api.LeaseFailed, api.LeaseReleased, api.LeaseExpired}, l.Phase, "%s", raw)
	}
	require.NotEmpty(t, l.Kubeconfig)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(l.Kubeconfig))
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
	require.NoError(t, err, "the kubeconfig works")
	status, raw = do(op.Token(t, jobA), "GET", "/v1/leases/"+l.ID+"/kubeconfig", "")
	require.Equal(t, 200, status, "%s", raw)
	assert.Contains(t, string(raw), "apiVersion: v1")

	// Another repository's job sees nothing of it: the same 404 as an unknown lease.
	tokB := op.Token(t, jobB)
	for _, m := range []string{"GET", "DELETE"} {
		status, raw = do(tokB, m, "/v1/leases/"+l.ID, "")
		assert.Equal(t, 404, status, "%s %s", m, raw)
		assert.Equal(t, api.ReasonNotFound, reason(raw))
	}
	status, raw = do(tokB, "PATCH", "/v1/leases/"+l.ID, `{"extendTtl":"5m"}`)
	assert.Equal(t, 404, status, "%s", raw)
	status, raw = do(tokB, "GET", "/v1/leases", "")
	require.Equal(t, 200, status)
	assert.JSONEq(t, `[]`, string(raw))
	_, unknown := do(tokB, "GET", "/v1/leases/lease-00000000", "")
	_, other := do(tokB, "GET", "/v1/leases/"+l.ID, "")
	assert.JSONEq(t, string(unknown), string(other), "indistinguishable from an unknown lease")

	// The rule's maxTtl caps extensions too: the lease already has all of its 15 minutes.
	status, raw = do(op.Token(t, jobA), "PATCH", "/v1/leases/"+l.ID, `{"extendTtl":"1m"}`)
	assert.Equal(t, 409, status, "%s", raw)
	assert.Equal(t, api.ReasonMaxTTLCeiling, reason(raw))

	// A repository no rule admits.
	status, raw = do(op.Token(t, oidcprovider.GitHubJob("evil/app", "refs/heads/main")), "POST", "/v1/leases", `{"profile":"ci-small"}`)
	assert.Equal(t, 403, status, "%s", raw)
	assert.Equal(t, api.ReasonForbidden, reason(raw))

	// /v1/status: the methods in force, and the job's session.
	var stat api.Status
	status, raw = do(op.Token(t, jobA), "GET", "/v1/status", "")
	require.Equal(t, 200, status, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &stat))
	assert.Equal(t, []string{"bearer", "oidc"}, stat.Auth.Methods)
	assert.Equal(t, []string{op.Issuer}, stat.Auth.Issuers)
	require.Len(t, stat.Auth.Sessions, 1)
	assert.Equal(t, identityA, stat.Auth.Sessions[0].Principal)
	assert.Equal(t, "oidc", stat.Auth.Sessions[0].Method)
	assert.Equal(t, "ci", stat.Auth.Sessions[0].Role)
	assert.NotNil(t, stat.Auth.Sessions[0].ExpiresAt)
	var names []string
	for _, p := range stat.Pools {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"ci-small"}, names)

	// The action's cleanup step: DELETE with a freshly minted token of the same job.
	release := func(id string) {
		t.Helper()
		status, raw := do(op.Token(t, jobA), "DELETE", "/v1/leases/"+id, "")
		require.Equal(t, 204, status, "%s", raw)
		require.Eventually(t, func() bool {
			_, raw := do(op.Token(t, jobA), "GET", "/v1/leases/"+id, "")
			var after api.Lease
			return json.Unmarshal(raw, &after) == nil && after.Phase == api.LeaseReleased
		}, 2*time.Minute, 200*time.Millisecond)
	}
	release(l.ID)

	// The next job run of the same identity may lease again (its one lease ended); the rule's
	// maxExtensions is 1.
	// (The store's row of the first lease follows its workflow a moment later; until it does, the
	// identity still holds its one lease: 429 quota_exhausted.)
	require.Eventually(t, func() bool {
		status, raw = do(op.Token(t, jobA), "POST", "/v1/leases", `{"profile":"ci-small","ttl":"5m"}`)
		if status == 429 {
			require.Equal(t, api.ReasonQuotaExhausted, reason(raw))
		}
		return status != 429
	}, time.Minute, 100*time.Millisecond)
	require.Contains(t, []int{200, 202}, status, "200 Bound on a warm bind, else 202 Pending: %s", raw)
	var l2 api.Lease
	require.NoError(t, json.Unmarshal(raw, &l2))
	deadline = time.Now().Add(5 * time.Minute)
	for l2.Phase != api.LeaseBound {
		require.True(t, time.Now().Before(deadline), "the second lease did not bind: %+v", l2)
		status, raw = do(op.Token(t, jobA), "GET", "/v1/leases/"+l2.ID+"?wait=30s", "")
		require.Equal(t, 200, status, "%s", raw)
		require.NoError(t, json.Unmarshal(raw, &l2))
		require.NotContains(t, []api.LeasePhase{api.LeaseFailed, api.LeaseReleased, api.LeaseExpired}, l2.Phase, "%s", raw)
	}
	status, raw = do(op.Token(t, jobA), "PATCH", "/v1/leases/"+l2.ID, `{"extendTtl":"1m"}`)
	assert.Equal(t, 200, status, "%s", raw)
	status, raw = do(op.Token(t, jobA), "PATCH", "/v1/leases/"+l2.ID, `{"extendTtl":"1m"}`)
	assert.Equal(t, 409, status, "%s", raw)
	assert.Equal(t, api.ReasonExtensionBudgetExhausted, reason(raw))
	release(l2.ID)

	// The audit log names the job's identity on what it did.
	evs, err := st.ListEvents(context.Background(), store.EventFilter{Actor: identityA})
	require.NoError(t, err)
	var actions []string
	for _, ev := range evs {
		actions = append(actions, fmt.Sprintf("%s %s", ev.Action, ev.Result))
	}
	assert.Contains(t, strings.Join(actions, "\n"), "lease.create")
	assert.Contains(t, strings.Join(actions, "\n"), "lease.release requested")
	assert.Contains(t, strings.Join(actions, "\n"), "lease.extend ok")
	t.Logf("audit of %s: %v", identityA, actions)
}
