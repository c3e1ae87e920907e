package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
)

// The orphan reaper (issue 39, item 10). The API admits a lease (its Pending row, holding its
// principal's quota and its alias) and then either binds it through its pool's Update, which
// starts the lease's workflow, or starts the workflow itself. An API that stops in between
// leaves a Pending row that no workflow will ever end. A Temporal Schedule (OrphanScheduleID,
// every OrphanReapInterval, triggered once when a worker starts) runs ReapOrphans, which fails
// with reason orphaned every lease that is Pending, was admitted more than the grace period
// ago and has no workflow (running or closed): IsOrphan.
//
// Why a lease starting at that moment is safe: the write is conditional (Pending → Failed only
// if the row is still Pending, store.FailPendingLease), so a lease whose Bound row committed
// first is left alone; and a lease whose workflow starts after its row was failed (an API
// stalled for longer than the grace, a pool's Update delivered late) cannot bind: the Bound
// row and the credential are refused (store.ErrLeaseEnded) to the API's warm bind, to the
// warm-bound workflow's EnsureLeaseBound and to the queued workflow's IssueLeaseCredentials,
// and that workflow gives its member back. The grace only keeps the reaper from racing a start
// that is merely slow: it is longer than the API's longest wait between admission and start.

// OrphanReaperWorkflowName is the registered name of ReapOrphans.
const OrphanReaperWorkflowName = "ReapOrphanedLeases"

// OrphanScheduleID is the id of the one Temporal Schedule of the orphan reaper: a second
// worker that starts finds it, and its overlap policy never runs two reapers at once.
const OrphanScheduleID = "kobe-orphaned-leases"

// OrphanReapInterval is how often the schedule runs the reaper: an orphan holds its quota and
// its alias for at most its grace plus this.
const OrphanReapInterval = time.Minute

// maxOrphansPerRun bounds what one run fails (and its history); the next run takes the rest.
const maxOrphansPerRun = 100

// ReapInput is the reaper's argument, set on its schedule by the workers (--orphan-grace).
type ReapInput struct {
	// Grace is how long a Pending lease may go without a workflow before it is failed.
	Grace time.Duration `json:"grace"`
}

// Orphan is a lease the reaper found Pending, past its grace, with no workflow.
type Orphan struct {
	ID         string    `json:"id"`
	Pool       string    `json:"pool"`
	AdmittedAt time.Time `json:"admittedAt"`
}

// ReapResult says what a run did.
type ReapResult struct {
	// Reaped are the leases failed with reason orphaned.
	Reaped []string `json:"reaped,omitempty"`
	// Kept are orphans found that were not failed: their workflow had started, or their row had
	// moved on, when the reaper came to them.
	Kept []string `json:"kept,omitempty"`
	// Missed are those whose reaping failed; the next run finds them again.
	Missed []string `json:"missed,omitempty"`
}

// IsOrphan is the reaper's decision: a lease is an orphan when it is Pending, was admitted more
// than grace before now, and has no workflow (running or closed).
func IsOrphan(l store.Lease, now time.Time, grace time.Duration, workflowExists bool) bool {
	return l.Phase == api.LeasePending && now.Sub(l.CreatedAt) > grace && !workflowExists
}

// ReapOrphans fails the orphaned leases (IsOrphan) with reason orphaned: their quota and
// alias are free again. It is short: one activity lists them, one per orphan fails it.
func ReapOrphans(ctx workflow.Context, in ReapInput) (ReapResult, error) {
	if in.Grace <= 0 {
		return ReapResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the orphan reaper's grace must be above zero, not %s", in.Grace), "InvalidInput", nil)
	}
	var a *Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var orphans []Orphan
	if err := workflow.ExecuteActivity(actx, a.FindOrphanedLeases, in).Get(ctx, &orphans); err != nil {
		return ReapResult{}, err
	}
	futures := make([]workflow.Future, len(orphans))
	for i, o := range orphans {
		futures[i] = workflow.ExecuteActivity(actx, a.ReapOrphanedLease, o)
	}
	var res ReapResult
	for i, f := range futures {
		var reaped bool
		switch err := f.Get(ctx, &reaped); {
		case err != nil:
			res.Missed = append(res.Missed, orphans[i].ID)
		case reaped:
			res.Reaped = append(res.Reaped, orphans[i].ID)
		default:
			res.Kept = append(res.Kept, orphans[i].ID)
		}
	}
	return res, nil
}

