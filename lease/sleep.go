package lease

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// Updates that put a Bound lease's instance to sleep and wake it (→ View). Each runs the
// instance's own workflow (instance.Sleep, instance.Wake) as a child, one at a time; sleeping a
// sleeping lease and waking an awake one change nothing. The lease's TTL keeps running while
// it sleeps, and so does its idle timeout (the holder's request itself counts as activity; a
// pool's schedule's does not: SleepCauseSchedule).
const (
	UpdateSleep = "sleep" // SleepRequest → View
	UpdateWake  = "wake"  // WakeRequest → View
)

// SleepRejection is the error type of a refused sleep or wake; its message is the reason code.
const SleepRejection = "SleepRejected"

// SleepCauseSchedule is the Cause of the requests of a pool's sleep and wake schedules
// (ChangeLeaseSleep): they are not the holder's activity, so they do not move lastSeen (the
// idle timeout's), and MetricLeaseSleeps counts their sleeps with cause "schedule". Any other
// Cause is the holder's request through kobe's API.
const SleepCauseSchedule = "schedule"

// SleepRequest asks a Bound lease to put its instance to sleep.
type SleepRequest struct {
	Cause string `json:"cause,omitempty"`
}

// WakeRequest asks a sleeping lease to wake its instance within ResumeTimeout, re-issuing its
// certificates when they expire within CertificatesMinRemaining. Every wake kobe sends (the
// API's, a wake schedule's) is built by WakeFor from the pool's policy; zero fields are the
// defaults (instance.DefaultResumeTimeout, poolspec.DefaultRecycleBefore).
type WakeRequest struct {
	ResumeTimeout            time.Duration `json:"resumeTimeout,omitempty"`
	CertificatesMinRemaining time.Duration `json:"certificatesMinRemaining,omitempty"`
	Cause                    string        `json:"cause,omitempty"`
}

// WakeFor is the wake of a lease of a pool with policy pol: its spec.scaling.resumeTimeout and
// its certificate minimum (instance.WakeCertificateMinimum: recycleBefore or an X509Valid
// gate's minRemaining, the longer). The one place a wake reads the pool's policy, so that a
// person's wake and a schedule's are the same.
func WakeFor(pol poolspec.Policy) WakeRequest {
	return WakeRequest{ResumeTimeout: pol.ResumeTimeout, CertificatesMinRemaining: instance.WakeCertificateMinimum(pol)}
}

// sleeper carries a lease's sleeps and wakes: its update handlers and what they share with the
// rest of the workflow.
type sleeper struct {
	in       Input
	view     *View
	asg      *pool.Assignment
	lastSeen *time.Time
	// lastActive is the inactivity check's activity that does not move lastSeen: a schedule's
	// wake moves it, so that a woken lease has another afterInactivity before it sleeps again.
	lastActive *time.Time
	// holding is set once the lease is held (boundLease); the
	// updates are refused before it.
	holding bool
	// busy is true while a sleep or a wake runs: they go one at a time, and the lease does not
	// end under one.
	busy bool
}

func (s *sleeper) register(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSleep,
		func(ctx workflow.Context, req SleepRequest) (View, error) {
			return s.change(ctx, true, WakeRequest{}, causeOf(req.Cause))
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, SleepRequest) error { return s.admission() }}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateWake,
		func(ctx workflow.Context, req WakeRequest) (View, error) {
			return s.change(ctx, false, req, causeOf(req.Cause))
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, WakeRequest) error { return s.admission() }})
}

// causeOf is the cause of a sleep or wake request: sleepCauseSchedule for a schedule's, else
// sleepCauseRequest.
func causeOf(cause string) string {
	if cause == SleepCauseSchedule {
		return sleepCauseSchedule
	}
	return sleepCauseRequest
}

// admission is the validator of both updates: only a Bound lease sleeps or wakes. A warm-bound
// lease is Bound from its first event, a moment before it holds its member (while it makes
// sure of its credential): its holder, just answered Bound, may already ask; the update then
// waits for the hold (change).
func (s *sleeper) admission() error {
	if s.view.Phase != api.LeaseBound {
		return temporal.NewApplicationError(string(api.ReasonNotReady), SleepRejection)
	}
	return nil
}

// refusal says whether a sleep or wake can be carried out now: the lease is Bound and holds
// its member.
func (s *sleeper) refusal() error {
	if !s.holding || s.view.Phase != api.LeaseBound {
		return temporal.NewApplicationError(string(api.ReasonNotReady), SleepRejection)
	}
	return nil
}

