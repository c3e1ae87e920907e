package server

// Applying and deleting a pool, for both of the ways a pool is changed: PUT and DELETE
// /v1/pools/{name} (pool_handlers.go), and a ClusterPool resource's controller
// (resources/poolcontroller). One path, so that both validate, preflight and audit alike.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// PoolChangeError is why a pool was not applied or deleted, as the API answers it: the HTTP
// status, the reason code and the detail. Refusals (Status 4xx) mean the change is wrong and
// trying again will not help; 503s mean it could not be made now.
type PoolChangeError struct {
	Status int
	Reason api.ReasonCode
	Title  string
	Detail string
}

func (e *PoolChangeError) Error() string { return e.Title + ": " + e.Detail }

// Refused says whether the change itself was refused (a 4xx), as opposed to not made now.
func (e *PoolChangeError) Refused() bool { return e.Status < 500 }

func refusedChange(status int, reason api.ReasonCode, title, detail string) *PoolChangeError {
	return &PoolChangeError{Status: status, Reason: reason, Title: title, Detail: detail}
}

func unavailableChange(what string, err error) *PoolChangeError {
	return &PoolChangeError{Status: http.StatusServiceUnavailable, Reason: api.ReasonDegraded,
		Title: "Service unavailable", Detail: what + " failed: " + err.Error()}
}

// managedElsewhere refuses a change of a pool whose row says another manager owns it: a pool
// a resource manages is changed only through that resource. managedBy is the changer's own
// name ("" for the API).
func managedElsewhere(p store.Pool, managedBy string) *PoolChangeError {
	if p.ManagedBy == "" || p.ManagedBy == managedBy {
		return nil
	}
	return refusedChange(http.StatusConflict, api.ReasonManagedExternally, "Pool managed externally",
		fmt.Sprintf("pool %q is managed by the Kubernetes resource %s: change or delete that resource instead", p.Name, p.ManagedBy))
}

