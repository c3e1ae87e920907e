package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json from the route table")

func testServer(t testing.TB) *Server {
	st, err := store.Open(context.Background(), "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	// No rate limit to speak of: the fuzzers send thousands of requests a second.
	pol, err := access.ParsePolicy([]byte(`roles:
  admin:
    permissions: [lease, pool.read, pool.admin, audit.read, tokens]
    rateLimit: {requestsPerSecond: 1000000000, burst: 1000000000}
`))
	require.NoError(t, err)
	return &Server{Store: st, InsecureNoAuth: true, Policy: pol}
}

// The OpenAPI document lists exactly the routes the mux serves (each documented path and
// method reaches its own handler, not the catch-all), every $ref resolves, and the copy in
// docs/openapi.json is current (go test ./api -update rewrites it).
func TestOpenAPIMatchesHandlers(t *testing.T) {
	s := testServer(t)
	mux := s.mux()
	doc := s.OpenAPI()
	raw, err := json.MarshalIndent(doc, "", "  ")
	require.NoError(t, err)
	paths := doc["paths"].(map[string]map[string]any)
	n := 0
	for path, ops := range paths {
		for method := range ops {
			concrete := regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllString(path, "x1")
			req := httptest.NewRequest(strings.ToUpper(method), concrete, nil)
			_, pattern := mux.Handler(req)
			assert.Equal(t, strings.ToUpper(method)+" "+path, pattern, "documented %s %s is served", method, path)
			n++
		}
	}
	assert.Equal(t, len(s.routes()), n)
	// Every route the server has under /v1 is documented: probe the well-known ones.
	for _, probe := range []string{"POST /v1/leases", "PATCH /v1/leases/x", "DELETE /v1/pools/x", "GET /v1/audit"} {
		method, path, _ := strings.Cut(probe, " ")
		_, pattern := mux.Handler(httptest.NewRequest(method, path, nil))
		p := strings.SplitN(pattern, " ", 2)[1]
		assert.Contains(t, paths, p)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, m := range regexp.MustCompile(`"#/components/schemas/([A-Za-z]+)"`).FindAllStringSubmatch(string(raw), -1) {
		assert.Contains(t, schemas, m[1], "$ref %s resolves", m[1])
	}
	lease := schemas["Lease"].(map[string]any)["properties"].(map[string]any)
	for _, field := range []string{"id", "resourceKind", "phase", "profile", "effective_ttl", "queue_position", "expires_at", "kubeconfig"} {
		assert.Contains(t, lease, field, "upstream lease field %s", field)
	}

	golden := filepath.Join("..", "docs", "openapi.json")
	if *update {
		require.NoError(t, os.WriteFile(golden, append(raw, '\n'), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test ./api -run TestOpenAPI -update")
	assert.JSONEq(t, string(want), string(raw), "docs/openapi.json is stale: go test ./api -run TestOpenAPI -update")

	// And it is what the server serves.
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	assert.Equal(t, 200, rec.Code)
	assert.JSONEq(t, string(raw), rec.Body.String())
}

// checkRefusal asserts an answer to an invalid request: 4xx with a reason code, never 5xx.
func checkRefusal(t *testing.T, rec *httptest.ResponseRecorder, allowed ...int) {
	t.Helper()
	require.Less(t, rec.Code, 500, "never a 5xx: %s", rec.Body.String())
	if rec.Code >= 400 {
		var eb api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "an error envelope: %s", rec.Body.String())
		require.NotEmpty(t, eb.Reason)
	}
	require.Contains(t, allowed, rec.Code, rec.Body.String())
}

// Lease create bodies: with no pool in the store, every request is refused with 400
// (invalid_request) or 404 (the pool does not exist) — never a 500, never a panic.
func FuzzLeaseCreate(f *testing.F) {
	for _, seed := range []string{`{"profile":"dev","ttl":"1h"}`, `{"pool":"a","profile":"b"}`, `{}`, `null`, `[]`,
		`{"profile":"dev","metadata":{"a":"b"},"idempotencyKey":"k","alias":"x","priority":3,"idleTimeout":"1m"}`,
		`{"profile":"dev","ttl":"-1h"}`, `{"profile":"dev"} {}`, "\x00", `{"profile":"` + strings.Repeat("a", 70) + `"}`} {
		f.Add([]byte(seed))
	}
	s := testServer(f)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/leases", bytes.NewReader(body)))
		checkRefusal(t, rec, 400, 404)
	})
}

// Extend bodies reach the extend decoder: the caller owns a real lease (Released, so that a
// well-formed extension is refused with 409 not_ready before Temporal is asked), and every body
// sent to it is either refused as invalid (400) or decoded into a positive extension of a
// single JSON object (409). The fuzzed id goes in the URL of a second request: 400, 404 or 409,
// never a 5xx.
func FuzzLeaseExtend(f *testing.F) {
	f.Add("lease-1", []byte(`{"extendTtl":"5m"}`))
	f.Add("job", []byte(`{"extend_ttl":"x"}`))
	f.Add("", []byte(`{}`))
	f.Add("lease-fuzz", []byte(`{"extendTtl":"5m"} trailing`))
	f.Add("x", []byte(`{"extendTtl":"5m","bogus":1}`))
	f.Add("x", []byte(`null`))
	s := testServer(f)
	const own = "lease-fuzz"
	require.NoError(f, s.Store.UpsertLease(context.Background(), store.Lease{ID: own, Pool: "dev", Principal: anonymous.Name,
		Role: anonymous.Role, Phase: "Released", TTL: time.Hour}))
	h := s.Handler()
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("PATCH", "/v1/leases/"+own, bytes.NewReader(body)))
		checkRefusal(t, rec, 400, 409)
		if rec.Code == http.StatusConflict {
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
			require.Equal(t, api.ReasonNotReady, eb.Reason, "decoded, then refused because the lease ended")
			requireOneExtension(t, body)
		}

		req, err := http.NewRequest("PATCH", "/v1/leases/"+url.PathEscape(id), bytes.NewReader(body))
		if err != nil {
			return
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkRefusal(t, rec, 400, 404, 409)
	})
}

