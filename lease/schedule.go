package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/jsonduration"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// ScheduledSleep is the action of a pool's sleep and wake schedules (pool/schedules.go): it
// finds the pool's Bound leases, leaves out those spec.sleep.exclude matches, and puts each to
// sleep (or wakes it) through the lease's own sleep or wake Update, as `kobe lease sleep`
// does. The lease runs one sleep or wake of its instance at a time, each an instance workflow
// with an id of its own (instance.SleepWorkflowID), so this never puts one instance to sleep
// twice at once, whatever else (a person, another schedule run) asks at the same time; the
// schedule's overlap policy (skip) keeps its own runs from stacking up.
func ScheduledSleep(ctx workflow.Context, in pool.ScheduledSleepInput) (ScheduledSleepResult, error) {
	var a *Activities
	listCtx := workflow.WithActivityOptions(ctx, instance.StoreWriteOptions())
	var targets SleepTargets
	if err := workflow.ExecuteActivity(listCtx, a.ListSleepTargets, in).Get(ctx, &targets); err != nil {
		return ScheduledSleepResult{}, err
	}
	res := ScheduledSleepResult{Excluded: targets.Excluded}
	resume := in.ResumeTimeout
	if resume <= 0 {
		resume = instance.DefaultResumeTimeout
	}
	changeCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// A wake waits for the cluster to be ready again; a sleep for its processes to stop.
		StartToCloseTimeout: resume + 2*time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	futures := make([]workflow.Future, len(targets.Leases))
	for i, id := range targets.Leases {
		futures[i] = workflow.ExecuteActivity(changeCtx, a.ChangeLeaseSleep, LeaseSleepChange{LeaseID: id, Pool: in.Pool,
			Wake: in.Wake, ResumeTimeout: in.ResumeTimeout, Actor: "kobe:schedule:" + workflow.GetInfo(ctx).WorkflowExecution.ID})
	}
	for i, f := range futures {
		var outcome string
		if err := f.Get(ctx, &outcome); err != nil {
			outcome = "failed: " + err.Error()
		}
		if outcome == "ok" {
			res.Changed = append(res.Changed, targets.Leases[i])
			continue
		}
		if res.Skipped == nil {
			res.Skipped = map[string]string{}
		}
		res.Skipped[targets.Leases[i]] = outcome
	}
	return res, nil
}

// ScheduledSleepResult says what a ScheduledSleep run did.
type ScheduledSleepResult struct {
	// Changed are the leases put to sleep (or woken), or already so.
	Changed  []string `json:"changed,omitempty"`
	Excluded []string `json:"excluded,omitempty"`
	// Skipped are the leases the change did not reach, with why (ended meanwhile, refused).
	Skipped map[string]string `json:"skipped,omitempty"`
}

// SleepTargets are the Bound leases of a pool a scheduled sleep or wake acts on, and those
// its exclusions leave alone.
type SleepTargets struct {
	Leases   []string `json:"leases,omitempty"`
	Excluded []string `json:"excluded,omitempty"`
}

// ListSleepTargets lists the pool's Bound leases (the store's rows), split by the exclusions
// (owner, alias, metadata).
func (a *Activities) ListSleepTargets(ctx context.Context, in pool.ScheduledSleepInput) (SleepTargets, error) {
	ls, err := a.Store.ListLeases(ctx, store.LeaseFilter{Pool: in.Pool, Phases: []api.LeasePhase{api.LeaseBound}})
	if err != nil {
		return SleepTargets{}, err
	}
	policy := &poolspec.SleepPolicy{Exclude: in.Exclude}
	var t SleepTargets
	for _, l := range ls {
		if policy.Excludes(l.Principal, l.Alias, l.Metadata) {
			t.Excluded = append(t.Excluded, l.ID)
			continue
		}
		t.Leases = append(t.Leases, l.ID)
	}
	return t, nil
}

// LeaseSleepChange asks one lease to sleep or wake.
type LeaseSleepChange struct {
	LeaseID string `json:"leaseId"`
	Pool    string `json:"pool"`
	Wake    bool   `json:"wake,omitempty"`
	// ResumeTimeout is the schedule's (it bounds the activity); the wake itself is bounded by
	// the lease's terms (State.Wake).
	ResumeTimeout time.Duration `json:"resumeTimeout,omitempty"`
	// Actor is who asks, in the audit log: the schedule's run.
	Actor string `json:"actor"`
}

// ChangeLeaseSleep sends the lease's sleep or wake Update and waits for its outcome, and audits
// it (lease.sleep / lease.wake, actor the schedule's run). It answers "ok", or the reason the
// lease did not change: not_ready (no longer Bound), sleep_unsupported, gone (ended).
func (a *Activities) ChangeLeaseSleep(ctx context.Context, c LeaseSleepChange) (string, error) {
	if a.Temporal == nil {
		return "", temporal.NewNonRetryableApplicationError("this worker has no Temporal client", "NoTemporalClient", nil)
	}
	action, update, arg := "lease.sleep", UpdateSleep, any(SleepRequest{Cause: SleepCauseSchedule})
	if c.Wake {
		// The lease bounds its wake by its own terms (State.Wake), as it does the API's.
		action, update, arg = "lease.wake", UpdateWake, WakeRequest{Cause: SleepCauseSchedule}
	}
	started := time.Now()
	h, err := a.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: leasestart.WorkflowID(c.LeaseID),
		UpdateName: update, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		// The same run's retry is the same update: the lease runs it once.
		UpdateID: fmt.Sprintf("%s-%s-%s", activity.GetInfo(ctx).WorkflowExecution.ID, update, activity.GetInfo(ctx).ActivityID)})
	var v View
	if err == nil {
		err = h.Get(ctx, &v)
	}
	outcome := "ok"
	if reason, refused := IsSleepRejection(err); refused {
		outcome, err = string(reason), nil
	} else if IsNotRunning(err) {
		outcome, err = "gone", nil
	}
	if err != nil {
		return "", err // retried; the update id makes a retry the same request
	}
	detail, _ := json.Marshal(map[string]any{"sleeping": v.Sleeping, "took": time.Since(started).String(), "outcome": outcome})
	result := "ok"
	if outcome != "ok" {
		result = "refused"
	}
	if _, err := a.Store.AppendEvent(ctx, store.Event{Actor: c.Actor, Action: action, Target: c.LeaseID, Pool: c.Pool, Result: result,
		Detail: detail, Key: fmt.Sprintf("%s/%s/%s", c.Actor, action, c.LeaseID)}); err != nil {
		return "", err
	}
	return outcome, nil
}

// IsNotRunning says whether a signal or update failed because the workflow has ended (or never
// existed).
func IsNotRunning(err error) bool {
	if err == nil {
		return false
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return true
	}
	return strings.Contains(err.Error(), "workflow execution already completed")
}

// LeaseSleepChange is an activity input: its duration is written as a string.
func (v LeaseSleepChange) MarshalJSON() ([]byte, error) {
	type plain LeaseSleepChange
	return jsonduration.Marshal(plain(v))
}

func (v *LeaseSleepChange) UnmarshalJSON(b []byte) error {
	type plain LeaseSleepChange
	return jsonduration.Unmarshal(b, (*plain)(v))
}