// FindOrphanedLeases lists the orphaned leases (IsOrphan at this moment, oldest first, at most
// maxOrphansPerRun). A lease whose workflow cannot be looked up now is not an orphan this time.
func (a *Activities) FindOrphanedLeases(ctx context.Context, in ReapInput) ([]Orphan, error) {
	pending, err := a.Store.ListLeases(ctx, store.LeaseFilter{Phases: []api.LeasePhase{api.LeasePending}})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Orphan
	for _, l := range pending {
		if !IsOrphan(l, now, in.Grace, false) {
			continue // too young to be one, whatever its workflow
		}
		exists, err := a.leaseWorkflowExists(ctx, l.ID)
		if err != nil {
			if a.Logger != nil {
				a.Logger.Warn("the orphan reaper could not look up a lease's workflow", zap.String("lease", l.ID), zap.Error(err))
			}
			continue
		}
		if IsOrphan(l, now, in.Grace, exists) {
			out = append(out, Orphan{ID: l.ID, Pool: l.Pool, AdmittedAt: l.CreatedAt})
			if len(out) == maxOrphansPerRun {
				break
			}
		}
	}
	return out, nil
}

// ReapOrphanedLease fails an orphan with reason orphaned, and appends its lease.failed event
// in the same transaction, unless its workflow exists by now (looked up again, just before the
// write) or its row is no longer Pending. It says whether the lease was failed (also when a
// previous attempt of this activity failed it and its answer was lost).
func (a *Activities) ReapOrphanedLease(ctx context.Context, o Orphan) (bool, error) {
	exists, err := a.leaseWorkflowExists(ctx, o.ID)
	if err != nil || exists {
		return false, err
	}
	var failed bool
	err = a.Store.InTx(ctx, func(tx store.Store) error {
		var err error
		if failed, err = tx.FailPendingLease(ctx, o.ID, api.ReasonOrphaned); err != nil || !failed {
			return err
		}
		_, err = tx.AppendEvent(ctx, transitionEvent(View{ID: o.ID, Pool: o.Pool, Phase: api.LeaseFailed, Reason: api.ReasonOrphaned}))
		return err
	})
	if err != nil || failed {
		return failed, err
	}
	l, err := a.Store.GetLease(ctx, o.ID)
	if err != nil {
		return false, err
	}
	return l.Phase == api.LeaseFailed && l.Reason == api.ReasonOrphaned, nil
}

// leaseWorkflowExists says whether the lease's workflow exists, running or closed.
func (a *Activities) leaseWorkflowExists(ctx context.Context, leaseID string) (bool, error) {
	if a.Temporal == nil {
		return false, errors.New("this worker has no Temporal client to look up leases' workflows")
	}
	_, err := a.Temporal.DescribeWorkflowExecution(ctx, leasestart.WorkflowID(leaseID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// EnsureOrphanSchedule makes sure the orphan reaper's schedule exists with this grace (created,
// or updated when a worker brings another grace: the last one to start sets it), then triggers
// one run now: orphans left while no worker ran are failed at once, not a minute later.
func EnsureOrphanSchedule(ctx context.Context, c client.Client, taskQueue string, grace time.Duration) error {
	if grace <= 0 {
		return fmt.Errorf("the orphan reaper's grace must be above zero, not %s", grace)
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: OrphanReapInterval}}}
	action := &client.ScheduleWorkflowAction{
		ID:                       "orphan-reaper",
		Workflow:                 OrphanReaperWorkflowName,
		Args:                     []any{ReapInput{Grace: grace}},
		TaskQueue:                taskQueue,
		WorkflowExecutionTimeout: 10 * time.Minute,
	}
	// A run missed while Temporal was down is not made up for: the next one does its work.
	policy := client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: OrphanReapInterval}
	note := fmt.Sprintf("kobe: fails leases Pending with no workflow for more than %s, reason orphaned (issue 39); task queue %s", grace, taskQueue)
	sc := c.ScheduleClient()
	h := sc.GetHandle(ctx, OrphanScheduleID)
	desc, err := h.Describe(ctx)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		_, err = sc.Create(ctx, client.ScheduleOptions{ID: OrphanScheduleID, Spec: spec, Action: action, Note: note,
			Overlap: policy.Overlap, CatchupWindow: policy.CatchupWindow})
		var exists *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.Is(err, temporal.ErrScheduleAlreadyRunning) || errors.As(err, &exists) {
			err = nil // another worker starting at the same time made it
		}
	case err != nil:
	case desc.Schedule.State != nil && desc.Schedule.State.Note == note:
	default:
		err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec, s.Action, s.Policy = &spec, action, &policy
			if s.State == nil {
				s.State = &client.ScheduleState{}
			}
			s.State.Note = note
			return &client.ScheduleUpdate{Schedule: &s}, nil
		}})
	}
	if err != nil {
		return fmt.Errorf("setting up the orphan reaper's schedule: %w", err)
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP}); err != nil {
		return fmt.Errorf("triggering the orphan reaper's schedule: %w", err)
	}
	return nil
}
