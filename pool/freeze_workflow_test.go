package pool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
)

// The pool workflow with frozen spares, on Temporal's test environment: of 3 Ready members 1
// keeps running and 2 are frozen (BackendFreeze on their host queue); a claim gets the running
// one, then the pool thaws a spare (BackendThaw) and freezes the replacement once it is Ready.
func TestPoolFreezesItsSparesAndThawsOneAfterAClaim(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 3, 5, 3
	pol.FreezesSpares, pol.ThawedSpares = true, 1
	env, _, _, out := healthEnv(t)
	var freezes, thaws []string
	env.RegisterActivityWithOptions(func(_ context.Context, r instance.BackendRequest) error {
		freezes = append(freezes, r.Spec.ID)
		return nil
	}, activity.RegisterOptions{Name: "BackendFreeze"})
	env.RegisterActivityWithOptions(func(_ context.Context, r instance.BackendRequest) error {
		thaws = append(thaws, r.Spec.ID)
		return nil
	}, activity.RegisterOptions{Name: "BackendThaw"})
	ready := func(ids ...string) {
		for _, id := range ids {
			env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: id, Endpoint: "https://" + id,
				Placement: instance.HostAssignment{HostID: "h", TaskQueue: "host-h"}, Prepared: true})
		}
	}
	env.RegisterDelayedCallback(func() { ready("p-t-1") }, time.Second)
	env.RegisterDelayedCallback(func() { ready("p-t-2") }, 2*time.Second)
	env.RegisterDelayedCallback(func() { ready("p-t-3") }, 3*time.Second)
	var beforeClaim, afterClaim, final pool.Status
	var freezesBefore []string
	env.RegisterDelayedCallback(func() {
		beforeClaim = status(t, env)
		freezesBefore = append(freezesBefore, freezes...)
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() { afterClaim = status(t, env) }, 15*time.Second)
	env.RegisterDelayedCallback(func() { ready("p-t-4") }, 20*time.Second)
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 30*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	assert.Equal(t, 2, beforeClaim.Frozen, "2 of 3 frozen: %+v", beforeClaim.Members)
	assert.Equal(t, []string{"p-t-2", "p-t-3"}, slices.Sorted(slices.Values(freezesBefore)), "the spares beyond the one kept running")
	var assigned []string
	for _, s := range *out {
		if a, ok := s.arg.(pool.Assignment); ok {
			assigned = append(assigned, a.InstanceID)
		}
	}
	assert.Equal(t, []string{"p-t-1"}, assigned, "the claim got the running member")
	assert.Equal(t, []string{"p-t-2"}, thaws, "then the next spare in claim order was thawed")
	assert.Equal(t, 1, afterClaim.Frozen)
	assert.Equal(t, 2, final.Frozen, "the replacement, once Ready, is frozen: 1 running of 3 Ready")
	assert.Contains(t, freezes, "p-t-4")
}
