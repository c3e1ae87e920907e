// Package wait is the wait for readiness shared by the backends that read it from their own
// Status (capi, vcluster, and the hosted k3s and k0s).
package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	for {
		st, err := status(ctx, id)
		switch {
		case err != nil && (errors.Is(err, backends.ErrNotFound) || ctx.Err() != nil):
			return st, err
		case err == nil && st.Phase == backends.PhaseReady:
			return st, nil
		case err == nil && st.Phase == backends.PhaseFailed:
			return st, fmt.Errorf("instance %s failed: %s", id, st.Message)
		}
		if err == nil && progress != nil {
			progress(st)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("instance %s not ready: %s: %w", id, st.Message, ctx.Err())
			}
			return st, err
		case <-time.After(interval):
		}
	}
}
