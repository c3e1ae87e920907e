package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

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
}

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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
