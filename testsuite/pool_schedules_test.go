package testsuite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite"
)

// poolSchedules lists, through the Temporal client, the ids of the schedules of pool name.
func poolSchedules(t *testing.T, ctx context.Context, c client.Client, name string) []string {
	t.Helper()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	require.NoError(t, err)
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if strings.HasPrefix(e.ID, pool.ScheduleIDPrefix(name)) {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func schedulesManifest(t *testing.T, sleep, warm string) *poolspec.ClusterPool {
	t.Helper()
	m, err := poolspec.Parse([]byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: office}
spec:
  backend: {type: local}
  cluster: {version: v1.37.2}
  scaling:
    minReady: 0
    maxClusters: 2
` + warm + sleep))
	require.NoError(t, err)
	return m
}

// schedulesEnv is a real (embedded) Temporal server with a kobe host worker on queue, its store,
// the host's state dir and a context bounded by timeout.
func schedulesEnv(t *testing.T, queue string, timeout time.Duration) (client.Client, store.Store, string, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("a real Temporal server; skipped with -short")
	}
	tmp := testsuite.StartTemporal(t)
	st := testsuite.NewStore(t, "sqlite")
	stateDir := t.TempDir()
	testsuite.StartHostWorker(t, tmp.Client, queue, st, stateDir)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return tmp.Client, st, stateDir, ctx
}

// deletePool deletes a pool as the API does and waits for its drained workflow to end: its
// schedules are gone then.
func deletePool(t *testing.T, ctx context.Context, c client.Client, st store.Store, name string) {
	t.Helper()
	p, err := st.GetPool(ctx, name)
	require.NoError(t, err)
	require.NoError(t, c.SignalWorkflow(ctx, pool.WorkflowID(name), "", pool.SignalDeletePool, pool.Deletion{Generation: p.Generation}))
	require.NoError(t, c.GetWorkflow(ctx, pool.WorkflowID(name), "").Get(ctx, nil), "the drained pool ends")
	assert.Empty(t, poolSchedules(t, ctx, c, name), "its schedules are deleted")
}

// A pool's schedules on a real (embedded) Temporal server, through the real apply path
// (server.EnsurePool → the pool workflow → SyncPoolSchedules): created with the pool, listed
// through the Temporal client with their zone, cron and overlap policy, updated when the spec
// changes, deleted when a field is removed and when the pool is deleted. A warm window open at
// apply time is opened at once (the schedule is backfilled over the window's length).
func TestPoolSchedulesFollowThePool(t *testing.T) {
	c, st, _, ctx := schedulesEnv(t, "schedules", 3*time.Minute)

	// A window that opened an hour ago and lasts three: open now whatever the time of day.
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	opened := time.Now().In(berlin).Add(-time.Hour).Truncate(time.Minute)
	warm := fmt.Sprintf("    schedule:\n    - {cron: \"%d %d * * %d\", duration: 3h, minReady: 0, timezone: Europe/Berlin}\n",
		opened.Minute(), opened.Hour(), int(opened.Weekday()))
	sleep := `  sleep:
    schedule: "0 20 * * 1-5"
    wakeSchedule: "0 8 * * 1-5"
    timezone: Europe/Berlin
    exclude: [{owner: "ci-*"}]
`
	require.NoError(t, pool.Apply(ctx, c, st, schedulesManifest(t, sleep, warm), pool.ApplyOptions{TaskQueue: "schedules"}))
	prefix := pool.ScheduleIDPrefix("office")
	all := []string{prefix + "sleep", prefix + "wake", prefix + "warm-0"}
	require.Eventually(t, func() bool { return slices.Equal(poolSchedules(t, ctx, c, "office"), all) }, time.Minute, 200*time.Millisecond)

	desc, err := c.ScheduleClient().GetHandle(ctx, prefix+"sleep").Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, "Europe/Berlin", desc.Schedule.Spec.TimeZoneName)
	assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, desc.Schedule.Policy.Overlap)
	action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
	require.True(t, ok)
	assert.Equal(t, pool.ScheduledSleepWorkflowName, action.Workflow)
	assert.Contains(t, desc.Schedule.State.Note, `puts the Bound leases to sleep`)
	assert.Contains(t, desc.Schedule.State.Note, `"0 20 * * 1-5" in Europe/Berlin`)
	// Temporal's own calendar: the next sleeps are at 20:00 Berlin time on weekdays.
	require.NotEmpty(t, desc.Info.NextActionTimes)
	for _, at := range desc.Info.NextActionTimes {
		l := at.In(berlin)
		assert.Equal(t, 20, l.Hour(), "%s", l)
		assert.NotContains(t, []time.Weekday{time.Saturday, time.Sunday}, l.Weekday(), "%s", l)
	}

	// The window opened at apply: the backfill ran WarmWindow, which told the pool.
	require.Eventually(t, func() bool {
		var s pool.Status
		v, err := c.QueryWorkflow(ctx, pool.WorkflowID("office"), "", pool.QueryPoolStatus)
		if err != nil || v.Get(&s) != nil || s.WarmWindow == nil {
			return false
		}
		return s.WarmWindow.Until.Equal(opened.Add(3 * time.Hour))
	}, time.Minute, 200*time.Millisecond, "the open window is known to the pool, until 3h after it opened")

	// The sleep schedule's action runs on a trigger: no Bound lease, nothing to do.
	var none lease.ScheduledSleepResult
	require.NoError(t, c.ScheduleClient().GetHandle(ctx, prefix+"sleep").Trigger(ctx, client.ScheduleTriggerOptions{}))
	emptyRun := lastAction(t, ctx, c, prefix+"sleep", &none)
	assert.Empty(t, none.Changed)
	warmRun := lastAction(t, ctx, c, prefix+"warm-0", nil)

	// Update: the wake schedule removed, the sleep moved; the window goes too.
	sleep = `  sleep:
    schedule: "30 19 * * 1-5"
    timezone: Europe/Berlin
`
	require.NoError(t, pool.Apply(ctx, c, st, schedulesManifest(t, sleep, ""), pool.ApplyOptions{TaskQueue: "schedules"}))
	require.Eventually(t, func() bool {
		return slices.Equal(poolSchedules(t, ctx, c, "office"), []string{prefix + "sleep"})
	}, time.Minute, 200*time.Millisecond)
	require.Eventually(t, func() bool {
		d, err := c.ScheduleClient().GetHandle(ctx, prefix+"sleep").Describe(ctx)
		return err == nil && strings.Contains(d.Schedule.State.Note, `"30 19 * * 1-5"`) &&
			len(d.Info.NextActionTimes) > 0 && d.Info.NextActionTimes[0].In(berlin).Hour() == 19
	}, time.Minute, 200*time.Millisecond)

	// Delete: the drained pool deletes its schedules before it ends.
	deletePool(t, ctx, c, st, "office")
	recordOnce(t, ctx, c, map[string]string{"pool-schedules-" + recordVersion + ".json": pool.WorkflowID("office"),
		"warm-window-" + recordVersion + ".json": warmRun, "scheduled-sleep-empty-" + recordVersion + ".json": emptyRun})
}

// recordOnce writes the histories of the given workflows (file → workflow id) with
// KOBE_RECORD_HISTORIES=1, never replacing one recorded before.
func recordOnce(t *testing.T, ctx context.Context, c client.Client, files map[string]string) {
	if os.Getenv("KOBE_RECORD_HISTORIES") != "1" {
		return
	}
	dir := filepath.Join("..", "worker", "testdata", "histories")
	for file, id := range files {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			continue
		}
		writeHistory(t, ctx, c, id, filepath.Join(dir, file))
	}
}

// lastAction waits for the newest run a schedule started to complete, decodes its result into
// out (if not nil) and returns its workflow id.
func lastAction(t *testing.T, ctx context.Context, c client.Client, scheduleID string, out any) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		d, err := c.ScheduleClient().GetHandle(ctx, scheduleID).Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		last := d.Info.RecentActions[len(d.Info.RecentActions)-1].StartWorkflowResult
		if err := c.GetWorkflow(ctx, last.WorkflowID, last.FirstExecutionRunID).Get(ctx, out); err != nil {
			return false
		}
		id = last.WorkflowID
		return true
	}, 2*time.Minute, 200*time.Millisecond)
	return id
}

// The real run: a pool of local clusters with a sleep and a wake schedule (crons that do not
// fire during the test; the schedules are triggered), two Bound leases, one of them excluded
// (owner ci-*). The sleep schedule's run puts the other to sleep — its processes are gone —
// and leaves the excluded one awake; the wake schedule's run wakes it. A person's sleep sent at
// the same moment as the schedule's does not sleep the instance twice: the lease runs one sleep
// or wake at a time, each an instance workflow of its own id, so there is one instance.Sleep.
func TestScheduledSleepAndWakeOfAPool(t *testing.T) {
	c, st, stateDir, ctx := schedulesEnv(t, "sleepsched", 6*time.Minute)
	m, err := poolspec.Parse([]byte(`apiVersion: kobe.kunobi.ninja/v1alpha1
kind: ClusterPool
metadata: {name: nightly}
spec:
  ttl: 20m
  backend: {type: local, local: {components: [apiserver]}}
  cluster: {version: v1.37.2}
  scaling: {minReady: 2, maxClusters: 3, resumeTimeout: 2m}
  sleep:
    schedule: "0 3 1 1 *"
    wakeSchedule: "0 4 1 1 *"
    timezone: Europe/Berlin
    exclude: [{owner: "ci-*"}]
`))
	require.NoError(t, err)
	require.NoError(t, pool.Apply(ctx, c, st, m, pool.ApplyOptions{TaskQueue: "sleepsched"}))
	prefix := pool.ScheduleIDPrefix("nightly")
	require.Eventually(t, func() bool { return len(poolSchedules(t, ctx, c, "nightly")) == 2 }, time.Minute, 200*time.Millisecond)
	require.Eventually(t, func() bool { return poolStatus(t, c, "nightly").Ready == 2 }, 4*time.Minute, 200*time.Millisecond)

	views := map[string]lease.View{}
	for id, owner := range map[string]string{"lease-alice": "alice", "lease-ci": "ci-bot"} {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "sleepsched"},
			lease.WorkflowName, lease.Input{LeaseID: id, Pool: "nightly", Principal: owner,
				LeaseTerms: poolspec.LeaseTerms{TTL: 20 * time.Minute, MaxTTL: time.Hour}})
		require.NoError(t, err)
	}
	for _, id := range []string{"lease-alice", "lease-ci"} {
		require.Eventually(t, func() bool {
			l, err := st.GetLease(ctx, id)
			return err == nil && l.Phase == api.LeaseBound
		}, 2*time.Minute, 50*time.Millisecond)
		views[id] = leaseView(t, c, id)
	}
	aliceDir := filepath.Join(stateDir, "local", "instances", views["lease-alice"].InstanceID)
	ciDir := filepath.Join(stateDir, "local", "instances", views["lease-ci"].InstanceID)
	pids, rss := processesUnder(t, aliceDir)
	require.NotEmpty(t, pids)

	// The schedule's sleep and a person's at once.
	require.NoError(t, c.ScheduleClient().GetHandle(ctx, prefix+"sleep").Trigger(ctx, client.ScheduleTriggerOptions{}))
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "lease-alice", UpdateName: lease.UpdateSleep,
		Args: []any{lease.SleepRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	var slept lease.ScheduledSleepResult
	sleepRun := lastAction(t, ctx, c, prefix+"sleep", &slept)
	assert.Equal(t, []string{"lease-alice"}, slept.Changed)
	assert.Equal(t, []string{"lease-ci"}, slept.Excluded)
	alice := leaseView(t, c, "lease-alice")
	assert.True(t, alice.Sleeping)
	assert.Equal(t, 1, alice.Sleeps, "one sleep of the instance, not two")
	_, err = c.DescribeWorkflowExecution(ctx, instance.SleepWorkflowID(alice.InstanceID, 2), "")
	assert.Error(t, err, "no second instance.Sleep")
	after, _ := processesUnder(t, aliceDir)
	assert.Empty(t, after, "the slept instance's processes are gone (RSS %d MiB before)", rss>>20)
	assert.False(t, leaseView(t, c, "lease-ci").Sleeping, "the excluded lease stays awake")
	stillUp, _ := processesUnder(t, ciDir)
	assert.NotEmpty(t, stillUp)

	require.NoError(t, c.ScheduleClient().GetHandle(ctx, prefix+"wake").Trigger(ctx, client.ScheduleTriggerOptions{}))
	var woken lease.ScheduledSleepResult
	wakeRun := lastAction(t, ctx, c, prefix+"wake", &woken)
	assert.Equal(t, []string{"lease-alice"}, woken.Changed)
	assert.False(t, leaseView(t, c, "lease-alice").Sleeping)
	back, _ := processesUnder(t, aliceDir)
	assert.NotEmpty(t, back, "woken: its processes run again")

	events, err := st.ListEvents(ctx, store.EventFilter{Pool: "nightly"})
	require.NoError(t, err)
	var audited []string
	for _, e := range events {
		if strings.HasPrefix(e.Actor, "kobe:schedule:") {
			audited = append(audited, e.Action+" "+e.Target+" "+e.Result)
		}
	}
	assert.ElementsMatch(t, []string{"lease.sleep lease-alice ok", "lease.wake lease-alice ok"}, audited)

	for _, id := range []string{"lease-alice", "lease-ci"} {
		require.NoError(t, c.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
		require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, nil))
	}
	deletePool(t, ctx, c, st, "nightly")
	recordOnce(t, ctx, c, map[string]string{"scheduled-sleep-" + recordVersion + ".json": sleepRun, "scheduled-wake-" + recordVersion + ".json": wakeRun})
}

// Temporal's calendar of a pool's schedule across the DST changes of Europe/Berlin, on the
// real server: the schedule's spec as Temporal holds it, copied with a start a week before
// each change (Temporal lists future action times from now, and the next changes are on
// 2027-03-28 and 2027-10-31). A 20:00 schedule stays at 20:00 wall-clock time: 19:00 UTC in
// winter, 18:00 UTC in summer. A time in the hour the clocks skip does not fire that day; one in
// the hour they repeat fires once, at its second occurrence.
func TestPoolScheduleCalendarAcrossDST(t *testing.T) {
	c, st, _, ctx := schedulesEnv(t, "dst", 2*time.Minute)
	sleep := `  sleep:
    schedule: "0 20 * * *"
    wakeSchedule: "30 2 * * *"
    timezone: Europe/Berlin
`
	require.NoError(t, pool.Apply(ctx, c, st, schedulesManifest(t, sleep, ""), pool.ApplyOptions{TaskQueue: "dst"}))
	prefix := pool.ScheduleIDPrefix("office")
	require.Eventually(t, func() bool { return len(poolSchedules(t, ctx, c, "office")) == 2 }, time.Minute, 200*time.Millisecond)

	// futureTimes copies the pool's schedule id with its spec starting at from, and returns
	// Temporal's next action times of the copy.
	futureTimes := func(id string, from time.Time) []time.Time {
		d, err := c.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
		require.NoError(t, err)
		spec := *d.Schedule.Spec
		spec.StartAt = from
		copyID := fmt.Sprintf("%s-from-%s", id, from.Format("20060102"))
		h, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: copyID, Spec: spec, Paused: true,
			Action: &client.ScheduleWorkflowAction{ID: copyID, Workflow: "none", TaskQueue: "none"}})
		require.NoError(t, err)
		defer func() { _ = h.Delete(context.Background()) }()
		cd, err := h.Describe(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, cd.Info.NextActionTimes)
		return cd.Info.NextActionTimes
	}
	utc := func(ts []time.Time) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.UTC().Format("01-02 15:04"))
		}
		return out
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)

	spring := futureTimes(prefix+"sleep", time.Date(2027, 3, 25, 0, 0, 0, 0, berlin))
	assert.Equal(t, []string{"03-25 19:00", "03-26 19:00", "03-27 19:00", "03-28 18:00", "03-29 18:00"}, utc(spring)[:5],
		"20:00 CET is 19:00 UTC; from the 28th 20:00 CEST is 18:00 UTC")
	autumn := futureTimes(prefix+"sleep", time.Date(2027, 10, 29, 0, 0, 0, 0, berlin))
	assert.Equal(t, []string{"10-29 18:00", "10-30 18:00", "10-31 19:00", "11-01 19:00"}, utc(autumn)[:4])

	gap := futureTimes(prefix+"wake", time.Date(2027, 3, 27, 0, 0, 0, 0, berlin))
	assert.Equal(t, []string{"03-27 01:30", "03-29 00:30"}, utc(gap)[:2], "02:30 does not exist in Berlin on 2027-03-28")
	repeat := futureTimes(prefix+"wake", time.Date(2027, 10, 30, 0, 0, 0, 0, berlin))
	// Measured here: Temporal fires once in the repeated hour, at its second 02:30 (CET).
	assert.Equal(t, []string{"10-30 00:30", "10-31 01:30", "11-01 01:30"}, utc(repeat)[:3], "02:30 happens twice in Berlin on 2027-10-31; Temporal fires at the second")
}
