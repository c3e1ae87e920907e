package server

import (
	"net/http"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease"
)

// handleLeaseSleep puts a Bound lease's cluster to sleep: its compute stops, its state stays.
func (s *Server) handleLeaseSleep(w http.ResponseWriter, r *http.Request) {
	s.leaseSleepChange(w, r, true)
}

// handleLeaseWake wakes a sleeping lease's cluster within its pool's resumeTimeout.
func (s *Server) handleLeaseWake(w http.ResponseWriter, r *http.Request) {
	s.leaseSleepChange(w, r, false)
}

// leaseSleepChange runs the lease's sleep or wake update and answers the lease as it is then.
// Both are idempotent: sleeping a sleeping lease, or waking an awake one, answers 200 at once.
func (s *Server) leaseSleepChange(w http.ResponseWriter, r *http.Request, asleep bool) {
	l, ok := s.ownLease(w, r)
	if !ok {
		return
	}
	// A wake is bounded by the lease's own terms (its pool's resumeTimeout and certificate
	// minimum, granted at admission): the request says nothing of them.
	action, update, title, arg := "lease.wake", lease.UpdateWake, "Wake refused", any(lease.WakeRequest{})
	if asleep {
		action, update, title, arg = "lease.sleep", lease.UpdateSleep, "Sleep refused", lease.SleepRequest{}
	}
	if l.Phase == api.LeasePending {
		// Right after a bind the row may still say Pending (its projection lags the workflow,
		// whose view GET answers): the workflow decides then (its validator refuses a lease
		// that does not hold its member yet).
		if lv := s.queryLease(r.Context(), l.ID); lv != nil && lv.Phase == api.LeaseBound {
			l.Phase = api.LeaseBound
		}
	}
	if l.Phase != api.LeaseBound {
		writeError(w, http.StatusConflict, api.ReasonNotReady, title, "the lease is "+string(l.Phase)+": only a Bound lease sleeps and wakes")
		return
	}
	// The update cannot be taken back: its request is recorded first, its outcome after.
	if err := s.audit(r, action, l.ID, l.Pool, "requested", nil); err != nil {
		s.auditFailed(w, r, action, err)
		return
	}
	started := time.Now()
	var lv lease.View
	err := s.untilLeaseRuns(r.Context(), l, func() error {
		h, err := s.Temporal.UpdateWorkflow(r.Context(), clientUpdate(l.ID, update, arg))
		if err == nil {
			err = h.Get(r.Context(), &lv)
		}
		return err
	})
	if reason, rejected := lease.IsSleepRejection(err); rejected {
		s.auditOutcome(r, action, l.ID, l.Pool, "refused", map[string]any{"reason": reason})
		status := http.StatusConflict
		if reason == api.ReasonWakeFailed || reason == api.ReasonCertificatesExpiring {
			status = http.StatusBadGateway
		}
		writeError(w, status, reason, title, sleepDetail(reason))
		return
	}
	if err != nil {
		s.auditOutcome(r, action, l.ID, l.Pool, "failed", map[string]any{"error": err.Error()})
		if isNotRunning(err) {
			writeError(w, http.StatusConflict, api.ReasonNotReady, title, "the lease has ended")
			return
		}
		s.unavailable(w, r, action, err)
		return
	}
	s.auditOutcome(r, action, l.ID, l.Pool, "ok", map[string]any{"sleeping": lv.Sleeping, "took": time.Since(started).String()})
	v, err := s.leaseViewFrom(r.Context(), l, &lv, false)
	if err != nil {
		s.unavailable(w, r, action, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func sleepDetail(reason api.ReasonCode) string {
	switch reason {
	case api.ReasonNotReady:
		return "only a Bound lease sleeps and wakes"
	case api.ReasonSleepUnsupported:
		return "the lease's cluster cannot sleep: its backend has no sleep, or its state would not survive one (k3s, k0s: spec.cluster.persistence.storageType pvc or spec.backend.datastore is needed; see `kobe backends`)"
	case api.ReasonCertificatesExpiring:
		return "the cluster's certificates expired while it slept and its backend cannot re-issue them in place: it is broken (condition InstanceHealthy); release the lease and take another"
	case api.ReasonWakeFailed:
		return "the cluster did not wake within its pool's resumeTimeout: it is broken (condition InstanceHealthy); release the lease and take another"
	}
	return string(reason)
}
