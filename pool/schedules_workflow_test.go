package pool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
)

func nightWindowPolicy() poolspec.Policy {
	pol := basePolicy()
	pol.WarmTarget, pol.MaxClusters, pol.MaxConcurrentProvisions, pol.MinReadyDuringUpgrade = 2, 4, 2, 2
	pol.WarmWindows = []poolspec.WarmWindowPolicy{{Cron: "0 20 * * *", Duration: 12 * time.Hour, MinReady: 0, Timezone: "Europe/Berlin"}}
	return pol
}

// The pool workflow in the SDK's time-skipping test environment across the DST changes of
// Europe/Berlin, with a night window (20:00 for 12h, minReady 0 instead of 2). The SDK's test
// environment has no Temporal Schedules (no schedule client), so the test delivers
// SignalWarmWindow at the times the window's schedule fires, 20:00 Berlin time each day — that
// Temporal fires it then is TestPoolScheduleCalendarAcrossDST, on the real server. What is
// under test here is the pool's side: the warm target is 0 from 20:00 and 2 again at 08:00
// wall-clock time, before and after the clocks change (the night of the change lasts 11 or 13
// hours), and the pool makes its schedules through SyncPoolSchedules.
func TestPoolWarmWindowAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		first time.Time // the first evening; the clocks change in the second night
	}{
		{"spring", time.Date(2026, 3, 27, 20, 0, 0, 0, berlin)},
		{"autumn", time.Date(2026, 10, 23, 20, 0, 0, 0, berlin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := nightWindowPolicy()
			env, _ := poolEnv(t, pol)
			env.SetStartTime(tc.first.Add(-2 * time.Hour))
			var synced [][]pool.PoolSchedule
			env.RegisterActivityWithOptions(func(_ context.Context, in pool.SyncSchedules) error {
				synced = append(synced, in.Want)
				return nil
			}, activity.RegisterOptions{Name: "SyncPoolSchedules"})
			// ready reports the creations and teardowns under way as done.
			ready := func() {
				for _, m := range status(t, env).Members {
					switch m.Phase {
					case pool.MemberCreating:
						env.SignalWorkflow(instance.SignalMemberReady, instance.MemberReport{InstanceID: m.ID, Endpoint: "https://" + m.ID})
					case pool.MemberDeleting: // the mocked Teardown does not report
						env.SignalWorkflow(instance.SignalMemberGone, instance.MemberReport{InstanceID: m.ID})
					}
				}
			}
			start := env.Now()
			at := func(when time.Time, f func()) { env.RegisterDelayedCallback(f, when.Sub(start)) }
			at(start.Add(time.Minute), ready)
			type observation struct {
				when   string
				target int
				ready  int
			}
			var seen []observation
			observe := func(when time.Time) {
				at(when, func() {
					st := status(t, env)
					seen = append(seen, observation{when.In(berlin).Format("01-02 15:04 MST"), st.WarmTarget, st.Ready})
				})
			}
			for day := range 3 {
				evening := time.Date(tc.first.Year(), tc.first.Month(), tc.first.Day()+day, 20, 0, 0, 0, berlin)
				morning := time.Date(tc.first.Year(), tc.first.Month(), tc.first.Day()+day+1, 8, 0, 0, 0, berlin)
				observe(evening.Add(-time.Minute))
				at(evening, func() {
					env.SignalWorkflow(pool.SignalWarmWindow, pool.WarmWindowStart{
						WarmWindowInput: pool.WarmWindowInput{Pool: pol.Name, Index: 0, Window: pol.WarmWindows[0]}, Start: evening})
				})
				at(evening.Add(10*time.Minute), ready) // the scale-down's teardowns
				observe(morning.Add(-time.Minute))
				at(morning.Add(time.Minute), ready)
				observe(morning.Add(2 * time.Minute))
			}
			end := time.Date(tc.first.Year(), tc.first.Month(), tc.first.Day()+3, 9, 0, 0, 0, berlin)
			at(end, env.CancelWorkflow)
			env.ExecuteWorkflow(pool.WorkflowName, pool.Snapshot{Policy: pol, Incarnation: "t"})

			var want []observation
			for day := range 3 {
				evening := time.Date(tc.first.Year(), tc.first.Month(), tc.first.Day()+day, 19, 59, 0, 0, berlin)
				morning := time.Date(tc.first.Year(), tc.first.Month(), tc.first.Day()+day+1, 7, 59, 0, 0, berlin)
				want = append(want,
					observation{evening.Format("01-02 15:04 MST"), 2, 2},
					// Scaled down to the window's 0 after scaleDownAfter (5m).
					observation{morning.Format("01-02 15:04 MST"), 0, 0},
					observation{morning.Add(3 * time.Minute).Format("01-02 15:04 MST"), 2, 2})
			}
			assert.Equal(t, want, seen)
			require.NotEmpty(t, synced, "the pool made its schedules")
			assert.Equal(t, []pool.PoolSchedule{{ID: "kobe-pool-p-warm-0", Kind: pool.ScheduleWarm, Cron: "0 20 * * *", Timezone: "Europe/Berlin",
				Window: &pool.WarmWindowInput{Pool: "p", Index: 0, Window: pol.WarmWindows[0]}}}, synced[0])
			assert.Len(t, synced, 1, "synced once: the policy did not change")
		})
	}
}