// change puts the instance to sleep (asleep) or wakes it (as wake asks), through the
// instance's workflow, for the holder's request (sleepCauseRequest), a pool's schedule
// (sleepCauseSchedule) or the lease's inactivity (sleepCauseInactivity).
func (s *sleeper) change(ctx workflow.Context, asleep bool, wake WakeRequest, cause string) (View, error) {
	// One change at a time, and none before the lease holds its member (or has ended).
	if err := workflow.Await(ctx, func() bool { return !s.busy && (s.holding || s.view.Phase != api.LeaseBound) }); err != nil {
		return *s.view, err
	}
	if cause == sleepCauseRequest {
		// A request through kobe's API for the lease is activity (idle timeout).
		*s.lastSeen = workflow.Now(ctx)
	}
	// Decide on the state as it is now: the lease may have ended, or another request done it.
	if err := s.refusal(); err != nil {
		return *s.view, err
	}
	if s.view.Sleeping == asleep {
		return *s.view, nil
	}
	s.busy = true
	defer func() { s.busy = false }()
	s.view.Sleeps++
	in := instance.SleepInput{Backend: s.asg.Backend, Spec: backends.InstanceSpec{ID: s.asg.InstanceID, Pool: s.in.Pool},
		Placement: s.asg.Placement, Endpoint: s.asg.Endpoint, LeaseID: s.in.LeaseID, ResumeTimeout: wake.ResumeTimeout,
		CertificatesMinRemaining: wake.CertificatesMinRemaining}
	name, id := instance.SleepWorkflowName, instance.SleepWorkflowID(s.asg.InstanceID, s.view.Sleeps)
	if !asleep {
		name, id = instance.WakeWorkflowName, instance.WakeWorkflowID(s.asg.InstanceID, s.view.Sleeps)
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id,
		WorkflowExecutionTimeout: max(wake.ResumeTimeout, instance.DefaultResumeTimeout) + 10*time.Minute})
	var res instance.WakeResult
	err := workflow.ExecuteChildWorkflow(cctx, name, in).Get(ctx, &res)
	now := workflow.Now(ctx)
	if err != nil {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Type() == instance.ErrCannotSleep {
			return *s.view, temporal.NewApplicationError(string(api.ReasonSleepUnsupported), SleepRejection)
		}
		if asleep {
			return *s.view, err
		}
		// The instance did not come back: it is broken. The lease stays Bound (its holder
		// decides whether to give it back), no longer asleep. Certificates that expired in
		// its sleep and could not be re-issued have their own reason.
		s.view.Sleeping = false
		reason := api.ReasonWakeFailed
		if instance.CertificatesExpiredInSleep(err) {
			reason = api.ReasonCertificatesExpiring
		}
		msg := fmt.Sprintf("the instance did not wake: %v", err)
		s.condition(ctx, api.LeaseCondition{Type: ConditionSleeping, Status: "False", Reason: reason, Message: msg, LastTransitionTime: now})
		s.condition(ctx, api.LeaseCondition{Type: ConditionInstanceHealthy, Status: "False", Reason: reason, Message: msg, LastTransitionTime: now})
		return *s.view, temporal.NewApplicationError(string(reason), SleepRejection, err)
	}
	s.view.Sleeping = asleep
	if !asleep && cause == sleepCauseSchedule && s.lastActive != nil && now.After(*s.lastActive) {
		// Not the holder's activity (lastSeen stays), but a woken lease is not slept again at once.
		*s.lastActive = now
	}
	if asleep {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": s.in.Pool, "cause": cause}).Counter(MetricLeaseSleeps).Inc(1)
		reason, why := api.ReasonAsleep, ""
		if cause == sleepCauseInactivity {
			reason, why = api.ReasonInactive, fmt.Sprintf(" after %s without activity", s.in.AfterInactivity)
		} else if cause == sleepCauseSchedule {
			why = " on its pool's sleep schedule"
		}
		s.condition(ctx, api.LeaseCondition{Type: ConditionSleeping, Status: "True", Reason: reason, LastTransitionTime: now,
			Message: "the instance is asleep" + why + ": its kubeconfig's requests are refused until it wakes (kobe lease wake " + s.in.LeaseID + ")"})
	} else {
		s.condition(ctx, api.LeaseCondition{Type: ConditionSleeping, Status: "False", Reason: api.ReasonAwake, LastTransitionTime: now,
			Message: fmt.Sprintf("the instance woke in %s", res.Duration.Round(time.Millisecond))})
	}
	return *s.view, nil
}

// condition puts c in the view and audits it (RecordLeaseCondition).
func (s *sleeper) condition(ctx workflow.Context, c api.LeaseCondition) {
	setCondition(s.view, c)
	var a *Activities
	short := workflow.WithActivityOptions(ctx, instance.StoreWriteOptions())
	_ = workflow.ExecuteActivity(short, a.RecordLeaseCondition, ConditionChange{LeaseID: s.view.ID, Pool: s.view.Pool,
		InstanceID: s.view.InstanceID, Condition: c, At: workflow.Now(ctx)}).Get(ctx, nil)
}

// IsSleepRejection returns the reason code of a refused sleep or wake.
func IsSleepRejection(err error) (api.ReasonCode, bool) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == SleepRejection {
		return api.ReasonCode(ae.Message()), true
	}
	return "", false
}
