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