// requireOneExtension checks, independently of the handler's decoder, that a body the handler
// accepted is one JSON object (and nothing after it) whose extension is a positive duration.
func requireOneExtension(t *testing.T, body []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	var m map[string]json.RawMessage
	require.NoError(t, dec.Decode(&m), "accepted body %q is a JSON object", body)
	require.NotNil(t, m, "accepted body %q is a JSON object, not null", body)
	_, err := dec.Token()
	require.ErrorIs(t, err, io.EOF, "accepted body %q has nothing after the object", body)
	for k := range m {
		require.Contains(t, []string{"extendTtl", "extend_ttl"}, k, "accepted body %q has only known fields", body)
	}
	var req api.ExtendRequest
	require.NoError(t, json.Unmarshal(body, &req))
	raw := req.ExtendTTL
	if raw == "" {
		raw = req.ExtendTTLSnake
	}
	d, err := time.ParseDuration(raw)
	require.NoError(t, err, "accepted body %q has a duration", body)
	require.Positive(t, d, "accepted body %q extends by a positive duration", body)
}

// Pool manifests: Parse and Validate never panic, and refuse with an error that says something.
func FuzzPoolManifest(f *testing.F) {
	for _, seed := range []string{"apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: a}\nspec: {backend: {type: local}, cluster: {version: v1.37.2}}\n",
		"spec: [", "{}", "kind: ClusterPool\nspec:\n  scaling: {minReady: 9, maxClusters: 1}\n",
		"apiVersion: kobe.kunobi.ninja/v1alpha1\nkind: ClusterPool\nmetadata: {name: a}\nspec:\n  readinessGates: [{type: NodesReady}]\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, manifest []byte) {
		m, err := poolspec.Parse(manifest)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		if _, err := m.Validate(); err != nil {
			require.NotEmpty(t, err.Error())
		}
	})
}

// A path with "." or ".." segments or a doubled or trailing slash is refused with 404 in the
// API's envelope. ServeMux alone answered 307 to the cleaned path (FuzzLeaseExtend found it with
// the lease id ".."), so PATCH /v1/leases/.. was redirected to /v1/ instead of refused.
func TestUncleanPathsAreRefusedNotRedirected(t *testing.T) {
	h := testServer(t).Handler()
	for _, p := range []string{"/v1/leases/..", "/v1/leases/.", "/v1/leases/a/../b", "/v1//leases", "/v1/leases/", "/v1/pools/x/"} {
		for _, method := range []string{"GET", "PATCH", "DELETE"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, p, strings.NewReader(`{}`)))
			checkRefusal(t, rec, 404)
		}
	}
}
