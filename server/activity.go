package server

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
)

// leaseActivity tells a lease with an inactivity limit (its pool's spec.sleep.afterInactivity)
// that its holder asked kobe about it (read the lease or its kubeconfig), at most once per a
// quarter of the limit per lease, so that a client polling its lease does not grow the lease's
// history with a signal per request. Each API replica keeps its own record.
type leaseActivity struct {
	mu   sync.Mutex
	sent map[string]time.Time // lease id → when this replica last signalled it
}

// due says whether a signal to the lease is due at now, and records it as sent if so.
func (a *leaseActivity) due(leaseID string, every time.Duration, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sent == nil {
		a.sent = map[string]time.Time{}
	}
	if last, ok := a.sent[leaseID]; ok && now.Sub(last) < every {
		return false
	}
	// Forget leases not heard of for long, so that the record stays small.
	for id, t := range a.sent {
		if now.Sub(t) > time.Hour {
			delete(a.sent, id)
		}
	}
	a.sent[leaseID] = now
	return true
}

// noteLeaseActivity signals SignalActivity to a Bound, awake lease with an inactivity limit
// whose holder just asked about it (lv: the workflow's view; nil when it could not be read).
func (s *Server) noteLeaseActivity(ctx context.Context, leaseID string, lv *lease.View) {
	if lv == nil || lv.AfterInactivity <= 0 || lv.Phase != api.LeaseBound || lv.Sleeping || ctx.Value(notActivityKey{}) != nil {
		return
	}
	if !s.activity.due(leaseID, lv.AfterInactivity/4, time.Now()) {
		return
	}
	err := s.Temporal.SignalWorkflow(ctx, leasestart.WorkflowID(leaseID), "", lease.SignalActivity, nil)
	if err != nil && s.Logger != nil {
		// The lease may sleep a little early: its holder's next request is noted again.
		s.Logger.Warn("cannot tell the lease of its holder's activity", zap.String("lease", leaseID), zap.Error(err))
	}
}

// queryLease is the lease workflow's view (nil when it cannot be asked).
func (s *Server) queryLease(ctx context.Context, leaseID string) *lease.View {
	resp, err := s.Temporal.QueryWorkflow(ctx, leasestart.WorkflowID(leaseID), "", lease.QueryLease)
	if err != nil {
		return nil
	}
	var lv lease.View
	if resp.Get(&lv) != nil {
		return nil
	}
	return &lv
}

type notActivityKey struct{}

// notActivity marks a request kobe makes on its holder's behalf without the holder asking (the
// portal's live refresh of its leases page): it is not activity.
func notActivity(ctx context.Context) context.Context {
	return context.WithValue(ctx, notActivityKey{}, true)
}
