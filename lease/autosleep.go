package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
)

// A lease of a pool with spec.sleep.afterInactivity (Input.AfterInactivity) puts its instance
// to sleep, through the same path as UpdateSleep, once nothing was seen of it for that long.
// Activity is:
//   - the holder's requests through kobe about the lease: heartbeats, sleep and wake requests
//     (they move lastSeen), extensions, and the reads of the lease and its kubeconfig
//     (SignalActivity, which the API sends at most every AfterInactivity/4). A pool's sleep
//     and wake schedules are not the holder's: they do not move lastSeen; a scheduled wake
//     only restarts the inactivity period (lastActive);
//   - the lease's own requests to its cluster (its kubeconfig in use), where the backend
//     observes them (backends.ActivityReporter: the local backend's audit log); kobe's own
//     requests to the cluster never count.
//
// The workflow does not poll: a timer fires when the activity it knows of is AfterInactivity
// old, and only then does it ask the backend (LeaseLastActivity) when the cluster was last
// used. A lease kept busy through its kubeconfig is asked about once per AfterInactivity.
// Nothing wakes a sleeping lease but a wake request.

// SignalActivity tells a lease with AfterInactivity that its holder asked kobe about it.
const SignalActivity = "activity"

// sleepCause labels MetricLeaseSleeps.
const (
	sleepCauseRequest    = "request"
	sleepCauseInactivity = "inactivity"
	sleepCauseSchedule   = SleepCauseSchedule
)

// inactiveFor decides, from the newest activity of every kind seen (zero times are none), whether
// a lease that may be inactive for after is inactive at now, and otherwise when it may be next.
func inactiveFor(now time.Time, after time.Duration, seen ...time.Time) (inactive bool, checkAt time.Time) {
	var last time.Time
	for _, t := range seen {
		if t.After(last) {
			last = t
		}
	}
	due := last.Add(after)
	if !now.Before(due) {
		return true, time.Time{}
	}
	return false, due
}

// autoSleep is a Bound lease's inactivity check (nil when the lease has no AfterInactivity).
// What is activity, and when a check is due, is State's (InactivityCheckAt, Inactive, Used).
type autoSleep struct {
	// notBefore holds the next check back after a check that failed.
	notBefore time.Time
	timer     workflow.Future
	due       bool
	signals   workflow.ReceiveChannel
}

// arm starts the timer of the next check unless the lease sleeps, a timer runs or a check is
// due; it says whether one is due now.
func (s *autoSleep) arm(b *boundLease) bool {
	if b.st.View.Sleeping || s.timer != nil || s.due {
		return s.due
	}
	now := workflow.Now(b.ctx)
	if d := b.st.InactivityCheckAt(now, s.notBefore).Sub(now); d > 0 {
		s.timer = workflow.NewTimer(b.ctx, d)
		b.events += 2
		return false
	}
	s.due = true
	return true
}

// check runs a due check: when what kobe saw of the lease is old enough, it asks the backend
// when the cluster was last used, and sleeps the lease if that is old enough too.
func (s *autoSleep) check(b *boundLease) {
	s.due = false
	ctx, st := b.ctx, b.st
	if st.View.Sleeping || !st.Inactive(workflow.Now(ctx)) {
		return // the timer is re-armed from the newer activity
	}
	var a *Activities
	actx := workflow.WithActivityOptions(ctx, activityCheckOptions(st.asg.Placement.TaskQueue))
	var seen ObservedActivity
	b.events += 3
	err := workflow.ExecuteActivity(actx, a.LeaseLastActivity, ActivityRequest{
		Backend: st.asg.Backend, InstanceID: st.asg.InstanceID}).Get(ctx, &seen)
	if err != nil {
		// Not knowing is not inactivity: ask again one period later.
		workflow.GetLogger(ctx).Warn("cannot read the instance's activity; the lease stays awake", "error", err)
		s.notBefore = workflow.Now(ctx).Add(st.terms.AfterInactivity)
		return
	}
	st.Used(seen.Last)
	if !st.Inactive(workflow.Now(ctx)) {
		return
	}
	b.events += 10 // the sleep's child workflow, its condition and its audit event
	if _, err := b.changeSleep(ctx, true, WakeRequest{}, sleepCauseInactivity); err != nil {
		workflow.GetLogger(ctx).Warn("the lease did not sleep after its inactivity", "error", err)
		s.notBefore = workflow.Now(ctx).Add(st.terms.AfterInactivity)
	}
}

// take handles the API's activity signals (a burst counts as one).
func (s *autoSleep) take(b *boundLease, c workflow.ReceiveChannel) {
	c.Receive(b.ctx, nil)
	b.events++
	for c.ReceiveAsync(nil) {
		b.events++
	}
	b.st.Active(workflow.Now(b.ctx))
}

// ActivityRequest names the instance whose use LeaseLastActivity reads.
type ActivityRequest struct {
	Backend    string `json:"backend"`
	InstanceID string `json:"instanceId"`
}

// ObservedActivity is what the backend saw of a lease's use of its cluster.
type ObservedActivity struct {
	// Observed says the backend can tell (backends.ActivityReporter); Last is the newest request
	// of the lease's identity (zero: none, or not observed).
	Observed bool      `json:"observed"`
	Last     time.Time `json:"last,omitempty"`
	// Why says why the use was not observed.
	Why string `json:"why,omitempty"`
}

// LeaseLastActivity asks the instance's backend when the lease's identity last used the
// cluster. A backend that cannot tell answers Observed false: the lease's inactivity is then
// what kobe saw of it. It runs on the instance's host.
func (a *Activities) LeaseLastActivity(ctx context.Context, req ActivityRequest) (ObservedActivity, error) {
	b, err := instance.Backend(a.Backends, a.Host, req.Backend)
	if err != nil {
		return ObservedActivity{}, err
	}
	r, ok := b.(backends.ActivityReporter)
	if !ok {
		return ObservedActivity{Why: fmt.Sprintf("the %s backend does not observe the use of kubeconfigs", req.Backend)}, nil
	}
	last, err := r.LastActivity(ctx, req.InstanceID)
	switch {
	case errors.Is(err, backends.ErrUnavailableHere):
		return ObservedActivity{Why: err.Error()}, nil
	case errors.Is(err, backends.ErrNotFound):
		return ObservedActivity{}, temporal.NewNonRetryableApplicationError(err.Error(), "NotFound", err)
	case err != nil:
		return ObservedActivity{}, err
	}
	return ObservedActivity{Observed: true, Last: last}, nil
}

// activityCheckOptions: reading the instance's record of its use on its host, a few tries.
func activityCheckOptions(queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	}
}

// signalsOrNil is the activity signal channel, nil without a check (for drain's switch).
func (s *autoSleep) signalsOrNil() workflow.ReceiveChannel {
	if s == nil {
		return nil
	}
	return s.signals
}
