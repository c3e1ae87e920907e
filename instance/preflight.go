package instance

import (
	"context"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PreflightWorkflowName is the registered name of the workflow that judges a pool's spec
// before `PUT /v1/pools/{name}` applies it.
const PreflightWorkflowName = "PreflightPool"

// PreflightTimeout bounds a whole preflight: the API request that waits for it must answer.
const PreflightTimeout = 30 * time.Second

// PreflightInput is the spec a member of the pool would be created with.
type PreflightInput struct {
	Backend string                `json:"backend"`
	Spec    backends.InstanceSpec `json:"spec"`
}

// Preflight runs the backend's checks of a spec on a worker that runs the backend, and returns
// the verdict. It is a workflow, not a call from the API server, because the backends'
// environments are reachable from the workers only; it is short and creates nothing.
func Preflight(ctx workflow.Context, in PreflightInput) (PreflightResult, error) {
	ctx = workflow.WithActivityOptions(ctx, preflightOptions())
	var a *Activities
	var res PreflightResult
	err := workflow.ExecuteActivity(ctx, a.PreflightSpec, BackendRequest(in)).Get(ctx, &res)
	return res, err
}

// PreflightResult is the verdict on a pool's spec before the pool is applied. Refusal is set
// (and says what is wrong) when the spec itself is wrong; an environment that cannot answer
// is an error of the activity instead, so that the caller can tell the two apart.
type PreflightResult struct {
	Refusal string `json:"refusal,omitempty"`
}

// ErrPreflightUnavailable is the non-retryable error type of a preflight whose backend's
// environment did not answer (e.g. the management cluster is down): the spec was not judged.
const ErrPreflightUnavailable = "PreflightUnavailable"

// PreflightSpec judges a spec as the backend's Create would, without creating anything: the
// backend's Validate, then its Preflight against its environment when it has one. It runs on a
// worker rather than in the API server because only the workers reach the backends'
// environments (a management cluster, a host cluster, a datastore).
func (a *Activities) PreflightSpec(ctx context.Context, req BackendRequest) (PreflightResult, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return PreflightResult{}, err
	}
	if err := b.Validate(req.Spec); err != nil {
		return PreflightResult{Refusal: err.Error()}, nil
	}
	p, ok := b.(backends.Preflighter)
	if !ok {
		return PreflightResult{}, nil
	}
	defer keepHeartbeating(ctx, "preflight")()
	err = p.Preflight(ctx, req.Spec)
	switch {
	case err == nil:
		return PreflightResult{}, nil
	case backends.IsInvalidSpec(err):
		return PreflightResult{Refusal: err.Error()}, nil
	default:
		return PreflightResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrPreflightUnavailable, nil)
	}
}
