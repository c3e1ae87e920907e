package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/testsuite"
)

type apiCaller struct {
	t     *testing.T
	base  string
	token string
}

func (c apiCaller) do(method, path string, body any, out any) (int, api.ErrorBody, http.Header) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	if resp.StatusCode >= 400 {
		require.NoError(c.t, json.Unmarshal(raw, &eb), "error body %s", raw)
		assert.NotEmpty(c.t, eb.Reason, "every error has a reason: %s", raw)
	} else if out != nil && len(raw) > 0 {
		require.NoError(c.t, json.Unmarshal(raw, out), "%s", raw)
	}
	return resp.StatusCode, eb, resp.Header
}

// The lease API on `kobe dev` with its default pool of real local clusters: the upstream flow
// (POST → poll → kubeconfig → DELETE), ownership (another principal's lease is 404), roles
// (401 without a token, 403 outside the pool glob), idempotency, extension limits, audit.
func TestLeaseAPIOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("real clusters; skipped with -short")
	}
	c := devConfig(t)
	c.NoDefaultPool = false
	c.UIPort = 0
	policy := t.TempDir() + "/policy.yaml"
	require.NoError(t, os.WriteFile(policy, []byte(`roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}
  ci: {permissions: [lease, pool.read], maxConcurrentLeases: 2, maxExtensions: 1}
  ci-only: {permissions: [lease], pools: ["ci-*"]}
  auditor: {permissions: [audit.read]}
`), 0o600))
	c.Policy = policy
	p := start(t, c, config.ModeDev)
	adminToken, err := os.ReadFile(p.AdminTokenFile)
	require.NoError(t, err)
	info, err := os.Stat(p.AdminTokenFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(adminToken))}

	// No token, a bad token: 401.
	status, eb, _ := apiCaller{t, p.APIURL, ""}.do("GET", "/v1/leases", nil, nil)
	assert.Equal(t, 401, status)
	assert.Equal(t, api.ReasonCode("unauthorized"), eb.Reason)
	status, _, _ = apiCaller{t, p.APIURL, "kobe_nonsense"}.do("POST", "/v1/leases", `{"profile":"dev"}`, nil)
	assert.Equal(t, 401, status)

	// Tokens for two CI principals, one restricted to ci-* pools, an auditor.
	mk := func(name, role string) apiCaller {
		var tok api.Token
		status, _, _ := admin.do("POST", "/v1/tokens", api.TokenRequest{Name: name, Role: role}, &tok)
		require.Equal(t, 201, status)
		require.True(t, strings.HasPrefix(tok.Secret, "kobe_"))
		return apiCaller{t, p.APIURL, tok.Secret}
	}
	alice, bob, restricted, auditor := mk("alice", "ci"), mk("bob", "ci"), mk("carol", "ci-only"), mk("audrey", "auditor")
	status, eb, _ = admin.do("POST", "/v1/tokens", api.TokenRequest{Name: "x", Role: "root"}, nil)
	assert.Equal(t, 400, status)
	assert.Contains(t, eb.Detail, `role: "root" is not a role`)
	status, eb, _ = restricted.do("POST", "/v1/leases", `{"profile":"dev"}`, nil)
	assert.Equal(t, 403, status)
	assert.Equal(t, api.ReasonCode("forbidden"), eb.Reason)
	assert.Contains(t, eb.Detail, "ci-*")
	status, eb, _ = auditor.do("POST", "/v1/leases", `{"profile":"dev"}`, nil)
	assert.Equal(t, 403, status)

	// Bad requests: 400 with a reason, never a 500.
	for _, body := range []string{`{"profile":"dev","ttl":"soon"}`, `{}`, `{"pool":"dev","profile":"other"}`,
		`{"profile":"dev","bogus":1}`, `not json`, `{"profile":"dev","alias":"Not A Label"}`} {
		status, eb, _ = alice.do("POST", "/v1/leases", body, nil)
		assert.Equal(t, 400, status, body)
		assert.Equal(t, api.ReasonCode("invalid_request"), eb.Reason, body)
	}
	status, eb, _ = alice.do("POST", "/v1/leases", `{"profile":"nope"}`, nil)
	assert.Equal(t, 404, status)

	// The upstream flow, exactly as an existing client sends it.
	var lease api.Lease
	status, _, _ = alice.do("POST", "/v1/leases", `{"profile": "dev", "ttl": "1h"}`, &lease)
	// 200 Bound with the kubeconfig on a warm bind, 202 Pending otherwise (then poll).
	require.Contains(t, []int{200, 202}, status)
	if status == 202 {
		assert.Equal(t, api.LeasePending, lease.Phase)
	} else {
		assert.Equal(t, api.LeaseBound, lease.Phase)
		assert.NotEmpty(t, lease.Kubeconfig)
	}
	assert.Equal(t, "Cluster", lease.ResourceKind)
	assert.Equal(t, "dev", lease.Profile)
	assert.Equal(t, "1h0m0s", lease.EffectiveTTL)
	assert.True(t, strings.HasPrefix(lease.ID, "lease-"))
	deadline := time.Now().Add(2 * time.Minute)
	for lease.Phase == "Pending" && time.Now().Before(deadline) {
		status, _, _ = alice.do("GET", "/v1/leases/"+lease.ID+"?wait=20s", nil, &lease)
		require.Equal(t, 200, status)
	}
	require.Equal(t, api.LeaseBound, lease.Phase)
	require.NotEmpty(t, lease.Kubeconfig)
	require.NotNil(t, lease.ExpiresAt)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(lease.Kubeconfig))
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the lease's kubeconfig works")
	assert.NotEmpty(t, nss.Items)

	// Someone else's lease does not exist for bob: get, extend, delete are all 404, same body.
	for _, m := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"extendTtl":"5m"}`}, {"DELETE", ""}} {
		var body any
		if m.body != "" {
			body = m.body
		}
		status, eb, _ = bob.do(m.method, "/v1/leases/"+lease.ID, body, nil)
		assert.Equal(t, 404, status, m.method)
		assert.Equal(t, api.ErrorBody{Error: "Lease not found", Reason: "not_found"}, eb)
	}
	var bobs []api.Lease
	bob.do("GET", "/v1/leases", nil, &bobs)
	assert.Empty(t, bobs)

	// Extend: the ci role allows one extension; the second is refused with the reason.
	var ext api.ExtendResponse
	status, _, _ = alice.do("PATCH", "/v1/leases/"+lease.ID, `{"extend_ttl":"10m"}`, &ext)
	require.Equal(t, 200, status)
	assert.Equal(t, lease.ExpiresAt.Add(10*time.Minute).Unix(), ext.ExpiresAt.Unix())
	status, eb, _ = alice.do("PATCH", "/v1/leases/"+lease.ID, `{"extendTtl":"10m"}`, nil)
	assert.Equal(t, 409, status)
	assert.Equal(t, api.ReasonCode("extension_budget_exhausted"), eb.Reason)

	// Idempotency: the same key and body → the same lease (200); another body → 409.
	var first, again api.Lease
	req := `{"profile":"dev","idempotencyKey":"job-42","alias":"job"}`
	status, _, _ = alice.do("POST", "/v1/leases", req, &first)
	require.Contains(t, []int{200, 202}, status)
	status, _, _ = alice.do("POST", "/v1/leases", req, &again)
	assert.Equal(t, 200, status)
	assert.Equal(t, first.ID, again.ID)
	status, eb, _ = alice.do("POST", "/v1/leases", `{"profile":"dev","idempotencyKey":"job-42","ttl":"5m"}`, nil)
	assert.Equal(t, 409, status)
	assert.Equal(t, api.ReasonCode("idempotency_conflict"), eb.Reason)
	// Alias lookup, and alice's quota (2 at once) is used up.
	var byAlias api.Lease
	status, _, _ = alice.do("GET", "/v1/leases/job", nil, &byAlias)
	assert.Equal(t, 200, status)
	assert.Equal(t, first.ID, byAlias.ID)
	status, eb, _ = alice.do("POST", "/v1/leases", `{"profile":"dev"}`, nil)
	assert.Equal(t, 429, status)
	assert.Equal(t, api.ReasonCode("quota_exhausted"), eb.Reason)
	assert.Contains(t, eb.Detail, "2 of 2")

	// Release: 204, again 204; the lease ends Released.
	for range 2 {
		status, _, _ = alice.do("DELETE", "/v1/leases/"+lease.ID, nil, nil)
		assert.Equal(t, 204, status)
	}
	status, _, _ = alice.do("DELETE", "/v1/leases/"+first.ID, nil, nil)
	assert.Equal(t, 204, status)
	require.Eventually(t, func() bool {
		var l api.Lease
		alice.do("GET", "/v1/leases/"+lease.ID, nil, &l)
		return l.Phase == "Released" && l.Kubeconfig == ""
	}, time.Minute, 100*time.Millisecond)

	// Pools for readers; audit for auditors (not for ci).
	var pl []api.PoolView
	status, _, _ = alice.do("GET", "/v1/pools", nil, &pl)
	require.Equal(t, 200, status)
	require.Len(t, pl, 1)
	assert.Equal(t, "dev", pl[0].Name)
	status, _, _ = alice.do("GET", "/v1/audit", nil, nil)
	assert.Equal(t, 403, status)
	var audit api.AuditList
	require.Eventually(t, func() bool {
		status, _, _ = auditor.do("GET", "/v1/audit?pool=dev", nil, &audit)
		seen := map[string]bool{}
		for _, e := range audit.Items {
			if e.Target == lease.ID {
				seen[e.Action] = true
			}
		}
		return status == 200 && seen["lease.create"] && seen["lease.bound"] && seen["lease.extend"] && seen["lease.release"] && seen["lease.released"]
	}, time.Minute, 200*time.Millisecond, "audit: %+v", audit.Items)
	for _, e := range audit.Items {
		if e.Action == "lease.create" && e.Target == lease.ID {
			assert.Equal(t, "alice", e.Actor)
			assert.NotEmpty(t, e.RequestID)
		}
	}

	// The documented curl flow (docs/lease-with-curl.sh), run as is.
	kubeconfig := t.TempDir() + "/kubeconfig"
	cmd := exec.Command("sh", "../../docs/lease-with-curl.sh", "dev", kubeconfig)
	cmd.Env = append(os.Environ(), "KOBE_SERVER="+p.APIURL, "KOBE_TOKEN="+admin.token)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("curl flow:\n%s", out)
	assert.Contains(t, string(out), "released")
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err, "the curl flow saved a kubeconfig")
	assert.NotEmpty(t, cfg.Host)
}

// A burst of 200 concurrent lease requests from one principal whose role allows 5 at once
// admits exactly 5, on both store drivers, through the real API.
func TestConcurrentAdmission(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			c := devConfig(t)
			c.UIPort = 0
			if driver == "postgres" {
				c.Store = testsuite.PostgresDSN(t)
			}
			policy := t.TempDir() + "/policy.yaml"
			require.NoError(t, os.WriteFile(policy, []byte(`roles:
  admin: {permissions: [lease, pool.read, pool.admin, audit.read, tokens]}
  ci:
    permissions: [lease]
    maxConcurrentLeases: 5
    rateLimit: {requestsPerSecond: 10000, burst: 10000}
