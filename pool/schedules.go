package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/internal/jsonduration"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// A pool's Temporal Schedules (issue 18; version pool-schedules): spec.sleep.schedule and
// wakeSchedule (kobe-pool-<pool>-sleep, -wake: their action is ScheduledSleep, in lease/) and
// each window of spec.scaling.schedule (kobe-pool-<pool>-warm-<i>: its action is WarmWindow,
// which tells the pool that the window started). The pool workflow owns them: after each apply
// or delete it compares the schedules it wants (WantedSchedules, a pure function of its policy)
// with those it last made, and when they differ runs SyncPoolSchedules, which makes Temporal's
// schedules of the pool exactly those. It is an activity of the pool's own history, so a crash
// between the apply and the schedule's change is healed by the activity's retry; a drained
// pool ends only once its schedules are deleted.

// Names of the schedules' action workflows.
const (
	ScheduledSleepWorkflowName = "ScheduledSleep"
	WarmWindowWorkflowName     = "WarmWindow"
)

// SignalWarmWindow tells the pool a window of spec.scaling.schedule started (WarmWindowStart).
const SignalWarmWindow = "warm-window"

// Schedule kinds.
const (
	ScheduleSleep = "sleep"
	ScheduleWake  = "wake"
	ScheduleWarm  = "warm"
)

// ScheduleIDPrefix starts the id of every schedule of a pool: kobe-pool-<pool>-.
func ScheduleIDPrefix(pool string) string { return "kobe-pool-" + pool + "-" }

// maxWarmWindows bounds the ids SyncPoolSchedules looks after (pools allows 20 windows).
const maxWarmWindows = 20

// PoolSchedule is one Temporal Schedule a pool wants.
type PoolSchedule struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	// Sleep is the ScheduledSleep input (kinds sleep and wake); Window the WarmWindow input.
	Sleep  *ScheduledSleepInput `json:"sleep,omitempty"`
	Window *WarmWindowInput     `json:"window,omitempty"`
}

// ScheduledSleepInput is what a sleep or wake schedule runs: put the pool's Bound leases to
// sleep (or wake them), leaving alone those Exclude matches.
type ScheduledSleepInput struct {
	Pool    string                    `json:"pool"`
	Wake    bool                      `json:"wake,omitempty"`
	Exclude []poolspec.SleepExclusion `json:"exclude,omitempty"`
	// ResumeTimeout bounds each wake (spec.scaling.resumeTimeout).
	ResumeTimeout time.Duration `json:"resumeTimeout,omitempty"`
}

// WarmWindowInput is what a warm window's schedule runs: window Index of the pool's
// spec.scaling.schedule, as it was when the schedule was made (Window).
type WarmWindowInput struct {
	Pool   string                    `json:"pool"`
	Index  int                       `json:"index"`
	Window poolspec.WarmWindowPolicy `json:"window"`
}

// WarmWindowStart is the SignalWarmWindow payload: the window started at Start (the time the
// schedule fired for, not when its workflow ran).
type WarmWindowStart struct {
	WarmWindowInput
	Start time.Time `json:"start"`
}

// ActiveWindow is the warm window the pool is in.
type ActiveWindow struct {
	Index    int       `json:"index"`
	MinReady int       `json:"minReady"`
	Until    time.Time `json:"until"`
}

// ScheduleState is the part of a pool's Snapshot about its schedules and warm windows.
type ScheduleState struct {
	// Schedules are the schedules last made (SyncPoolSchedules succeeded with them).
	Schedules []PoolSchedule `json:"schedules,omitempty"`
	// SchedulesRetryAt: the last sync failed; it is tried again then.
	SchedulesRetryAt time.Time `json:"schedulesRetryAt,omitempty"`
	SchedulesError   string    `json:"schedulesError,omitempty"`
	// WarmWindow is the window of spec.scaling.schedule open now (nil: none).
	WarmWindow *ActiveWindow `json:"warmWindow,omitempty"`
}

// schedulesRetry is how long the pool waits after a failed sync (the activity's own retries
// have given up) before trying again.
const schedulesRetry = time.Minute