// ApplyPool validates a pool manifest, judges it against its backend (preflight), records the
// request in the audit log and applies it (pool.Apply). managedBy names the resource that
// manages the pool ("ClusterPool/dev"; "" for the API): a pool another manager owns is refused
// with managed_externally, and a pool without one is taken over by the resource that applies
// it. It returns whether the pool was created. Errors are *PoolChangeError.
func (s *Server) ApplyPool(ctx context.Context, m *poolspec.ClusterPool, managedBy string, by Actor) (created bool, err error) {
	name := m.Metadata.Name
	pol, err := m.Validate()
	if err != nil {
		return false, refusedChange(http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", err.Error())
	}
	// Judged against the backend's environment before anything is recorded: a spec that no
	// member could be created from is refused here, not at its first provisioning.
	refusal, err := s.preflight(ctx, pol)
	if err != nil {
		return false, &PoolChangeError{Status: http.StatusServiceUnavailable, Reason: api.ReasonBackendError,
			Title: "Could not check the pool against its backend", Detail: err.Error()}
	}
	if refusal != "" {
		return false, refusedChange(http.StatusBadRequest, api.ReasonInvalidRequest, "Invalid request", refusal)
	}
	current, getErr := s.Store.GetPool(ctx, name)
	created = errors.Is(getErr, store.ErrNotFound)
	if getErr != nil && !created {
		return false, unavailableChange("reading the pool", getErr)
	}
	if !created {
		if refusal := managedElsewhere(current, managedBy); refusal != nil {
			return false, refusal
		}
	}
	change := "update"
	if created {
		change = "create"
	}
	detail := map[string]any{"backend": m.Spec.Backend.Type, "change": change}
	if managedBy != "" {
		detail["managedBy"] = managedBy
	}
	// Applying signals the pool's workflow, which cannot be taken back: the request is
	// recorded first, and a failure to record it means nothing is applied.
	if err := s.auditBy(ctx, by, "pool.apply", name, name, "requested", detail); err != nil {
		return false, &PoolChangeError{Status: http.StatusServiceUnavailable, Reason: api.ReasonDegraded, Title: "Service unavailable",
			Detail: "applying the pool failed, nothing was changed: " + err.Error()}
	}
	if err := pool.Apply(ctx, s.Temporal, s.Store, m, pool.ApplyOptions{TaskQueue: s.TaskQueue, ContinueAsNewAfter: s.ContinueAsNewAfter, ManagedBy: managedBy}); err != nil {
		s.auditOutcomeBy(ctx, by, "pool.apply", name, name, "failed", map[string]any{"error": err.Error()})
		return false, unavailableChange("applying the pool", err)
	}
	return created, nil
}

// DeletePool drains a pool: queued claims fail with pool_deleted, warm members are torn down,
// leased ones when their leases end (a held lease is not cut short: it ends at its expiry or
// its release); then the pool is forgotten. It returns true when the pool is gone at once (no
// workflow held it), false while it drains. A pool that does not exist is a 404
// *PoolChangeError; managedBy as for ApplyPool.
func (s *Server) DeletePool(ctx context.Context, name, managedBy string, by Actor) (gone bool, err error) {
	p, err := s.Store.GetPool(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, refusedChange(http.StatusNotFound, api.ReasonNotFound, "Pool not found", fmt.Sprintf("no pool named %q", name))
	} else if err != nil {
		return false, unavailableChange("reading the pool", err)
	}
	if refusal := managedElsewhere(p, managedBy); refusal != nil {
		return false, refusal
	}
	// The delete signal cannot be taken back: the request is recorded first (the pool's own
	// pool.deleted follows when it has drained).
	if err := s.auditBy(ctx, by, "pool.delete", name, name, "requested", nil); err != nil {
		return false, &PoolChangeError{Status: http.StatusServiceUnavailable, Reason: api.ReasonDegraded, Title: "Service unavailable",
			Detail: "deleting the pool failed, nothing was changed: " + err.Error()}
	}
	// The signal names the row's generation: if the pool is applied again while it drains,
	// the drained workflow keeps the newer row and lives on.
	err = s.Temporal.SignalWorkflow(ctx, pool.WorkflowID(name), "", pool.SignalDeletePool,
		pool.Deletion{Generation: p.Generation})
	if isNotRunning(err) {
		// No workflow holds members: forget the pool at once, with its event, unless an apply
		// recorded it again since it was read (that apply's run then holds it). No workflow
		// deletes its schedules either: they go first, so that a failure leaves the pool whole
		// (try again), never a forgotten pool whose schedules act on the next of its name.
		if err := pool.DeleteSchedules(ctx, s.Temporal, name); err != nil {
			s.auditOutcomeBy(ctx, by, "pool.delete", name, name, "failed", map[string]any{"error": err.Error()})
			return false, unavailableChange("deleting the pool's schedules", err)
		}
		deleted := false
		err := s.Store.InTx(ctx, func(tx store.Store) error {
			var err error
			if deleted, err = tx.DeletePoolGeneration(ctx, name, p.Generation); err != nil || !deleted {
				return err
			}
			_, err = tx.AppendEvent(ctx, eventBy(by, "pool.delete", name, name, "deleted", nil))
			return err
		})
		if err != nil {
			return false, unavailableChange("deleting the pool", err)
		}
		if !deleted {
			s.auditOutcomeBy(ctx, by, "pool.delete", name, name, "conflict", nil)
			return false, refusedChange(http.StatusConflict, api.ReasonPoolChanged, "Pool changed",
				fmt.Sprintf("pool %q was applied while it was being deleted; delete it again", name))
		}
		return true, nil
	}
	if err != nil {
		s.auditOutcomeBy(ctx, by, "pool.delete", name, name, "failed", map[string]any{"error": err.Error()})
		return false, unavailableChange("deleting the pool", err)
	}
	return false, nil
}

// PoolView is a pool as a pool admin sees it (GET /v1/pools/{name}), for the controller's
// status; found is false when no pool has the name.
func (s *Server) PoolView(ctx context.Context, name string) (v api.PoolView, found bool, err error) {
	p, err := s.Store.GetPool(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return api.PoolView{}, false, nil
	}
	if err != nil {
		return api.PoolView{}, false, err
	}
	// No caller's role: the view's capabilities (the caller's operations) are empty.
	return s.poolView(ctx, p, access.Role{}), true, nil
}

// PoolRecord is a pool's row: its applied manifest (JSON) and its manager; found is false when
// no pool has the name.
func (s *Server) PoolRecord(ctx context.Context, name string) (p store.Pool, found bool, err error) {
	p, err = s.Store.GetPool(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Pool{}, false, nil
	}
	return p, err == nil, err
}

// writeChangeError answers a failed pool change as the API does.
func (s *Server) writeChangeError(w http.ResponseWriter, r *http.Request, err error) {
	var ce *PoolChangeError
	if !errors.As(err, &ce) {
		s.unavailable(w, r, "changing the pool", err)
		return
	}
	if !ce.Refused() {
		if s.Logger != nil {
			s.Logger.Warn(ce.Title, zap.String("detail", ce.Detail), zap.String("requestId", requestID(r)))
		}
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, ce.Status, ce.Reason, ce.Title, ce.Detail)
}
