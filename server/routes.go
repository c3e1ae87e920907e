package server

import (
	"net/http"
	"reflect"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
)

// permNone marks a route that needs no token; permAny one that needs a valid token only.
const (
	permNone = "-"
	permAny  = ""
)

// route is one endpoint: the mux and the OpenAPI document are both built from this table, so
// the document cannot list a route the server does not serve, nor miss one.
type route struct {
	method, path string
	perm         string
	summary      string
	request      any   // a value of the body type, nil when there is no body
	response     any   // a value of the success body type, nil when none
	status       int   // success status
	errors       []int // error statuses it may answer (besides 401/403/429 of authed routes)
	query        []string
	handler      http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		{method: "GET", path: "/v1/status", perm: permNone, summary: "Version, backends, health of Temporal and the store, workers; with a token (optional; an invalid one is 401) the caller's session and pools",
			response: api.Status{}, status: 200, errors: []int{401}, handler: s.handleStatus},
		{method: "POST", path: "/v1/doctor", perm: permAny, summary: "Start an end-to-end probe (a Doctor workflow; any valid token: it writes the store and holds up to an hour)",
			request: api.DoctorRequest{}, response: api.DoctorStarted{}, status: 202, errors: []int{400, 503}, handler: s.handleDoctorStart},
		{method: "GET", path: "/v1/doctor/{id}", perm: permNone, summary: "A probe's report, hop by hop",
			response: api.DoctorReport{}, status: 200, errors: []int{404}, handler: s.handleDoctorGet},

		{method: "POST", path: "/v1/leases", perm: access.PermLease, summary: "Request a cluster lease (upstream: {profile, ttl})",
			request: api.LeaseRequest{}, response: api.Lease{}, status: 202, errors: []int{400, 404, 409, 503}, handler: s.handleLeaseCreate},
		{method: "GET", path: "/v1/leases", perm: access.PermLease, summary: "The caller's active leases, a bare array (all=true: ended ones too)",
			response: []api.Lease{}, status: 200, query: []string{"alias", "all"}, handler: s.handleLeaseList},
		{method: "GET", path: "/v1/leases/{id}", perm: access.PermLease, summary: "A lease by id or alias; the kubeconfig once Bound; wait=30s long-polls",
			response: api.Lease{}, status: 200, errors: []int{400, 404}, query: []string{"wait"}, handler: s.handleLeaseGet},
		{method: "GET", path: "/v1/leases/{id}/kubeconfig", perm: access.PermLease, summary: "A Bound lease's kubeconfig as YAML (for curl users; a sleeping lease: 409 sleeping)",
			status: 200, errors: []int{404, 409}, handler: s.handleLeaseKubeconfig},
		{method: "PATCH", path: "/v1/leases/{id}", perm: access.PermLease, summary: "Extend a lease (extendTtl or extend_ttl; a sleeping lease: 409 sleeping)",
			request: api.ExtendRequest{}, response: api.ExtendResponse{}, status: 200, errors: []int{400, 404, 409}, handler: s.handleLeaseExtend},
		{method: "DELETE", path: "/v1/leases/{id}", perm: access.PermLease, summary: "Release a lease (idempotent)",
			status: 204, errors: []int{404}, handler: s.handleLeaseRelease},
		{method: "POST", path: "/v1/leases/{id}/sleep", perm: access.PermLease, summary: "Put a Bound lease's cluster to sleep: its compute stops, its state stays (idempotent; the TTL keeps running)",
			response: api.Lease{}, status: 200, errors: []int{404, 409, 503}, handler: s.handleLeaseSleep},
		{method: "POST", path: "/v1/leases/{id}/wake", perm: access.PermLease, summary: "Wake a sleeping lease's cluster and wait until it is ready, within its pool's resumeTimeout (idempotent)",
			response: api.Lease{}, status: 200, errors: []int{404, 409, 502, 503}, handler: s.handleLeaseWake},
		{method: "POST", path: "/v1/leases/{id}/heartbeat", perm: access.PermLease, summary: "Keep a lease with an idle timeout alive",
			status: 204, errors: []int{404, 410}, handler: s.handleLeaseHeartbeat},

		{method: "GET", path: "/v1/pools", perm: access.PermPoolRead, summary: "Pools with counts, phase, policy and the caller's capabilities, a bare array",
			response: []api.PoolView{}, status: 200, handler: s.handlePoolList},
		{method: "GET", path: "/v1/pools/{name}/leases", perm: access.PermPoolRead, summary: "A pool's active leases, a bare array (all=true: ended ones too); other principals' identities, aliases and metadata redacted unless pool.admin",
			response: []api.PoolLease{}, status: 200, errors: []int{404}, query: []string{"all"}, handler: s.handlePoolLeases},
		{method: "GET", path: "/v1/pools/{name}", perm: access.PermPoolRead, summary: "One pool; manifest=true: the ClusterPool manifest as applied instead",
			response: api.PoolView{}, status: 200, errors: []int{404}, query: []string{"manifest"}, handler: s.handlePoolGet},
		{method: "PUT", path: "/v1/pools/{name}", perm: access.PermPoolAdmin, summary: "Create or update a pool from its ClusterPool manifest (JSON or YAML)",
			request: map[string]any{}, response: api.PoolView{}, status: 200, errors: []int{400, 409, 503}, handler: s.handlePoolPut},
		{method: "DELETE", path: "/v1/pools/{name}", perm: access.PermPoolAdmin, summary: "Delete a pool: it drains, then is forgotten (202 while draining)",
			status: 204, errors: []int{404, 409, 503}, handler: s.handlePoolDelete},

		{method: "GET", path: "/v1/instances", perm: access.PermPoolAdmin, summary: "Instances (clusters) as the store records them, a bare array; filter by pool, phase, host",
			response: []api.Instance{}, status: 200, query: []string{"pool", "phase", "host"}, handler: s.handleInstanceList},
		{method: "GET", path: "/v1/instances/{id}", perm: access.PermPoolAdmin, summary: "One instance",
			response: api.Instance{}, status: 200, errors: []int{404}, handler: s.handleInstanceGet},
		{method: "POST", path: "/v1/instances/{id}/retry-teardown", perm: access.PermPoolAdmin, summary: "Retry a Quarantined instance's teardown (through its pool, or a Teardown workflow when the pool is gone)",
			response: api.RetryTeardown{}, status: 202, errors: []int{404, 409, 503}, handler: s.handleInstanceRetryTeardown},
		{method: "DELETE", path: "/v1/instances/{id}", perm: access.PermPoolAdmin, summary: "Forget a Quarantined instance cleaned up by hand (admin role only; force=true: any phase)",
			status: 204, errors: []int{404, 409, 503}, query: []string{"force"}, handler: s.handleInstanceForget},

		{method: "POST", path: "/v1/tokens", perm: access.PermTokens, summary: "Create a token (its secret is shown once)",
			request: api.TokenRequest{}, response: api.Token{}, status: 201, errors: []int{400}, handler: s.handleTokenCreate},
		{method: "GET", path: "/v1/tokens", perm: access.PermTokens, summary: "List tokens (never their secrets)",
			response: api.TokenList{}, status: 200, handler: s.handleTokenList},
		{method: "DELETE", path: "/v1/tokens/{id}", perm: access.PermTokens, summary: "Revoke a token",
			status: 204, errors: []int{404}, handler: s.handleTokenRevoke},

		{method: "GET", path: "/v1/audit", perm: access.PermAudit, summary: "The append-only audit log, oldest first",
			response: api.AuditList{}, status: 200, errors: []int{400}, query: []string{"since", "actor", "pool", "action", "target", "after", "limit"}, handler: s.handleAudit},
	}
}

// typeOf is reflect.TypeOf that tolerates nil.
func typeOf(v any) reflect.Type {
	if v == nil {
		return nil
	}
	return reflect.TypeOf(v)
}