// WantedSchedules are the schedules a pool with policy pol wants: none while it drains.
func WantedSchedules(pol poolspec.Policy, draining bool) []PoolSchedule {
	if draining {
		return nil
	}
	var out []PoolSchedule
	if sp := pol.Sleep; sp != nil {
		for _, k := range []struct {
			kind, cron string
			wake       bool
		}{{ScheduleSleep, sp.Schedule, false}, {ScheduleWake, sp.WakeSchedule, true}} {
			if k.cron == "" {
				continue
			}
			out = append(out, PoolSchedule{ID: ScheduleIDPrefix(pol.Name) + k.kind, Kind: k.kind, Cron: k.cron, Timezone: sp.Timezone,
				Sleep: &ScheduledSleepInput{Pool: pol.Name, Wake: k.wake, Exclude: sp.Exclude, ResumeTimeout: pol.ResumeTimeout}})
		}
	}
	for i, w := range pol.WarmWindows {
		out = append(out, PoolSchedule{ID: fmt.Sprintf("%swarm-%d", ScheduleIDPrefix(pol.Name), i), Kind: ScheduleWarm, Cron: w.Cron,
			Timezone: w.Timezone, Window: &WarmWindowInput{Pool: pol.Name, Index: i, Window: w}})
	}
	return out
}

// SchedulesDue says whether the pool's schedules must be synced now, and to what.
func (s *State) SchedulesDue(now time.Time) ([]PoolSchedule, bool) {
	want := WantedSchedules(s.Policy, s.Draining)
	if schedulesEqual(want, s.Schedules) && s.SchedulesError == "" {
		return nil, false
	}
	if now.Before(s.SchedulesRetryAt) {
		return nil, false
	}
	return want, true
}

// SchedulesSynced records the outcome of a sync of want.
func (s *State) SchedulesSynced(want []PoolSchedule, err error, now time.Time) {
	if err != nil {
		s.SchedulesError, s.SchedulesRetryAt = err.Error(), now.Add(schedulesRetry)
		return
	}
	s.Schedules, s.SchedulesError, s.SchedulesRetryAt = want, "", time.Time{}
}

func schedulesEqual(a, b []PoolSchedule) bool {
	return slices.EqualFunc(a, b, func(x, y PoolSchedule) bool { return scheduleNote(x) == scheduleNote(y) })
}

// WarmWindowStarted: a window's schedule fired. A window the policy no longer has as it was
// (the spec changed since the schedule was made) and one already over are ignored.
func (s *State) WarmWindowStarted(w WarmWindowStart, now time.Time) {
	if w.Index < 0 || w.Index >= len(s.Policy.WarmWindows) || s.Policy.WarmWindows[w.Index] != w.Window {
		return
	}
	until := w.Window.WindowEnd(w.Start)
	if !now.Before(until) {
		return
	}
	s.WarmWindow = &ActiveWindow{Index: w.Index, MinReady: w.Window.MinReady, Until: until}
}

// endWarmWindow closes the window once its time is up, or when the policy changed under it.
func (s *State) endWarmWindow(now time.Time) {
	w := s.WarmWindow
	if w == nil {
		return
	}
	if !now.Before(w.Until) || w.Index >= len(s.Policy.WarmWindows) || s.Policy.WarmWindows[w.Index].MinReady != w.MinReady {
		s.WarmWindow = nil
	}
}

// warmTarget is the warm target now: the open window's minReady, or the policy's.
func (s *State) warmTarget() int {
	if s.WarmWindow != nil {
		return s.WarmWindow.MinReady
	}
	return s.Policy.WarmTarget
}

// WarmTargetAt is the decision of the warm target alone: the target at now of a pool with
// policy pol whose windows started at the given times (the schedules' fire times, in order).
// It is what the pool does with its SignalWarmWindow signals, for tests and documentation.
func WarmTargetAt(pol poolspec.Policy, starts []WarmWindowStart, now time.Time) int {
	s := NewState(Snapshot{Policy: pol})
	for _, w := range starts {
		if w.Start.After(now) {
			break
		}
		s.endWarmWindow(w.Start)
		s.WarmWindowStarted(w, w.Start)
	}
	s.endWarmWindow(now)
	return s.warmTarget()
}

