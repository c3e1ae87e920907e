package server

import (
	"crypto/subtle"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kunobi-ninja/kobe/api"
)

// metricsHandler serves reg's metrics; with a token file, only to a request bearing the token
// it holds. The file is read at every scrape, so a rotated Secret applies without a restart
// (a scrape every few seconds makes that one small read).
func metricsHandler(reg *prometheus.Registry, tokenFile string) http.Handler {
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	if tokenFile == "" {
		return metrics
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(tokenFile)
		want := strings.TrimSpace(string(data))
		if err != nil || want == "" {
			// Never open: a token file that went missing or empty locks /metrics.
			writeError(w, http.StatusInternalServerError, api.ReasonInternal, "The metrics token cannot be read", "--metrics-token-file")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kobe metrics"`)
			writeError(w, http.StatusUnauthorized, api.ReasonUnauthorized, "The metrics token is missing or wrong", "")
			return
		}
		metrics.ServeHTTP(w, r)
	})
}
