package wait

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
)

// statuses answers each call with the next of its answers, the last one for ever after.
func statuses(answers ...func() (backends.InstanceStatus, error)) func(context.Context, string) (backends.InstanceStatus, error) {
	n := 0
	return func(context.Context, string) (backends.InstanceStatus, error) {
		a := answers[min(n, len(answers)-1)]
		n++
		return a()
	}
}

func phase(p backends.Phase, msg string) func() (backends.InstanceStatus, error) {
	return func() (backends.InstanceStatus, error) { return backends.InstanceStatus{Phase: p, Message: msg}, nil }
}

func failing(err error) func() (backends.InstanceStatus, error) {
	return func() (backends.InstanceStatus, error) { return backends.InstanceStatus{}, err }
}

func TestReady(t *testing.T) {
	ctx := context.Background()
	var seen []backends.Phase
	st, err := Ready(ctx, "i1", time.Millisecond, statuses(phase(backends.PhaseCreating, ""), failing(errors.New("connection refused")),
		phase(backends.PhaseUnhealthy, "etcd"), phase(backends.PhaseReady, "")), func(s backends.InstanceStatus) { seen = append(seen, s.Phase) })
	require.NoError(t, err, "Creating, a Status error and Unhealthy are waited through")
	assert.Equal(t, backends.PhaseReady, st.Phase)
	assert.Equal(t, []backends.Phase{backends.PhaseCreating, backends.PhaseUnhealthy}, seen, "progress gets the statuses read")

	_, err = Ready(ctx, "i1", time.Millisecond, statuses(phase(backends.PhaseFailed, "image unavailable")), nil)
	assert.EqualError(t, err, "instance i1 failed: image unavailable")

	_, err = Ready(ctx, "i1", time.Millisecond, statuses(failing(backends.ErrNotFound)), nil)
	assert.ErrorIs(t, err, backends.ErrNotFound)

	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = Ready(cctx, "i1", time.Millisecond, statuses(phase(backends.PhaseCreating, "pulling")), nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "instance i1 not ready: pulling")
}