// scheduleNote is the schedule's note in the Web UI; it says everything the schedule is, so
// that a schedule whose note is unchanged needs no update.
func scheduleNote(p PoolSchedule) string {
	zone := p.Timezone
	if zone == "" {
		zone = "UTC"
	}
	what := ""
	switch {
	case p.Sleep != nil:
		verb := "puts the Bound leases to sleep"
		if p.Sleep.Wake {
			verb = "wakes the sleeping leases"
		}
		what = fmt.Sprintf("%s (resumeTimeout %s, %d exclusions: %v)", verb, p.Sleep.ResumeTimeout, len(p.Sleep.Exclude), p.Sleep.Exclude)
	case p.Window != nil:
		what = fmt.Sprintf("opens warm window %d: minReady %d for %s", p.Window.Index, p.Window.Window.MinReady, p.Window.Window.Duration)
	}
	return fmt.Sprintf("kobe pool %s: %s at %q in %s", poolOf(p), what, p.Cron, zone)
}

func poolOf(p PoolSchedule) string {
	if p.Sleep != nil {
		return p.Sleep.Pool
	}
	if p.Window != nil {
		return p.Window.Pool
	}
	return ""
}

// SyncSchedules is the SyncPoolSchedules input.
type SyncSchedules struct {
	Pool string `json:"pool"`
	// TaskQueue is where the schedules' workflows run (the pool's own).
	TaskQueue string         `json:"taskQueue"`
	Want      []PoolSchedule `json:"want,omitempty"`
}

// schedulesOptions: the sync retries for a while (Temporal restarting); past it the pool
// records the error and tries again later.
func schedulesOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	}
}

// SyncPoolSchedules makes the pool's Temporal Schedules exactly in.Want: each created, or
// updated where its note (which says everything it is) differs, and every other id of the
// pool's family (sleep, wake, warm-0…19) deleted. A warm window's schedule that was created or
// changed is backfilled over the last window length, so a window open now takes effect now
// rather than at its next start. Idempotent: a retry after a crash does what is left.
func (a *Activities) SyncPoolSchedules(ctx context.Context, in SyncSchedules) error {
	if a.Temporal == nil {
		return temporal.NewNonRetryableApplicationError("this worker has no Temporal client for schedules", "NoTemporalClient", nil)
	}
	sc := a.Temporal.ScheduleClient()
	wanted := map[string]bool{}
	for _, p := range in.Want {
		wanted[p.ID] = true
		if err := ensureSchedule(ctx, sc, in.TaskQueue, p); err != nil {
			return fmt.Errorf("schedule %s: %w", p.ID, err)
		}
	}
	return deleteSchedules(ctx, sc, in.Pool, wanted)
}

// DeleteSchedules deletes every schedule of the pool's family (sleep, wake, warm-0…19). The API
// runs it where no pool workflow owns them: a pool deleted while its workflow is not running,
// and a pool created under a name whose schedules an earlier pool left behind.
func DeleteSchedules(ctx context.Context, c client.Client, pool string) error {
	return deleteSchedules(ctx, c.ScheduleClient(), pool, nil)
}

func deleteSchedules(ctx context.Context, sc client.ScheduleClient, pool string, keep map[string]bool) error {
	ids := []string{ScheduleIDPrefix(pool) + ScheduleSleep, ScheduleIDPrefix(pool) + ScheduleWake}
	for i := range maxWarmWindows {
		ids = append(ids, fmt.Sprintf("%swarm-%d", ScheduleIDPrefix(pool), i))
	}
	for _, id := range ids {
		if keep[id] {
			continue
		}
		err := sc.GetHandle(ctx, id).Delete(ctx)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("deleting schedule %s: %w", id, err)
		}
	}
	return nil
}

