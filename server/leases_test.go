package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// startingClient answers ExecuteWorkflow with scripted errors (nil = started); any other call
// panics through the nil embedded interface.
type startingClient struct {
	client.Client
	answers []error
	calls   int
	ids     []string
}

func (c *startingClient) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	c.calls++
	c.ids = append(c.ids, opts.ID)
	if _, ok := ctx.Deadline(); !ok {
		panic("a start attempt without a deadline")
	}
	err := c.answers[0]
	if len(c.answers) > 1 {
		c.answers = c.answers[1:]
	}
	return nil, err
}

func TestStartLeaseSurely(t *testing.T) {
	lost := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	unavailable := serviceerror.NewUnavailable("connection refused")
	started := serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")
	for _, tc := range []struct {
		name    string
		answers []error
		calls   int
		runs    bool
	}{
		{"started at once", []error{nil}, 1, true},
		{"answer lost, the retry finds it started", []error{lost, started}, 2, true},
		{"server down, then up", []error{unavailable, unavailable, nil}, 3, true},
		{"refused: not retried", []error{serviceerror.NewInvalidArgument("bad input"), nil}, 1, false},
		{"quota of the namespace: not retried", []error{serviceerror.NewResourceExhausted(0, "busy"), nil}, 1, false},
		{"never reachable: gives up after the attempts", []error{unavailable}, startLeaseAttempts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &startingClient{answers: tc.answers}
			s := &Server{Temporal: c, TaskQueue: "kobe"}
			// The HTTP request's context is gone already: the attempts must not care.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := s.startLeaseSurely(ctx, lease.Input{LeaseID: "lease-1", Pool: "ci"})
			if tc.runs {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.False(t, errors.As(err, new(*serviceerror.WorkflowExecutionAlreadyStarted)))
			}
			assert.Equal(t, tc.calls, c.calls)
			for _, id := range c.ids {
				assert.Equal(t, "lease-1", id, "every attempt uses the lease's workflow id")
			}
		})
	}
}

// queryFailing is a Temporal client whose queries fail, as while the server restarts.
type queryFailing struct{ client.Client }

func (queryFailing) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, serviceerror.NewUnavailable("connection refused")
}

func TestPoolViewFallsBackToTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	for i, phase := range []api.InstancePhase{"Ready", "Ready", "Ready", "Creating", "Deleting", "Quarantined"} {
		require.NoError(t, st.UpsertInstance(ctx, store.Instance{ID: fmt.Sprintf("ci-%d", i), Pool: "ci", Backend: "local", Phase: phase}))
	}
	require.NoError(t, st.UpsertInstance(ctx, store.Instance{ID: "other-1", Pool: "other", Backend: "local", Phase: "Ready"}))
	for i, phase := range []api.LeasePhase{"Bound", "Pending", "Pending", "Released"} {
		require.NoError(t, st.UpsertLease(ctx, store.Lease{ID: fmt.Sprintf("lease-%d", i), Pool: "ci", Principal: "p", Phase: phase, TTL: time.Hour}))
	}
	s := &Server{Temporal: queryFailing{}, Store: st}
	v := s.poolView(ctx, store.Pool{Name: "ci", Backend: "local"}, access.Role{})
	assert.Equal(t, api.PoolUnknown, v.Phase, "the live status is unknown")
	assert.Equal(t, 2, v.Ready, "3 Ready instances, 1 of them leased")
	assert.Equal(t, 1, v.Leased)
	assert.Equal(t, 1, v.Creating)
	assert.Equal(t, 1, v.Recycling)
	assert.Equal(t, 1, v.Quarantined)
	assert.Equal(t, 2, v.QueueDepth)
}

// A manifest with spec.size and spec.scaling (accepted, as upstream does) says in the pool's
// view that its size is not used; a fixed pool's view has no such note.
func TestPoolViewSaysAnUnusedSize(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://:memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	s := &Server{Temporal: queryFailing{}, Store: st}
	spec := func(extra string) json.RawMessage {
		return json.RawMessage(`{"apiVersion":"kobe.kunobi.ninja/v1alpha1","kind":"ClusterPool","metadata":{"name":"ci"},
			"spec":{"backend":{"type":"local"},"cluster":{"version":"v1.37.2"}` + extra + `}}`)
	}
	v := s.poolView(ctx, store.Pool{Name: "ci", Backend: "local", Generation: 1, Spec: spec(`,"size":3,"scaling":{"minReady":1}`)}, access.Role{})
	require.NotNil(t, v.Policy.UnusedSize, "%+v", v.Policy)
	assert.Equal(t, 3, *v.Policy.UnusedSize)
	assert.Equal(t, "autoscale", v.Policy.Mode)
	assert.Equal(t, 1, v.Policy.WarmTarget, "the warm target is scaling.minReady")

	// Applied again (the store's generation grows with each apply; the policy is read by it).
	v = s.poolView(ctx, store.Pool{Name: "ci", Backend: "local", Generation: 2, Spec: spec(`,"size":3`)}, access.Role{})
	assert.Nil(t, v.Policy.UnusedSize)
	assert.Equal(t, 3, v.Policy.WarmTarget)
}
