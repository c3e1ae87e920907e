package pool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
)

func membersIn(st pool.Status, phase pool.MemberPhase) []pool.MemberSummary {
	var out []pool.MemberSummary
	for _, m := range st.Members {
		if m.Phase == phase {
			out = append(out, m)
		}
	}
	return out
}

// A spec change rolls the members: replacements first, then the outdated members one at a
// time, and never fewer Ready members than minReadyDuringUpgrade. A change of a knob such as
// the TTL does not recycle anything.
func TestPoolRollsOutdatedMembers(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 2, 4, 2
	pol.MaxRecycling, pol.MaxSurge, pol.MinReadyDuringUpgrade = 1, 1, 2
	env, _ := poolEnv(t, pol)

	var minReadyDuringRoll = 99
	var sawDeletingWhileShort bool
	// Every second: members that are Creating become Ready, Deleting ones go away. Watch the
	// Ready count from the moment the new spec arrives.
	rolled := false
	for i := 1; i <= 40; i++ {
		env.RegisterDelayedCallback(func() {
			st := status(t, env)
			if rolled {
				minReadyDuringRoll = min(minReadyDuringRoll, st.Ready)
				if len(membersIn(st, pool.MemberDeleting)) > 0 && st.Ready < 2 {
					sawDeletingWhileShort = true
				}
			}
			// One report per tick, so that every intermediate state is observed.
			if ms := membersIn(st, pool.MemberDeleting); len(ms) > 0 {
				assert.Equal(t, pool.RecycleSpecDrift, ms[0].Reason)
				env.SignalWorkflow(instance.SignalMemberGone, instance.MemberReport{InstanceID: ms[0].ID})
				return
			}
			if ms := membersIn(st, pool.MemberCreating); len(ms) > 0 {
				env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: ms[0].ID, Endpoint: "https://x"})
			}
		}, time.Duration(i)*time.Second)
	}
	var before, knobOnly, during, final pool.Status
	env.RegisterDelayedCallback(func() {
		before = status(t, env)
		ttlOnly := pol
		ttlOnly.TTL = 3 * time.Hour
		env.SignalWorkflow(pool.SignalApply, ttlOnly)
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		knobOnly = status(t, env)
		upgraded := pol
		upgraded.KubernetesVersion = "v1.38.0"
		env.SignalWorkflow(pool.SignalApply, upgraded)
		rolled = true
	}, 10*time.Second+100*time.Millisecond)
	env.RegisterDelayedCallback(func() { during = status(t, env) }, 10*time.Second+200*time.Millisecond)
	env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 41*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	require.Equal(t, 2, before.Ready)
	assert.EqualValues(t, 0, knobOnly.Generation, "a TTL change does not make members outdated")
	assert.Equal(t, 0, knobOnly.Outdated)
	assert.EqualValues(t, 1, during.Generation)
	assert.Equal(t, 2, during.Outdated, "both members are outdated")
	assert.Equal(t, 1, during.Creating, "a replacement is created first, maxSurge (1) at a time")
	assert.Equal(t, 0, during.Deleting, "nothing is torn down before a replacement is Ready")
	assert.GreaterOrEqual(t, minReadyDuringRoll, 2, "Ready never dropped below minReadyDuringUpgrade")
	assert.False(t, sawDeletingWhileShort)
	assert.Equal(t, 2, final.Ready)
	assert.Equal(t, 0, final.Outdated)
	for _, m := range final.Members {
		assert.EqualValues(t, 1, m.Generation, "member %s is of the new spec", m.ID)
	}
}

// upgradePolicy.maxSurge bounds how many members exist beyond the warm target during a roll:
// 0 tears an outdated member down before its replacement is made, 2 makes two at once.
func TestPoolRollHonoursMaxSurge(t *testing.T) {
	for _, surge := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("maxSurge=%d", surge), func(t *testing.T) {
			pol := basePolicy()
			pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 3, 6, 3
			pol.MaxRecycling, pol.MaxSurge, pol.MinReadyDuringUpgrade = 1, surge, 3
			env, _ := poolEnv(t, pol)
			rolled := false
			maxAbove, maxCreating := 0, 0
			for i := 1; i <= 60; i++ {
				env.RegisterDelayedCallback(func() {
					st := status(t, env)
					if rolled {
						maxAbove = max(maxAbove, st.Ready+st.Creating-pol.WarmTarget)
						maxCreating = max(maxCreating, st.Creating)
					}
					if ms := membersIn(st, pool.MemberDeleting); len(ms) > 0 {
						env.SignalWorkflow(instance.SignalMemberGone, instance.MemberReport{InstanceID: ms[0].ID})
						return
					}
					if ms := membersIn(st, pool.MemberCreating); len(ms) > 0 {
						env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: ms[0].ID, Endpoint: "https://x"})
					}
				}, time.Duration(i)*time.Second)
			}
			env.RegisterDelayedCallback(func() {
				upgraded := pol
				upgraded.KubernetesVersion = "v1.38.0"
				env.SignalWorkflow(pool.SignalApply, upgraded)
				rolled = true
			}, 10*time.Second+100*time.Millisecond)
			var final pool.Status
			env.RegisterDelayedCallback(func() { final = status(t, env); env.CancelWorkflow() }, 61*time.Second)
			env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

			assert.LessOrEqual(t, maxAbove, surge, "never more than maxSurge members beyond the warm target")
			if surge > 0 {
				assert.Equal(t, surge, maxCreating, "maxSurge replacements at once")
			}
			assert.Equal(t, 3, final.Ready, "the roll completes")
			assert.Equal(t, 0, final.Outdated, "the roll completes")
		})
	}
}

