package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pools"
	"github.com/kunobi-ninja/kobe/workflows"
)

func (s *Server) poolView(ctx context.Context, p store.Pool) PoolView {
	v := PoolView{Name: p.Name, ResourceKind: resourceKindPool, Backend: p.Backend, Capabilities: []string{}}
	if f, ok := backends.Lookup(p.Backend); ok {
		c := backends.CapabilitiesOf(f.Name, f.Description, f.Prototype)
		for name, has := range map[string]bool{"sleep": c.Sleep, "snapshot": c.Snapshot, "certRotation": c.CertRotate, "migration": c.Migrate} {
			if has {
				v.Capabilities = append(v.Capabilities, name)
			}
		}
		sort.Strings(v.Capabilities)
	}
	if m, err := pools.Parse(p.Spec); err == nil {
		if pol, err := m.Validate(); err == nil {
			mode := "fixed"
			if pol.Autoscale {
				mode = "autoscale"
			}
			v.Policy = PoolPolicy{Mode: mode, TTL: pol.TTL.String(), MaxTTL: pol.MaxTTL.String(), MaxExtensions: pol.MaxExtensions,
				WarmTarget: pol.WarmTarget, MaxClusters: pol.MaxClusters, QueueTimeout: pol.QueueTimeout.String()}
		}
	}
	resp, err := s.Temporal.QueryWorkflow(ctx, workflows.PoolWorkflowID(p.Name), "", workflows.QueryPoolStatus)
	var st workflows.PoolStatus
	if err == nil {
		err = resp.Get(&st)
	}
	if err != nil {
		// The pool's workflow does not answer (Temporal restarting, the worker down): the
		// store's projection of its members and queue is a moment old but not zero.
		s.storePoolCounts(ctx, &v)
		return v
	}
	v.Phase, v.Ready, v.Leased, v.Creating, v.Recycling, v.Outdated, v.QueueDepth = st.Phase, st.Ready, st.Leased, st.Creating, st.Deleting, st.Outdated, st.QueueDepth
	v.ConsecutiveFailures, v.LastFailureReason, v.Generation = st.ConsecutiveFailures, st.LastFailureReason, st.Generation
	if !st.NextAttemptAt.IsZero() {
		t := st.NextAttemptAt
		v.NextAttemptAt = &t
	}
	if qs, err := s.Store.ListInstances(ctx, store.InstanceFilter{Pool: p.Name, Phase: workflows.InstancePhaseQuarantined}); err == nil {
		v.Quarantined = len(qs)
	}
	return v
}

// storePoolCounts fills a pool's counts from the store, with phase Unknown: what the pool's
// workflow and its leases last projected, for when the workflow cannot be asked. Instance rows
// do not name their lease, so Leased is the pool's Bound leases and Ready the rest of its Ready
// instances.
func (s *Server) storePoolCounts(ctx context.Context, v *PoolView) {
	v.Phase = "Unknown"
	ready := 0
	if is, err := s.Store.ListInstances(ctx, store.InstanceFilter{Pool: v.Name}); err == nil {
		for _, in := range is {
			switch in.Phase {
			case workflows.InstancePhaseCreating:
				v.Creating++
			case workflows.InstancePhaseReady:
				ready++
			case workflows.InstancePhaseDeleting:
				v.Recycling++
			case workflows.InstancePhaseQuarantined:
				v.Quarantined++
			}
		}
	}
	if ls, err := s.Store.ListLeases(ctx, store.LeaseFilter{Pool: v.Name, Phases: []string{workflows.LeasePending, workflows.LeaseBound}}); err == nil {
		for _, l := range ls {
			if l.Phase == workflows.LeaseBound {
				v.Leased++
			} else {
				v.QueueDepth++
			}
		}
	}
	v.Ready = max(ready-v.Leased, 0)
}

func (s *Server) handlePoolList(w http.ResponseWriter, r *http.Request) {
	ps, err := s.Store.ListPools(r.Context())
	if err != nil {
		s.unavailable(w, r, "listing pools", err)
		return
	}
	out := PoolList{Items: []PoolView{}}
	for _, p := range ps {
		out.Items = append(out.Items, s.poolView(r.Context(), p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handlePoolGet(w http.ResponseWriter, r *http.Request) {
	p, err := s.Store.GetPool(r.Context(), r.PathValue("name"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, ReasonNotFound, "Pool not found", fmt.Sprintf("no pool named %q", r.PathValue("name")))
		return
	}
	if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	writeJSON(w, http.StatusOK, s.poolView(r.Context(), p))
}

// handlePoolPut applies a ClusterPool manifest (JSON or YAML): created 201, updated 200.
func (s *Server) handlePoolPut(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		badRequest(w, "body: "+err.Error())
		return
	}
	m, err := pools.Parse(body)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if m.Metadata.Name != name {
		badRequest(w, fmt.Sprintf("metadata.name: %q does not match the URL's pool %q", m.Metadata.Name, name))
		return
	}
	if _, err := m.Validate(); err != nil {
		badRequest(w, err.Error())
		return
	}
	_, getErr := s.Store.GetPool(r.Context(), name)
	created := errors.Is(getErr, store.ErrNotFound)
	status, change := http.StatusOK, "update"
	if created {
		status, change = http.StatusCreated, "create"
	}
	// Applying signals the pool's workflow, which cannot be taken back: the request is
	// recorded first, and a failure to record it means nothing is applied.
	if err := s.audit(r, "pool.apply", name, name, "requested", map[string]any{"backend": m.Spec.Backend.Type, "change": change}); err != nil {
		s.auditFailed(w, r, "applying the pool", err)
		return
	}
	if err := EnsurePool(r.Context(), s.Temporal, s.Store, s.TaskQueue, m); err != nil {
		s.auditOutcome(r, "pool.apply", name, name, "failed", map[string]any{"error": err.Error()})
		s.unavailable(w, r, "applying the pool", err)
		return
	}
	p, err := s.Store.GetPool(r.Context(), name)
	if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	writeJSON(w, status, s.poolView(r.Context(), p))
}

// handlePoolDelete drains a pool: queued claims fail with pool_deleted, warm members are torn
// down, leased ones when their leases end; then the pool is forgotten. 202 while draining.
func (s *Server) handlePoolDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.Store.GetPool(r.Context(), name); errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, ReasonNotFound, "Pool not found", fmt.Sprintf("no pool named %q", name))
		return
	} else if err != nil {
		s.unavailable(w, r, "reading the pool", err)
		return
	}
	// The delete signal cannot be taken back: the request is recorded first (the pool's own
	// pool.deleted follows when it has drained).
	if err := s.audit(r, "pool.delete", name, name, "requested", nil); err != nil {
		s.auditFailed(w, r, "deleting the pool", err)
		return
	}
	err := s.Temporal.SignalWorkflow(r.Context(), workflows.PoolWorkflowID(name), "", workflows.SignalDeletePool, nil)
	if isNotRunning(err) {
		// No workflow holds members: forget the pool at once, with its event.
		err := s.Store.InTx(r.Context(), func(tx store.Store) error {
			if err := tx.DeletePool(r.Context(), name); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			_, err := tx.AppendEvent(r.Context(), s.auditEvent(r, "pool.delete", name, name, "deleted", nil))
			return err
		})
		if err != nil {
			s.unavailable(w, r, "deleting the pool", err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.auditOutcome(r, "pool.delete", name, name, "failed", map[string]any{"error": err.Error()})
		s.unavailable(w, r, "deleting the pool", err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
