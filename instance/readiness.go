package instance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/addons"
	"github.com/kunobi-ninja/kobe/internal/readiness"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// Error types of the addon and gate activities that retrying cannot fix.
const (
	ErrInvalidAddon    = "InvalidAddon"
	ErrUnsupportedGate = "UnsupportedGate"
	ErrGatesNotPassed  = "ReadinessGatesNotPassed"
)

const (
	gatePollInterval  = 2 * time.Second
	heartbeatInterval = 2 * time.Second
)

// AddonsRequest asks for a pool's addons to be applied to one instance.
type AddonsRequest struct {
	Backend    string           `json:"backend"`
	InstanceID string           `json:"instanceId"`
	Addons     []poolspec.Addon `json:"addons"`
}

// GatesRequest asks to wait until an instance passes a pool's readiness gates. Deadline is set
// by the workflow (deterministically), so that an attempt retried on another worker keeps the
// same end instead of starting the wait over.
type GatesRequest struct {
	Backend    string                   `json:"backend"`
	InstanceID string                   `json:"instanceId"`
	Gates      []poolspec.ReadinessGate `json:"gates"`
	Deadline   time.Time                `json:"deadline"`
}

// adminConfig returns a client config from the instance's admin kubeconfig. The kubeconfig is
// secret: it stays in this process's memory, never logged, never returned.
func (a *Activities) adminConfig(ctx context.Context, backendName, id string) (*rest.Config, error) {
	b, err := a.backend(backendName)
	if err != nil {
		return nil, err
	}
	cred, err := b.Credentials(ctx, id, backends.CredentialRequest{})
	if errors.Is(err, backends.ErrNotFound) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("instance %s: %v", id, err), "InstanceNotFound", nil)
	}
	if err != nil {
		return nil, fmt.Errorf("admin credential of %s: %w", id, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	if err != nil {
		// Not the parser's message: it might quote the kubeconfig.
		return nil, fmt.Errorf("admin kubeconfig of %s does not load", id)
	}
	return cfg, nil
}

// heartbeater records the latest progress now and then, so that a long step (a CRD to be
// established, a gate that takes its time) still proves the worker alive.
type heartbeater struct {
	mu   sync.Mutex
	last string
	stop chan struct{}
	done sync.WaitGroup
}

func startHeartbeat(ctx context.Context, first string) *heartbeater {
	h := &heartbeater{last: first, stop: make(chan struct{})}
	activity.RecordHeartbeat(ctx, first)
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(heartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.mu.Lock()
				msg := h.last
				h.mu.Unlock()
				activity.RecordHeartbeat(ctx, msg)
			}
		}
	}()
	return h
}

func (h *heartbeater) set(msg string) {
	h.mu.Lock()
	h.last = msg
	h.mu.Unlock()
}

func (h *heartbeater) close() {
	close(h.stop)
	h.done.Wait()
}

// ApplyAddons server-side applies each addon, in the pool's order, to the instance. Applying
// is idempotent, so a retried attempt simply applies again.
func (a *Activities) ApplyAddons(ctx context.Context, req AddonsRequest) error {
	cfg, err := a.adminConfig(ctx, req.Backend, req.InstanceID)
	if err != nil {
		return err
	}
	hb := startHeartbeat(ctx, "applying addons")
	defer hb.close()
	for _, addon := range req.Addons {
		hb.set("applying addon " + addon.Name)
		if err := addons.Apply(ctx, cfg, addon, nil); err != nil {
			if errors.Is(err, addons.ErrInvalid) {
				return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidAddon, nil)
			}
			return err
		}
		activity.GetLogger(ctx).Info("addon applied", "instance", req.InstanceID, "addon", addon.Name)
	}
	return nil
}

// WaitReadinessGates polls the gates until all pass or the request's deadline; the heartbeat
// carries the gates still pending. Running out of time is final (the workflow then tears the
// instance down); an earlier failure (worker lost) is retried by Temporal up to the deadline.
func (a *Activities) WaitReadinessGates(ctx context.Context, req GatesRequest) error {
	cfg, err := a.adminConfig(ctx, req.Backend, req.InstanceID)
	if err != nil {
		return err
	}
	hb := startHeartbeat(ctx, fmt.Sprintf("%d gates pending", len(req.Gates)))
	defer hb.close()
	wctx := ctx
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	err = readiness.WaitAll(wctx, cfg, req.Gates, gatePollInterval, hb.set)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, readiness.ErrUnsupported):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrUnsupportedGate, nil)
	case errors.Is(err, readiness.ErrNeverPasses):
		// Waiting cannot mend it (a certificate expiring too soon): the member is refused now.
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("instance %s: %v", req.InstanceID, err), ErrGatesNotPassed, nil)
	case ctx.Err() == nil && wctx.Err() != nil:
		// Our own deadline, not the activity's cancellation: the gates had their time.
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("instance %s: %v", req.InstanceID, err), ErrGatesNotPassed, nil)
	}
	return err
}
