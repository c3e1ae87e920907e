package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// ApplyOptions says where a pool's workflow runs.
type ApplyOptions struct {
	TaskQueue string
	// ContinueAsNewAfter is the history length past which a new run continues as new (0: the
	// workflow's default). Tests set it low, so that a soak crosses many continues-as-new.
	ContinueAsNewAfter int
	// ManagedBy names the Kubernetes resource applying the pool ("ClusterPool/dev"); empty for
	// an apply through the API.
	ManagedBy string
}

// Apply records a validated pool in the store and makes sure its entity workflow runs:
// started if absent, told the new policy if it already runs (e.g. after a restart of kobe dev).
func Apply(ctx context.Context, c client.Client, s store.Store, manifest *poolspec.ClusterPool, opts ApplyOptions) error {
	pol, err := manifest.Validate()
	if err != nil {
		return err
	}
	spec, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	// A pool created anew owns no schedules yet: any under its name were left by an earlier pool
	// of that name (deleted by a kobe that did not delete them) and would act on this one. No
	// workflow owns them while the row is absent; they go before the row is written.
	if _, err := s.GetPool(ctx, pol.Name); errors.Is(err, store.ErrNotFound) {
		if err := DeleteSchedules(ctx, c, pol.Name); err != nil {
			return fmt.Errorf("pool %s: schedules left by an earlier pool: %w", pol.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("pool %s: %w", pol.Name, err)
	}
	if err := s.UpsertPool(ctx, store.Pool{Name: pol.Name, Backend: pol.Backend, Spec: spec, ManagedBy: opts.ManagedBy}); err != nil {
		return fmt.Errorf("pool %s: %w", pol.Name, err)
	}
	// One call, so that there is no moment between finding the pool's run and signalling it in
	// which a drained run could end: a running pool learns the (possibly changed) policy and
	// keeps its members; otherwise a new run starts with the apply in its history. A drained
	// run that is ending reads the apply before it ends and lives on (pool/workflows.go).
	_, err = c.SignalWithStartWorkflow(ctx, WorkflowID(pol.Name), SignalApply, pol,
		client.StartWorkflowOptions{
			ID:                       WorkflowID(pol.Name),
			TaskQueue:                opts.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, WorkflowName, Snapshot{Policy: pol, ContinueAsNewAfter: opts.ContinueAsNewAfter})
	if err != nil {
		return fmt.Errorf("applying pool %s: %w", pol.Name, err)
	}
	return nil
}
