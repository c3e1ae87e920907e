package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/kunobi-ninja/kobe/pool"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pools"
)

// EnsurePool records a validated pool in the store and makes sure its entity workflow runs:
// started if absent, told the new policy if it already runs (e.g. after a restart of kobe dev).
func EnsurePool(ctx context.Context, c client.Client, s store.Store, taskQueue string, manifest *pools.ClusterPool) error {
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
		if err := pool.DeleteSchedules(ctx, c, pol.Name); err != nil {
			return fmt.Errorf("pool %s: schedules left by an earlier pool: %w", pol.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("pool %s: %w", pol.Name, err)
	}
	if err := s.UpsertPool(ctx, store.Pool{Name: pol.Name, Backend: pol.Backend, Spec: spec}); err != nil {
		return fmt.Errorf("pool %s: %w", pol.Name, err)
	}
	// One call, so that there is no moment between finding the pool's run and signalling it in
	// which a drained run could end: a running pool learns the (possibly changed) policy and
	// keeps its members; otherwise a new run starts with the apply in its history. A drained
	// run that is ending reads the apply before it ends and lives on (pool/workflows.go).
	_, err = c.SignalWithStartWorkflow(ctx, pool.WorkflowID(pol.Name), pool.SignalApply, pol,
		client.StartWorkflowOptions{
			ID:                       pool.WorkflowID(pol.Name),
			TaskQueue:                taskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, pool.WorkflowName, pool.Snapshot{Policy: pol, ContinueAsNewAfter: ContinueAsNewAfterForTests()})
	if err != nil {
		return fmt.Errorf("applying pool %s: %w", pol.Name, err)
	}
	return nil
}

// ContinueAsNewAfterForTests is $KOBE_TEST_CONTINUE_AS_NEW_AFTER: a history length past which
// new pool and lease workflows continue as new, far below the default, so that a soak crosses
// many continues-as-new. Zero (the workflows' defaults) when unset or not a positive number.
func ContinueAsNewAfterForTests() int {
	n, err := strconv.Atoi(os.Getenv("KOBE_TEST_CONTINUE_AS_NEW_AFTER"))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// DefaultDevPool is the pool `kobe dev` starts unless --no-default-pool: two warm local clusters.
func DefaultDevPool(kubernetesVersion string) *pools.ClusterPool {
	size := 2
	return &pools.ClusterPool{
		APIVersion: pools.APIVersion,
		Kind:       pools.Kind,
		Metadata:   pools.Metadata{Name: "dev"},
		Spec: pools.Spec{
			Size:    &size,
			TTL:     "1h",
			Backend: pools.Backend{Type: "local"},
			Cluster: pools.Cluster{Version: kubernetesVersion},
		},
	}
}
