package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// /metrics is open by default; with a token file it answers only the token the file holds now
// (a rotated file applies at the next scrape), and a file gone missing locks it.
func TestMetricsToken(t *testing.T) {
	scrape := func(h http.Handler, auth string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	reg := NewRegistry()
	assert.Equal(t, http.StatusOK, scrape(WorkerHandler(reg, ""), ""), "open by default")
	assert.Equal(t, http.StatusOK, scrape((&Server{Registry: reg}).Handler(), ""), "open by default on the API")

	file := filepath.Join(t.TempDir(), "metrics-token")
	require.NoError(t, os.WriteFile(file, []byte("s3cret\n"), 0o600))
	for name, h := range map[string]http.Handler{
		"worker": WorkerHandler(reg, file),
		"api":    (&Server{Registry: reg, MetricsTokenFile: file}).Handler(),
	} {
		require.NoError(t, os.WriteFile(file, []byte("s3cret\n"), 0o600))
		assert.Equal(t, http.StatusUnauthorized, scrape(h, ""), name)
		assert.Equal(t, http.StatusUnauthorized, scrape(h, "Bearer wrong"), name)
		assert.Equal(t, http.StatusUnauthorized, scrape(h, "s3cret"), name)
		assert.Equal(t, http.StatusOK, scrape(h, "Bearer s3cret"), name)

		require.NoError(t, os.WriteFile(file, []byte("n3w\n"), 0o600))
		assert.Equal(t, http.StatusUnauthorized, scrape(h, "Bearer s3cret"), name+": the old token after rotation")
		assert.Equal(t, http.StatusOK, scrape(h, "Bearer n3w"), name)

		require.NoError(t, os.WriteFile(file, nil, 0o600))
		assert.Equal(t, http.StatusInternalServerError, scrape(h, "Bearer "), name+": an empty file opens nothing")
		require.NoError(t, os.Remove(file))
		assert.Equal(t, http.StatusInternalServerError, scrape(h, "Bearer n3w"), name+": a missing file opens nothing")
	}
}