// ensureSchedule creates or updates one schedule.
func ensureSchedule(ctx context.Context, sc client.ScheduleClient, queue string, p PoolSchedule) error {
	action := &client.ScheduleWorkflowAction{ID: p.ID, TaskQueue: queue, WorkflowExecutionTimeout: time.Hour}
	// A start missed while Temporal was down still runs within the catch-up window: an hour
	// for a sleep or wake, the window's length for a warm window.
	catchup := time.Hour
	switch {
	case p.Sleep != nil:
		action.Workflow, action.Args = ScheduledSleepWorkflowName, []any{*p.Sleep}
	case p.Window != nil:
		action.Workflow, action.Args = WarmWindowWorkflowName, []any{*p.Window}
		catchup = p.Window.Window.Duration
	default:
		return errors.New("a schedule with no action")
	}
	spec := client.ScheduleSpec{CronExpressions: []string{p.Cron}, TimeZoneName: p.Timezone}
	note := scheduleNote(p)
	h := sc.GetHandle(ctx, p.ID)
	desc, err := h.Describe(ctx)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		_, err = sc.Create(ctx, client.ScheduleOptions{ID: p.ID, Spec: spec, Action: action, Note: note,
			// Never two runs of one schedule at once: a slow round of sleeps is not stacked on.
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: catchup})
		var exists *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.Is(err, temporal.ErrScheduleAlreadyRunning) || errors.As(err, &exists) {
			err = nil // a retry after a create whose answer was lost
		}
	case err != nil:
		return err
	case desc.Schedule.State != nil && desc.Schedule.State.Note == note:
		return nil // as wanted
	default:
		err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec, s.Action = &spec, action
			s.Policy = &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: catchup}
			if s.State == nil {
				s.State = &client.ScheduleState{}
			}
			s.State.Note = note
			return &client.ScheduleUpdate{Schedule: &s}, nil
		}})
	}
	if err != nil || p.Window == nil {
		return err
	}
	now := time.Now()
	return h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
		Start: now.Add(-p.Window.Window.Duration), End: now, Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}}})
}

// WarmWindow is a warm window schedule's action: it tells the pool the window started at the
// time the schedule fired for (TemporalScheduledStartTime; the workflow's start otherwise).
func WarmWindow(ctx workflow.Context, in WarmWindowInput) error {
	start := workflow.GetInfo(ctx).WorkflowStartTime
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")); ok && !t.IsZero() {
		start = t
	}
	return workflow.SignalExternalWorkflow(ctx, WorkflowID(in.Pool), "", SignalWarmWindow, WarmWindowStart{WarmWindowInput: in, Start: start}).Get(ctx, nil)
}

// scheduleSync is the SyncPoolSchedules activity in flight.
type scheduleSync struct {
	want   []PoolSchedule
	future workflow.Future
}

// startScheduleSync starts a sync of the pool's schedules when one is due and none runs.
func (p *poolRun) startScheduleSync() {
	if p.schedules != nil {
		return
	}
	want, due := p.s.SchedulesDue(p.Now())
	if !due {
		return
	}
	var a *Activities
	ctx := workflow.WithActivityOptions(p.ctx, schedulesOptions())
	f := workflow.ExecuteActivity(ctx, a.SyncPoolSchedules, SyncSchedules{Pool: p.s.Policy.Name,
		TaskQueue: workflow.GetInfo(p.ctx).TaskQueueName, Want: want})
	p.schedules = &scheduleSync{want: want, future: f}
}

// schedulesSynced acts on a finished sync.
func (p *poolRun) schedulesSynced() {
	sync := p.schedules
	p.schedules = nil
	err := sync.future.Get(p.ctx, nil)
	if err != nil {
		workflow.GetLogger(p.ctx).Warn("the pool's schedules are not synced", "error", err)
	}
	p.s.SchedulesSynced(sync.want, err, p.Now())
}

// schedulesSettled: nothing of the pool's schedules is left to do (a drained pool ends only then).
func (p *poolRun) schedulesSettled() bool {
	_, due := p.s.SchedulesDue(p.Now())
	return p.schedules == nil && !due && p.s.SchedulesError == ""
}

// warmWindowHandler receives SignalWarmWindow.
func (p *poolRun) warmWindowHandler() signalHandler {
	return signalHandler{workflow.GetSignalChannel(p.ctx, SignalWarmWindow), func(c workflow.ReceiveChannel) {
		var w WarmWindowStart
		c.Receive(p.ctx, &w)
		p.s.WarmWindowStarted(w, p.Now())
	}}
}

// ScheduledSleepInput is a schedule's recorded input: its duration is written as a string.
func (v ScheduledSleepInput) MarshalJSON() ([]byte, error) {
	type plain ScheduledSleepInput
	return jsonduration.Marshal(plain(v))
}

func (v *ScheduledSleepInput) UnmarshalJSON(b []byte) error {
	type plain ScheduledSleepInput
	return jsonduration.Unmarshal(b, (*plain)(v))
}
