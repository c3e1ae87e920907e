package lease

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
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
// certificates when they expire within CertificatesMinRemaining. kobe's wakes (the API's, a wake
// schedule's) leave both zero: the lease bounds its wake by its own terms (State.Wake), those
// its pool granted it at admission; zero there too is the instance's defaults
// (instance.DefaultResumeTimeout, poolspec.DefaultRecycleBefore).
type WakeRequest struct {
	ResumeTimeout            time.Duration `json:"resumeTimeout,omitempty"`
	CertificatesMinRemaining time.Duration `json:"certificatesMinRemaining,omitempty"`
	Cause                    string        `json:"cause,omitempty"`
}

// registerSleep registers the sleep and wake Updates. They exist from the start; their
// validator (State.SleepAdmission) refuses them until the lease is Bound.
func (r *leaseRun) registerSleep() error {
	admission := func() error { return sleepRejection(r.st.SleepAdmission()) }
	if err := workflow.SetUpdateHandlerWithOptions(r.ctx, UpdateSleep,
		func(ctx workflow.Context, req SleepRequest) (View, error) {
			return r.changeSleep(ctx, true, WakeRequest{}, causeOf(req.Cause))
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, SleepRequest) error { return admission() }}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(r.ctx, UpdateWake,
		func(ctx workflow.Context, req WakeRequest) (View, error) {
			return r.changeSleep(ctx, false, r.st.Wake(req), causeOf(req.Cause))
		},
		workflow.UpdateHandlerOptions{Validator: func(workflow.Context, WakeRequest) error { return admission() }})
}

// causeOf is the cause of a sleep or wake request: sleepCauseSchedule for a schedule's, else
// sleepCauseRequest.
func causeOf(cause string) string {
	if cause == SleepCauseSchedule {
		return sleepCauseSchedule
	}
	return sleepCauseRequest
}

// sleepRejection is the error of a refused sleep or wake ("": none).
func sleepRejection(reason api.ReasonCode) error {
	if reason == "" {
		return nil
	}
	return temporal.NewApplicationError(string(reason), SleepRejection)
}

// changeSleep puts the instance to sleep (asleep) or wakes it (as wake asks), through the
// instance's workflow, for the holder's request (sleepCauseRequest), a pool's schedule
// (sleepCauseSchedule) or the lease's inactivity (sleepCauseInactivity). State.BeginSleep
// decides whether it runs; Slept and WakeFailed what its outcome means.
func (r *leaseRun) changeSleep(ctx workflow.Context, asleep bool, wake WakeRequest, cause string) (View, error) {
	st := r.st
	// One change at a time, and none before the lease holds its member (or has ended).
	if err := workflow.Await(ctx, st.SleepMayStart); err != nil {
		return st.View, err
	}
	run, refused := st.BeginSleep(asleep, cause, workflow.Now(ctx))
	if !run {
		return st.View, sleepRejection(refused)
	}
	defer st.EndSleep()
	asg := st.asg
	in := instance.SleepInput{Backend: asg.Backend, Spec: backends.InstanceSpec{ID: asg.InstanceID, Pool: r.in.Pool},
		Placement: asg.Placement, Endpoint: asg.Endpoint, LeaseID: r.in.LeaseID, ResumeTimeout: wake.ResumeTimeout,
		CertificatesMinRemaining: wake.CertificatesMinRemaining}
	name, id := instance.SleepWorkflowName, instance.SleepWorkflowID(asg.InstanceID, st.View.Sleeps)
	if !asleep {
		name, id = instance.WakeWorkflowName, instance.WakeWorkflowID(asg.InstanceID, st.View.Sleeps)
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id,
		WorkflowExecutionTimeout: max(wake.ResumeTimeout, instance.DefaultResumeTimeout) + 10*time.Minute})
	var res instance.WakeResult
	err := workflow.ExecuteChildWorkflow(cctx, name, in).Get(ctx, &res)
	now := workflow.Now(ctx)
	if err != nil {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Type() == instance.ErrCannotSleep {
			return st.View, sleepRejection(api.ReasonSleepUnsupported)
		}
		if asleep {
			return st.View, err
		}
		reason, conds := st.WakeFailed(err, instance.CertificatesExpiredInSleep(err), now)
		for _, c := range conds {
			r.audit(ctx, c)
		}
		return st.View, temporal.NewApplicationError(string(reason), SleepRejection, err)
	}
	c := st.Slept(asleep, cause, now, res.Duration)
	if asleep {
		workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": r.in.Pool, "cause": cause}).Counter(MetricLeaseSleeps).Inc(1)
	}
	r.audit(ctx, c)
	return st.View, nil
}

// IsSleepRejection returns the reason code of a refused sleep or wake.
func IsSleepRejection(err error) (api.ReasonCode, bool) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == SleepRejection {
		return api.ReasonCode(ae.Message()), true
	}
	return "", false
}
