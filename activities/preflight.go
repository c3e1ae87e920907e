package activities

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"github.com/kunobi-ninja/kobe/backends"
)

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
