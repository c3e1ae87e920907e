package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/kunobi-ninja/kobe/pool"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// poolBackendCapabilities lists what a pool's backend can do for this pool's members (never
// nil): sleep (only with options that keep the data, for a backend whose instances sleep only
// so: k3s, k0s), freeze, certRotation.
func poolBackendCapabilities(backend string, options json.RawMessage) []string {
	out := []string{}
	f, ok := backends.Lookup(backend)
	if !ok {
		return out
	}
	c := backends.CapabilitiesOf(f.Name, f.Description, f.Prototype)
	if r, ok := f.Prototype.(backends.SleepRequirement); ok && c.Sleep {
		c.Sleep = r.SleepsWith(options)
	}
	for name, has := range map[string]bool{"sleep": c.Sleep, "freeze": c.Freeze, "certRotation": c.CertRotate} {
		if has {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// poolView is a pool as the caller sees it: counts from its workflow (the store's projection
// when the workflow cannot answer) and the operations open to the caller's role.
func (s *Server) poolView(ctx context.Context, p store.Pool, role access.Role) api.PoolView {
	v := api.PoolView{Name: p.Name, ResourceKind: resourceKindPool, Backend: p.Backend,
		Capabilities: poolCapabilities(role, p.Name), ManagedBy: p.ManagedBy}
	pol, err := s.policyOf(p)
	var options json.RawMessage
	if err == nil {
		options = pol.BackendOptions
		v.Policy = wirePoolPolicy(pol, unusedSize(p.Spec))
	}
	v.BackendCapabilities = poolBackendCapabilities(p.Backend, options)
	st, err := s.queryPool(ctx, p.Name)
	if err != nil {
		// The pool's workflow does not answer (Temporal restarting, the worker down): the
		// store's projection of its members and queue is a moment old but not zero.
		c := storePoolCounts(ctx, s.Store, p.Name)
		v.Phase, v.Ready, v.Leased, v.Creating, v.Recycling, v.Quarantined, v.QueueDepth = "Unknown", c.Ready, c.Leased, c.Creating, c.Recycling, c.Quarantined, c.QueueDepth
		return v
	}
	v.Phase, v.Ready, v.Leased, v.Creating, v.Recycling, v.Outdated, v.QueueDepth = st.Phase, st.Ready, st.Leased, st.Creating, st.Deleting, st.Outdated, st.QueueDepth
	v.Unhealthy, v.Quarantined = st.Unhealthy, st.Quarantined
	v.ConsecutiveFailures, v.LastFailureReason, v.Generation = st.ConsecutiveFailures, st.LastFailureReason, st.Generation
	if !st.NextAttemptAt.IsZero() {
		t := st.NextAttemptAt
		v.NextAttemptAt = &t
	}
	return v
}

// wirePoolPolicy is the domain → wire translation of a pool's policy: the part shown to lease
// holders (api.PoolPolicy). unusedSize is the manifest's spec.size when spec.scaling is set too.
func wirePoolPolicy(pol poolspec.Policy, unusedSize *int) api.PoolPolicy {
	mode := "fixed"
	if pol.Autoscale {
		mode = "autoscale"
	}
	return api.PoolPolicy{Mode: mode, TTL: pol.TTL.String(), MaxTTL: pol.MaxTTL.String(), MaxExtensions: pol.MaxExtensions,
		WarmTarget: pol.WarmTarget, MaxClusters: pol.MaxClusters, QueueTimeout: pol.QueueTimeout.String(), UnusedSize: unusedSize}
}

// unusedSize is the manifest's spec.size when spec.scaling is set too: accepted, as upstream
// does, and not used (the warm target is spec.scaling.minReady), so the policy has no trace of
// it; the pool's view says so.
func unusedSize(spec []byte) *int {
	m, err := poolspec.Parse(spec)
	if err != nil || m.Spec.Scaling == nil {
		return nil
	}
	return m.Spec.Size
}

// Capabilities of a pool, as upstream names them: what its caller may do there.
const (
	CapLease      = "lease"
	CapKubeconfig = "kubeconfig"
	CapExtend     = "extend"
	CapRelease    = "release"
	CapApply      = "apply"
	CapDelete     = "delete"
)

// poolCapabilities are the operations a role may perform on a pool: the lease operations if
// it may lease from the pool, apply and delete if it manages pools.
func poolCapabilities(role access.Role, pool string) []string {
	out := []string{}
	if role.Can(access.PermLease) && role.AllowsPool(pool) {
		out = append(out, CapLease, CapKubeconfig, CapExtend, CapRelease)
	}
	if role.Can(access.PermPoolAdmin) {
		out = append(out, CapApply, CapDelete)
	}
	return out
}

// queryPool asks a pool's workflow for its status.
func (s *Server) queryPool(ctx context.Context, name string) (pool.Status, error) {
	var st pool.Status
	resp, err := s.Temporal.QueryWorkflow(ctx, pool.WorkflowID(name), "", pool.QueryPoolStatus)
	if err == nil {
		err = resp.Get(&st)
	}
	return st, err
}

// poolCounts are a pool's counts as the store last saw them.
type poolCounts struct {
	Ready, Leased, Creating, Recycling, Quarantined, QueueDepth int
}

// storePoolCounts reads a pool's counts from the store: what the pool's workflow and its leases
// last projected, for when the workflow cannot be asked. Instance rows do not name their lease,
// so Leased is the pool's Bound leases and Ready the rest of its Ready instances. A store that
// fails too gives zeros.
func storePoolCounts(ctx context.Context, st store.Store, pool string) poolCounts {
	var c poolCounts
	ready := 0
	if is, err := st.ListInstances(ctx, store.InstanceFilter{Pool: pool}); err == nil {
		for _, in := range is {
			switch in.Phase {
			case api.InstanceCreating:
				c.Creating++
			case api.InstanceReady:
				ready++
			case api.InstanceDeleting:
				c.Recycling++
			case api.InstanceQuarantined:
				c.Quarantined++
			}
		}
	}
	if ls, err := st.ListLeases(ctx, store.LeaseFilter{Pool: pool, Phases: api.ActiveLeasePhases}); err == nil {
		for _, l := range ls {
			if l.Phase == api.LeaseBound {
				c.Leased++
			} else {
				c.QueueDepth++
			}
		}
	}
	c.Ready = max(ready-c.Leased, 0)
	return c
}

func (s *Server) callerRole(r *http.Request) access.Role {
	role, _ := s.Policy.RoleOf(principalOf(r))
	return role
}

func (s *Server) handlePoolList(w http.ResponseWriter, r *http.Request) {
	ps, err := s.Store.ListPools(r.Context())
	if err != nil {
		s.unavailable(w, r, "listing pools", err)
		return
	}
	out := []api.PoolView{}
	for _, p := range ps {
		out = append(out, s.poolView(r.Context(), p, s.callerRole(r)))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handlePoolGet(w http.ResponseWriter, r *http.Request) {
	p, err := s.Store.GetPool(r.Context(), r.PathValue("name"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "Pool not found", fmt.Sprintf("no pool named %q", r.PathValue("name")))
		return
	}
	if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	if r.URL.Query().Get("manifest") == "true" {
		// The manifest as applied (validated, kept as the store holds it), so that a client can
		// diff it against its own file or the resource that manages the pool.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(p.Spec)
		return
	}
	writeJSON(w, http.StatusOK, s.poolView(r.Context(), p, s.callerRole(r)))
}

// handlePoolPut applies a ClusterPool manifest (JSON or YAML): created 201, updated 200.
func (s *Server) handlePoolPut(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		badRequest(w, "body: "+err.Error())
		return
	}
	m, err := poolspec.Parse(body)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if m.Metadata.Name != name {
		badRequest(w, fmt.Sprintf("metadata.name: %q does not match the URL's pool %q", m.Metadata.Name, name))
		return
	}
	created, err := s.ApplyPool(r.Context(), m, "", actorOf(r))
	if err != nil {
		s.writeChangeError(w, r, err)
		return
	}
	p, err := s.Store.GetPool(r.Context(), name)
	if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.poolView(r.Context(), p, s.callerRole(r)))
}

// handlePoolDelete drains a pool (DeletePool): 202 while draining, 204 when it is gone at once.
func (s *Server) handlePoolDelete(w http.ResponseWriter, r *http.Request) {
	gone, err := s.DeletePool(r.Context(), r.PathValue("name"), "", actorOf(r))
	if err != nil {
		s.writeChangeError(w, r, err)
		return
	}
	if gone {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// handlePoolLeases lists a pool's active leases (?all=true: ended ones too). Other principals'
// identities, aliases and metadata are redacted, except for a role that manages pools
// (pool.admin): operators need to know who holds a cluster.
func (s *Server) handlePoolLeases(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.Store.GetPool(r.Context(), name); errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.ReasonNotFound, "Pool not found", fmt.Sprintf("no pool named %q", name))
		return
	} else if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	f := store.LeaseFilter{Pool: name, Phases: api.ActiveLeasePhases}
	if r.URL.Query().Get("all") == "true" {
		f.Phases = nil
	}
	ls, err := s.Store.ListLeases(r.Context(), f)
	if err != nil {
		s.unavailable(w, r, "listing leases", err)
		return
	}
	me := principalOf(r).Name
	seeAll := s.callerRole(r).Can(access.PermPoolAdmin)
	out := []api.PoolLease{}
	for _, l := range ls {
		out = append(out, poolLeaseView(l, seeAll || l.Principal == me))
	}
	writeJSON(w, http.StatusOK, out)
}

// poolLeaseView is the row → wire translation of a lease in its pool's list
// (GET /v1/pools/{name}/leases): its requester, alias and metadata only when shown (the
// caller's own lease, or a caller who manages pools).
func poolLeaseView(l store.Lease, shown bool) api.PoolLease {
	pl := api.PoolLease{ID: l.ID, Phase: l.Phase, Profile: l.Pool, ClusterName: l.InstanceID, CreatedAt: l.CreatedAt}
	if !l.ExpiresAt.IsZero() {
		t := l.ExpiresAt
		pl.ExpiresAt = &t
	}
	if shown {
		pl.Requester, pl.Alias, pl.Metadata = l.Principal, l.Alias, l.Metadata
	}
	return pl
}
