package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
)

// HealthRequest asks for the health of some members of one pool, all on one host.
type HealthRequest struct {
	Backend     string   `json:"backend"`
	InstanceIDs []string `json:"instanceIds"`
}

// HealthResult is one member's health: the backend's own view and an answer from its API.
type HealthResult struct {
	InstanceID string `json:"instanceId"`
	Healthy    bool   `json:"healthy"`
	// Message says what failed; never a credential.
	Message string `json:"message,omitempty"`
	// Sync says what the instance could not sync onto its host lately, for a backend that
	// syncs (backends.SyncErrorReporter) and an instance whose API answered; nil otherwise
	// (unknown: the pool keeps what it knew).
	Sync *SyncState `json:"sync,omitempty"`
}

// SyncState is what an instance could not sync onto its host within SyncErrorWindow.
type SyncState struct {
	// Reason is the reason code of the newest sync error (api.ReasonSyncDenied, …); empty when
	// every object synced.
	Reason api.ReasonCode `json:"reason,omitempty"`
	// Message names the object and says what the host answered ("Pod default/web: …").
	Message string `json:"message,omitempty"`
	// Objects counts the objects with a sync error.
	Objects int `json:"objects,omitempty"`
}

// SyncErrorWindow is how recent a sync error must be to count. A syncer retries an object it
// could not sync with a backoff of at most about 17 minutes (controller-runtime's default
// rate limiter, 1000 s) and reports each failure again, so an error that still stands is seen
// again within the window, and one that was resolved (or whose object was deleted) stops
// counting once the window has passed. The syncer reports no success to go by.
const SyncErrorWindow = 20 * time.Minute

// healthRequestTimeout bounds the request to one instance's API: a live API server answers
// /readyz in milliseconds, a wedged one must not hold the whole check.
const healthRequestTimeout = 5 * time.Second

// CheckHealth asks the backend for each instance's status and then asks the instance's own API
// (/readyz with the admin credential, or /api where the server has no /readyz) whether it serves. A check that cannot be made counts as
// failed: the pool acts on consecutive failures, so one slow answer recycles nothing.
func (a *Activities) CheckHealth(ctx context.Context, req HealthRequest) ([]HealthResult, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return nil, err
	}
	out := make([]HealthResult, 0, len(req.InstanceIDs))
	for _, id := range req.InstanceIDs {
		res := HealthResult{InstanceID: id}
		if msg := a.checkOne(ctx, b, req.Backend, id); msg != "" {
			res.Message = msg
		} else {
			res.Healthy = true
			res.Sync = a.syncState(ctx, b, id)
		}
		out = append(out, res)
	}
	return out, nil
}

func (a *Activities) checkOne(ctx context.Context, b backends.RuntimeBackend, backendName, id string) string {
	st, err := b.Status(ctx, id)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return "the backend has no trace of the instance"
	case err != nil:
		return fmt.Sprintf("backend status: %v", err)
	case st.Phase == backends.PhaseFrozen:
		// A frozen spare does not answer until thawed: its health is that its processes are
		// there (the backend reports a dead one as Unhealthy, frozen or not). Its API is checked
		// again once the pool thaws it.
		return ""
	case st.Phase == backends.PhaseSleeping:
		// Asleep on purpose (a lease's sleep): not broken, and its API is not expected to answer.
		return ""
	case st.Phase != backends.PhaseReady:
		if st.Message != "" {
			return fmt.Sprintf("backend reports %s: %s", st.Phase, st.Message)
		}
		return fmt.Sprintf("backend reports %s", st.Phase)
	}
	cfg, err := a.adminConfig(ctx, backendName, id)
	if err != nil {
		return err.Error()
	}
	cfg.Timeout = healthRequestTimeout
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Sprintf("client for the instance's API: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, healthRequestTimeout)
	defer cancel()
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
	if apierrors.IsNotFound(err) {
		// An API server without health endpoints (Cluster API's in-memory workload clusters
		// serve the Kubernetes API but no /readyz, /livez or /version): it is healthy when it
		// serves API discovery, which every Kubernetes API server does.
		if _, err := kube.Discovery().RESTClient().Get().AbsPath("/api").DoRaw(rctx); err != nil {
			return fmt.Sprintf("the instance's API has no /readyz and does not answer /api: %v", err)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("the instance's API does not answer /readyz: %v", err)
	}
	if string(body) != "ok" {
		return fmt.Sprintf("the instance's API answers /readyz with %q", truncate(string(body), 200))
	}
	return ""
}

// syncState asks a backend that syncs what it could not sync lately; nil when it does not sync
// or cannot say now.
func (a *Activities) syncState(ctx context.Context, b backends.RuntimeBackend, id string) *SyncState {
	r, ok := b.(backends.SyncErrorReporter)
	if !ok {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, healthRequestTimeout)
	defer cancel()
	errs, err := r.SyncErrors(rctx, id)
	if err != nil {
		if a.Logger != nil {
			a.Logger.Warn("sync errors unknown", zap.String("instance", id), zap.Error(err))
		}
		return nil
	}
	return syncStateOf(errs, time.Now())
}

// syncStateOf keeps the errors seen within SyncErrorWindow of now (errs newest first).
func syncStateOf(errs []backends.SyncError, now time.Time) *SyncState {
	st := &SyncState{}
	for _, e := range errs {
		if now.Sub(e.Last) > SyncErrorWindow {
			continue
		}
		if st.Objects == 0 {
			st.Reason = e.Reason
			st.Message = truncate(e.Object+": "+e.Message, 300)
		}
		st.Objects++
	}
	return st
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