`), 0o600))
			c.Policy = policy
			p := start(t, c, config.ModeDev)
			adminToken, err := os.ReadFile(p.AdminTokenFile)
			require.NoError(t, err)
			admin := apiCaller{t, p.APIURL, strings.TrimSpace(string(adminToken))}
			// A pool with no warm clusters: admitted leases wait in its queue (and hold quota).
			status, _, _ := admin.do("PUT", "/v1/pools/burst", `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: burst}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling: {minReady: 0, maxClusters: 1, queueTimeout: 10m}
`, nil)
			require.Equal(t, 201, status)
			var tok api.Token
			admin.do("POST", "/v1/tokens", api.TokenRequest{Name: "matrix", Role: "ci"}, &tok)
			ci := apiCaller{t, p.APIURL, tok.Secret}

			codes := make([]int, 200)
			reasons := make([]string, 200)
			ids := make([]string, 200)
			var wg sync.WaitGroup
			for i := range 200 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var l api.Lease
					var eb api.ErrorBody
					codes[i], eb, _ = ci.do("POST", "/v1/leases", `{"profile":"burst","ttl":"10m"}`, &l)
					reasons[i], ids[i] = string(eb.Reason), l.ID
				}()
			}
			wg.Wait()
			admitted, refused := 0, 0
			for i, code := range codes {
				switch {
				case code == 202:
					admitted++
				case code == 429 && reasons[i] == "quota_exhausted":
					refused++
				default:
					t.Errorf("request %d: %d %s", i, code, reasons[i])
				}
			}
			assert.Equal(t, 5, admitted)
			assert.Equal(t, 195, refused)
			var mine []api.Lease
			ci.do("GET", "/v1/leases", nil, &mine)
			assert.Len(t, mine, 5)
			for _, id := range ids {
				if id != "" {
					status, _, _ := ci.do("DELETE", "/v1/leases/"+id, nil, nil)
					assert.Equal(t, 204, status)
				}
			}
		})
	}
}