// A creation that outlives creatingTimeout (plus grace) is cancelled; its Provision cleans up
// and reports failure, which counts toward backoff, and the pool creates a replacement.
func TestPoolCancelsWedgedCreation(t *testing.T) {
	pol := basePolicy()
	pol.CreatingTimeout = 2 * time.Minute
	env, _ := poolEnv(t, pol)
	var cancelled []string
	env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, "").Return(
		func(_, workflowID, _ string) error {
			cancelled = append(cancelled, workflowID)
			return nil
		})
	// What the real Provision does when cancelled: clean up, then report.
	env.RegisterDelayedCallback(func() {
		if len(cancelled) > 0 {
			env.SignalWorkflow(instance.SignalMemberFail, instance.MemberReport{InstanceID: "p-t-1", Reason: "canceled"})
		}
	}, 3*time.Minute+5*time.Second)
	var wedged, after pool.Status
	env.RegisterDelayedCallback(func() { wedged = status(t, env) }, 2*time.Minute+30*time.Second)
	env.RegisterDelayedCallback(func() { after = status(t, env); env.CancelWorkflow() }, 3*time.Minute+20*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	assert.Equal(t, 1, wedged.Creating, "not cancelled before creatingTimeout + grace")
	assert.Equal(t, []string{instance.WorkflowID("p-t-1")}, cancelled)
	assert.Equal(t, 1, after.ConsecutiveFailures)
	assert.Contains(t, after.LastFailureReason, "creatingTimeout")
	require.Len(t, after.Members, 1)
	assert.Equal(t, "p-t-2", after.Members[0].ID, "a replacement after the backoff")
}

// Deleting a pool: Ready members are torn down at once, a leased one when its lease gives it
// back, claims arriving meanwhile fail with pool_deleted; then the pool is forgotten and the
// workflow ends.
func TestPoolDeleteDrains(t *testing.T) {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions = 2, 2, 2
	env, out := poolEnv(t, pol)
	var forgotten []string
	env.RegisterActivityWithOptions(func(_ context.Context, in pool.ForgetPoolInput) (bool, error) {
		forgotten = append(forgotten, in.Name)
		return true, nil
	}, activity.RegisterOptions{Name: "ForgetUnchangedPool"})
	env.RegisterDelayedCallback(func() {
		for _, m := range status(t, env).Members {
			env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: m.ID, Endpoint: "https://x"})
		}
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-1", At: env.Now()})
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(pool.SignalDeletePool, nil) }, 4*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(pool.SignalClaim, pool.ClaimRequest{LeaseID: "lease-late", At: env.Now()})
	}, 4500*time.Millisecond)
	var draining pool.Status
	env.RegisterDelayedCallback(func() {
		draining = status(t, env)
		for _, m := range draining.Members {
			if m.Phase == pool.MemberDeleting {
				env.SignalWorkflow(instance.SignalMemberGone, instance.MemberReport{InstanceID: m.ID})
			}
		}
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := status(t, env)
		if assert.Len(t, st.Members, 1) {
			env.SignalWorkflow(pool.SignalRelease, pool.ReleaseRequest{LeaseID: "lease-1", InstanceID: st.Members[0].ID})
		}
	}, 6*time.Second)
	env.RegisterDelayedCallback(func() {
		st := status(t, env)
		if assert.Len(t, st.Members, 1) {
			env.SignalWorkflow(instance.SignalMemberGone, instance.MemberReport{InstanceID: st.Members[0].ID})
		}
	}, 7*time.Second)
	env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "the drained pool's workflow ends")
	assert.Equal(t, []string{"p"}, forgotten)
	assert.Equal(t, api.PoolDraining, draining.Phase)
	assert.Equal(t, 1, draining.Leased, "the leased member stays until its lease ends")
	assert.Equal(t, 1, draining.Deleting, "the Ready member is torn down at once")
	var refused []string
	for _, s := range *out {
		if f, ok := s.arg.(pool.ClaimFailure); ok && s.signal == pool.SignalClaimFailed {
			assert.Equal(t, "pool_deleted", f.Reason)
			refused = append(refused, s.to)
		}
	}
	assert.Equal(t, []string{"lease-late"}, refused)
}
