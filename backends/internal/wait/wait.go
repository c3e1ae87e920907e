// Package wait is the wait for readiness shared by the backends that read it from their own
// Status (capi, vcluster, and the hosted k3s and k0s), on apimachinery's poll loop.
package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

	k8swait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/kunobi-ninja/kobe/backends"
)

// Ready implements backends.RuntimeBackend's WaitReady over a backend's Status, asked every
// interval: Creating and Unhealthy are waited through (conditions go back and forth while an
// instance comes up), Ready ends the wait, Failed ends it with an error carrying the instance's
// message, and so does an instance the backend has no trace of, or ctx ending. A Status error
// that is neither is waited through too (the backend's API may be briefly unreachable).
// progress, if not nil, gets every status read while waiting.
func Ready(ctx context.Context, id string, interval time.Duration,
	status func(ctx context.Context, id string) (backends.InstanceStatus, error),
	progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	var st backends.InstanceStatus
	var lastErr error
	err := k8swait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		st, lastErr = status(ctx, id)
		switch {
		case lastErr != nil && (errors.Is(lastErr, backends.ErrNotFound) || ctx.Err() != nil):
			return false, lastErr
		case lastErr == nil && st.Phase == backends.PhaseReady:
			return true, nil
		case lastErr == nil && st.Phase == backends.PhaseFailed:
			return false, fmt.Errorf("instance %s failed: %s", id, st.Message)
		}
		if lastErr == nil && progress != nil {
			progress(st)
		}
		return false, nil
	})
	switch {
	case err == nil:
		return st, nil
	case ctx.Err() != nil && lastErr != nil:
		// The context ended while the backend's API did not answer: say what it said.
		return st, lastErr
	case ctx.Err() != nil:
		return st, fmt.Errorf("instance %s not ready: %s: %w", id, st.Message, ctx.Err())
	}
	return st, err
}
