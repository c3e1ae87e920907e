// Package server is kobe's REST API server: the HTTP handlers, authentication, the Temporal
// helpers the handlers use (starting leases and pools) and the Prometheus collectors. The wire
// types and the Go client are package api, which links nothing but the standard library.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/identity"
	"github.com/kunobi-ninja/kobe/internal/secretbox"

	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Server serves the API. It reads the store and starts or queries workflows; it never changes
// cluster state itself.
type Server struct {
	Temporal        client.Client
	TemporalAddress string
	Namespace       string
	TaskQueue       string
	Store           store.Store
	Logger          *zap.Logger
	// Registry is what /metrics serves; NewRegistry builds the standard one.
	Registry *prometheus.Registry
	// MetricsTokenFile, when set, holds the bearer token /metrics requires (--metrics-token-file).
	MetricsTokenFile string
	// Backends lists the backends compiled in (for /v1/status).
	Backends []string
	// InstanceName distinguishes this process in probes (host/pid).
	InstanceName string

	// Policy, Auth and Limiter decide who may do what (see internal/access); InsecureNoAuth
	// lets every request through as an admin (demos only).
	Policy         *access.Policy
	Auth           *access.Authenticator
	Limiter        *access.RateLimiter
	InsecureNoAuth bool
	// Identity tunes the OIDC verifier built for the policy's issuers (tests: the key refresh).
	Identity identity.Options
	// Secrets opens the sealed lease kubeconfigs (the workers' key).
	Secrets *secretbox.Box
	// SearchAttributes: kobe's search attributes are registered; leases are started with them.
	SearchAttributes bool

	// SlowBindOnly turns warm binds off: every lease is started by the API and claims by
	// signal (the path before issue 15; the bench measures both).
	SlowBindOnly bool

	// LeaseStartGrace is how long a request to a warm-bound lease (release, extend, heartbeat,
	// sleep, wake) waits for the lease's workflow, which the pool starts a moment after the bind,
	// before it answers 503 and the client tries again (0 = 10 s).
	LeaseStartGrace time.Duration

	// ContinueAsNewAfter is the history length past which the pools and leases this API starts
	// continue as new (0: the workflows' defaults); the soak sets it low (--continue-as-new-after).
	ContinueAsNewAfter int

	// TemporalUI is the Temporal Web UI's address: the portal links each lease to its
	// workflow there (empty = no links).
	TemporalUI string

	policies     policyCache   // pools' resolved policies by store generation
	activity     leaseActivity // when each lease was last told of its holder's requests
	login        sso           // the SSO login client (session.go)
	failedLogins failedLoginAudit
}

// NewRegistry returns a registry with Go runtime, process and build metrics, plus extra collectors
// (the Temporal SDK collector in particular).
func NewRegistry(extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	bi := buildinfo.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kobe_build_info",
		Help: "Build information of the running kobe binary; always 1.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(bi.Version, bi.Commit, bi.GoVersion).Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build,
	)
	for _, c := range extra {
		reg.MustRegister(c)
	}
	return reg
}

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler {
	return s.withRequestLog(refuseUncleanPaths(s.mux()))
}

// refuseUncleanPaths answers a path with "." or ".." segments, a doubled or trailing slash with
// 404 not_found in the API's envelope. ServeMux would answer it with a 307 redirect to the
// cleaned path, which an API client does not follow for a PATCH or POST, and which would let a
// lease id such as ".." address a different resource.
func refuseUncleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p != "/" && p != "/ui/" && path.Clean(p) != p { // /ui/: the portal's home
			writeError(w, http.StatusNotFound, api.ReasonNotFound, "No such endpoint", r.Method+" "+p)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /livez", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	reg := s.Registry
	if reg == nil {
		reg = NewRegistry()
	}
	mux.Handle("GET /metrics", metricsHandler(reg, s.MetricsTokenFile))
	if s.Policy == nil {
		s.Policy = access.DefaultPolicy()
	}
	if s.Auth == nil {
		s.Auth = &access.Authenticator{Store: s.Store, Policy: s.Policy}
		if s.Policy.OIDC != nil && len(s.Policy.OIDC.Issuers) > 0 {
			s.Auth.OIDC = identity.NewVerifier(s.Policy, s.Identity)
		}
	}
	if s.Limiter == nil {
		s.Limiter = &access.RateLimiter{Policy: s.Policy}
	}
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.method+" "+rt.path, s.guard(rt, rt.handler))
	}
	s.portalRoutes(mux)
	mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.OpenAPI()) })
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "No such endpoint", r.Method+" "+r.URL.Path)
	})
	return mux
}

// guard puts a route's handler behind authentication: a token with the route's permission, or,
// on a route that needs none, a valid token when one is sent (/v1/status checks its own, to
// describe the session). Either way the request counts against a rate: its principal's, or,
// without credentials, its client address's.
func (s *Server) guard(rt route, h http.HandlerFunc) http.HandlerFunc {
	switch {
	case rt.perm != permNone:
		return s.authed(rt.perm, h)
	case rt.path != "/v1/status":
		return s.tokenIfAny(h)
	}
	return h
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// withRequestLog gives every request an id (honouring a caller's X-Request-Id) and logs it.
func (s *Server) withRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			id = newID("req-")
		}
		w.Header().Set("X-Request-Id", id)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
		if s.Logger != nil && r.URL.Path != "/healthz" && r.URL.Path != "/metrics" && r.URL.Path != "/livez" {
			s.Logger.Debug("request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.Int("status", rec.status), zap.Duration("took", time.Since(start)), zap.String("requestId", id))
		}
	})
}

type requestIDKey struct{}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// WorkerHandler serves what a worker-only process exposes: /healthz, /livez and /metrics (with
// a token file, only to a request bearing its token).
func WorkerHandler(reg *prometheus.Registry, metricsTokenFile string) http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /livez", ok)
	mux.Handle("GET /metrics", metricsHandler(reg, metricsTokenFile))
	return mux
}
