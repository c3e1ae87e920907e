package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/buildinfo"
	"github.com/kunobi-ninja/kobe/internal/store"
)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (s *Server) checkTemporal(ctx context.Context) api.TemporalHealth {
	h := api.TemporalHealth{Address: s.TemporalAddress, Namespace: s.Namespace, TaskQueue: s.TaskQueue}
	t0 := time.Now()
	_, err := s.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	h.LatencyMs = ms(time.Since(t0))
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Healthy = true
	return h
}

func (s *Server) checkStore(ctx context.Context) api.StoreHealth {
	h := api.StoreHealth{Driver: s.Store.Driver()}
	t0 := time.Now()
	err := store.CheckWritable(ctx, s.Store, "readyz-"+s.InstanceName)
	h.LatencyMs = ms(time.Since(t0))
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Healthy = true
	if v, err := s.Store.SchemaVersion(ctx); err == nil {
		h.SchemaVersion = v
	}
	return h
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// handleReadyz answers 200 only when Temporal is reachable and the store is writable.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	var th api.TemporalHealth
	var sh api.StoreHealth
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); th = s.checkTemporal(ctx) }()
	go func() { defer wg.Done(); sh = s.checkStore(ctx) }()
	wg.Wait()
	body := map[string]any{"temporal": th, "store": sh}
	if th.Healthy && sh.Healthy {
		body["status"] = "ready"
		writeJSON(w, http.StatusOK, body)
		return
	}
	body["status"] = "not ready"
	writeJSON(w, http.StatusServiceUnavailable, body)
}

// handleStatus answers without a token (a new user's first request), but an Authorization
// header, when sent, must be valid: a typo'd token is told 401 rather than shown an anonymous
// status with no pools, which would look like "there are no pools".
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	bi := buildinfo.Get()
	st := api.Status{
		Version:   bi.Version,
		Commit:    bi.Commit,
		GoVersion: bi.GoVersion,
		Backends:  append([]string{}, s.Backends...),
		Auth:      api.AuthInfo{Methods: s.authMethods(), Issuers: s.Policy.Issuers(), Sessions: []api.Session{}},
		Pools:     []api.PoolSummary{},
		Workers:   []api.WorkerSummary{},
	}
	if s.loginConfigured() && s.Policy.OIDC.Login.CLIClientID != "" && !s.InsecureNoAuth {
		l := s.Policy.OIDC.Login
		st.Auth.Login = &api.LoginInfo{Issuer: l.Issuer, ClientID: l.CLIClientID, Scopes: append(l.ScopesOrDefault(), "offline_access")}
	}
	var caller *access.Principal
	switch {
	case s.InsecureNoAuth:
		st.Auth.Methods = []string{api.AuthNone}
		st.Auth.Issuers = nil
		caller = &anonymous
		if !s.limited(w, r, &anonymous) {
			return
		}
		st.Auth.Sessions = append(st.Auth.Sessions, api.Session{Principal: anonymous.Name, Role: anonymous.Role})
	case r.Header.Get("Authorization") != "" || hasSessionCookie(r):
		p, err := s.authenticate(r.WithContext(ctx))
		if err != nil {
			s.authFailed(w, r, p, err, "the bearer token is unknown, revoked or expired; send none to see the anonymous status")
			return
		}
		if !inProcess(r.Context()) && !s.limited(w, r, &p) {
			return
		}
		caller = &p
		st.Auth.Sessions = append(st.Auth.Sessions, s.session(ctx, p))
	default:
		if !s.limited(w, r, nil) { // no credentials: the client address's rate
			return
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); st.Temporal = s.checkTemporal(ctx) }()
	go func() { defer wg.Done(); st.Store = s.checkStore(ctx) }()
	wg.Wait()
	if st.Store.Healthy && caller != nil {
		role, _ := s.Policy.RoleOf(*caller)
		if pools, err := s.Store.ListPools(ctx); err == nil {
			for _, p := range pools {
				if !usesPool(role, p.Name) {
					continue
				}
				st.Pools = append(st.Pools, api.PoolSummary{Name: p.Name, ResourceKind: resourceKindPool, Backend: p.Backend,
					Capabilities: poolCapabilities(role, p.Name)})
			}
		}
	}
	if st.Temporal.Healthy {
		st.Workers = s.workers(ctx)
	}
	writeJSON(w, http.StatusOK, st)
}

// session describes a principal's token: its name and expiry from the store (the principal
// carries only the token's id).
func (s *Server) session(ctx context.Context, p access.Principal) api.Session {
	out := api.Session{Principal: p.Name, Role: p.Role, TokenID: p.TokenID}
	if p.Issuer != "" {
		out.Method, out.Issuer = api.AuthOIDC, p.Issuer
		if p.SessionID != "" {
			out.Method = api.AuthSession
		}
		if !p.ExpiresAt.IsZero() {
			exp := p.ExpiresAt
			out.ExpiresAt = &exp
		}
		return out
	}
	out.Method = api.AuthBearer
	if p.TokenID == "" {
		return out
	}
	toks, err := s.Store.ListTokens(ctx)
	if err != nil {
		return out
	}
	for _, t := range toks {
		if t.ID == p.TokenID {
			out.TokenName = t.Name
			if !t.ExpiresAt.IsZero() {
				exp := t.ExpiresAt
				out.ExpiresAt = &exp
			}
		}
	}
	return out
}

// usesPool says whether a role may use a pool: lease from it (its globs allow it), or manage it.
func usesPool(role access.Role, pool string) bool {
	return role.Can(access.PermPoolAdmin) || (role.Can(access.PermLease) && role.AllowsPool(pool))
}

// workers lists the processes polling kobe's task queue: a status that shows "no workers" is
// the quickest explanation of a lease that never binds.
func (s *Server) workers(ctx context.Context) []api.WorkerSummary {
	out := []api.WorkerSummary{}
	resp, err := s.Temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     s.Namespace,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: s.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
	})
	if err != nil {
		return out
	}
	for _, p := range resp.GetPollers() {
		out = append(out, api.WorkerSummary{Identity: p.GetIdentity(), LastAccessTime: p.GetLastAccessTime().AsTime()})
	}
	return out
}

// authMethods are the bearer kinds accepted: kobe tokens, and OIDC tokens when the policy trusts
// an issuer.
func (s *Server) authMethods() []string {
	m := []string{api.AuthBearer}
	if len(s.Policy.Issuers()) > 0 {
		m = append(m, api.AuthOIDC)
	}
	if s.loginConfigured() {
		m = append(m, api.AuthSession)
	}
	return m
}