// The window schedule's action in the test environment: it tells the pool the window started
// at the time the schedule fired for (TemporalScheduledStartTime), not when it ran.
func TestWarmWindowSignalsTheScheduledStart(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(pool.WarmWindow, workflow.RegisterOptions{Name: pool.WarmWindowWorkflowName})
	fired := time.Date(2026, 3, 28, 19, 0, 0, 0, time.UTC)
	env.SetStartTime(fired.Add(40 * time.Minute)) // caught up late
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime").ValueSet(fired))))
	var got pool.WarmWindowStart
	var to string
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", pool.SignalWarmWindow, mock.Anything).Return(
		func(_, id, _, _ string, arg any) error {
			to, got = id, arg.(pool.WarmWindowStart)
			return nil
		})
	in := pool.WarmWindowInput{Pool: "p", Index: 0, Window: nightWindowPolicy().WarmWindows[0]}
	env.ExecuteWorkflow(pool.WarmWindowWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, pool.WorkflowID("p"), to)
	assert.True(t, got.Start.Equal(fired), "start %s", got.Start)
	assert.Equal(t, in, got.WarmWindowInput)
}

// The decision alone (WarmTargetAt): which target holds when, for windows that started at
// given times; a start the spec no longer has (changed since the schedule was made) is ignored.
func TestWarmTargetAtIsThePoolsDecision(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	pol := nightWindowPolicy()
	pol.WarmWindows = append(pol.WarmWindows, poolspec.WarmWindowPolicy{Cron: "0 9 * * 6", Duration: 2 * time.Hour, MinReady: 4, Timezone: "Europe/Berlin"})
	start := func(i int, at time.Time) pool.WarmWindowStart {
		return pool.WarmWindowStart{WarmWindowInput: pool.WarmWindowInput{Pool: "p", Index: i, Window: pol.WarmWindows[i]}, Start: at}
	}
	fri := time.Date(2026, 3, 27, 20, 0, 0, 0, berlin)
	sat := time.Date(2026, 3, 28, 9, 0, 0, 0, berlin)
	starts := []pool.WarmWindowStart{start(0, fri), start(1, sat)}
	for _, tc := range []struct {
		at   time.Time
		want int
	}{
		{fri.Add(-time.Second), 2},
		{fri, 0},
		{sat.Add(-61 * time.Minute), 0},
		{sat.Add(-time.Hour), 2}, // 08:00: the night is over
		{sat, 4},
		{sat.Add(2*time.Hour - time.Second), 4},
		{sat.Add(2 * time.Hour), 2},
	} {
		assert.Equal(t, tc.want, pool.WarmTargetAt(pol, starts, tc.at), "at %s", tc.at.In(berlin))
	}
	stale := start(0, fri)
	stale.Window.MinReady = 1 // the schedule was made from another spec
	assert.Equal(t, 2, pool.WarmTargetAt(pol, []pool.WarmWindowStart{stale}, fri.Add(time.Hour)))
	assert.Equal(t, 2, pool.WarmTargetAt(pol, []pool.WarmWindowStart{start(0, fri.Add(-13*time.Hour))}, fri), "a start already over changes nothing")
}

// The schedules a policy wants, by id; none while the pool drains.
func TestWantedSchedules(t *testing.T) {
	pol := nightWindowPolicy()
	pol.Sleep = &poolspec.SleepPolicy{Schedule: "0 20 * * 1-5", Timezone: "Europe/Berlin", Exclude: []poolspec.SleepExclusion{{Owner: "ci-*"}}}
	pol.ResumeTimeout = 3 * time.Minute
	got := pool.WantedSchedules(pol, false)
	var ids []string
	for _, s := range got {
		ids = append(ids, fmt.Sprintf("%s %s %q", s.ID, s.Kind, s.Cron))
	}
	assert.Equal(t, []string{`kobe-pool-p-sleep sleep "0 20 * * 1-5"`, `kobe-pool-p-warm-0 warm "0 20 * * *"`}, ids)
	assert.Equal(t, &pool.ScheduledSleepInput{Pool: "p", Exclude: pol.Sleep.Exclude, ResumeTimeout: 3 * time.Minute}, got[0].Sleep)
	assert.Empty(t, pool.WantedSchedules(pol, true))
}
