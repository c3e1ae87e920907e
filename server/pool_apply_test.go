package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/kunobi-ninja/kobe/backends/local"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Applying a manifest with a field kobe parses but does not act on is refused with 400
// invalid_request naming the field, and nothing is stored.
func TestPoolApplyRefusesUnsupportedFields(t *testing.T) {
	s := testServer(t)
	h := s.Handler()
	const manifest = `apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: ci}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
`
	for field, extra := range map[string]string{
		"spec.resources":       "  resources: {limits: {cpu: \"2\"}}\n",
		"spec.diagnostics":     "  diagnostics: {enabled: true}\n",
		"spec.snapshot":        "  snapshot: {name: golden}\n",
		"spec.cluster.servers": "",
	} {
		t.Run(field, func(t *testing.T) {
			m := manifest + extra
			if extra == "" {
				m = strings.Replace(m, "{version: v1.37.2}", "{version: v1.37.2, servers: 1}", 1)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/pools/ci", strings.NewReader(m)))
			require.Equal(t, 400, rec.Code, rec.Body.String())
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
			assert.Equal(t, api.ReasonInvalidRequest, eb.Reason)
			assert.Contains(t, eb.Detail, field+" is not supported by this version of kobe")
			_, err := s.Store.GetPool(t.Context(), "ci")
			assert.Error(t, err, "nothing stored")
		})
	}
}

// A pool a Kubernetes resource manages has one source of truth: PUT and DELETE answer 409
// managed_externally naming the resource and change nothing; GET shows who manages it and,
// with manifest=true, the manifest as applied.
func TestManagedPoolRefusesTheAPI(t *testing.T) {
	s := testServer(t)
	h := s.Handler()
	const manifest = `{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"gitops"},"spec":{"size":1,"backend":{"type":"local"},"cluster":{"version":"v1.37.2"}}}`
	require.NoError(t, s.Store.UpsertPool(t.Context(), store.Pool{Name: "gitops", Backend: "local", Spec: []byte(manifest), ManagedBy: "ClusterPool/gitops"}))
	before, err := s.Store.GetPool(t.Context(), "gitops")
	require.NoError(t, err)

	for _, method := range []string{"PUT", "DELETE"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/v1/pools/gitops", strings.NewReader(strings.Replace(manifest, `"size":1`, `"size":2`, 1))))
		require.Equal(t, 409, rec.Code, "%s: %s", method, rec.Body.String())
		var eb api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
		assert.Equal(t, api.ReasonManagedExternally, eb.Reason, method)
		assert.Contains(t, eb.Detail, "ClusterPool/gitops", method)
	}
	after, err := s.Store.GetPool(t.Context(), "gitops")
	require.NoError(t, err)
	assert.Equal(t, before.Generation, after.Generation, "nothing was applied")
	evs, err := s.Store.ListEvents(t.Context(), store.EventFilter{Pool: "gitops"})
	require.NoError(t, err)
	assert.Empty(t, evs, "a refusal records no change")

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/pools/gitops?manifest=true", nil))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.JSONEq(t, manifest, rec.Body.String(), "the applied manifest")

	// The resource's own changes pass the check (ManagedBy is theirs); a pool without a manager
	// is taken over by the first resource that applies it.
	assert.Nil(t, managedElsewhere(after, "ClusterPool/gitops"))
	assert.Nil(t, managedElsewhere(store.Pool{Name: "api-pool"}, "ClusterPool/api-pool"))
	assert.NotNil(t, managedElsewhere(after, ""))
}
