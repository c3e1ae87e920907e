package instance

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// Workflow names of an instance's sleep and wake. Each sleep and each wake is a workflow of its
// own (its own history in the Web UI), started by whoever decides it (a lease, as a child).
const (
	SleepWorkflowName = "InstanceSleep"
	WakeWorkflowName  = "InstanceWake"
)

// DefaultResumeTimeout bounds a wake (Resume, then ready) when the pool's
// spec.scaling.resumeTimeout is not set.
const DefaultResumeTimeout = poolspec.DefaultResumeTimeout

// SleepWorkflowID is the id of the n-th sleep of an instance; WakeWorkflowID of its n-th wake.
// The numbers make each one a run of its own, and a retried start of the same one a no-op.
func SleepWorkflowID(instanceID string, n int) string {
	return fmt.Sprintf("%s-sleep-%d", WorkflowID(instanceID), n)
}

// WakeWorkflowID: see SleepWorkflowID.
func WakeWorkflowID(instanceID string, n int) string {
	return fmt.Sprintf("%s-wake-%d", WorkflowID(instanceID), n)
}

// SleepInput names the instance to put to sleep or wake, and where it lives.
type SleepInput struct {
	Backend   string                `json:"backend"`
	Spec      backends.InstanceSpec `json:"spec"`
	Placement HostAssignment        `json:"placement"`
	Endpoint  string                `json:"endpoint,omitempty"`
	// LeaseID is the lease that holds the instance ("" for a warm member), for the audit log.
	LeaseID string `json:"leaseId,omitempty"`
	// ResumeTimeout bounds a wake: Resume and ready within it, or the instance is broken
	// (DefaultResumeTimeout when zero). Unused by a sleep.
	ResumeTimeout time.Duration `json:"resumeTimeout,omitempty"`
	// CertificatesMinRemaining: a wake re-issues the instance's certificates when they expire
	// within it (its lease's terms: poolspec.Policy.WakeCertificateMinimum; poolspec.DefaultRecycleBefore when zero).
	// Unused by a sleep.
	CertificatesMinRemaining time.Duration `json:"certificatesMinRemaining,omitempty"`
}

// WakeResult says how a wake went.
type WakeResult struct {
	// Duration is from the wake's start until the instance was ready again.
	Duration time.Duration `json:"duration"`
}

// Error types of the sleep and wake activities and workflows.
const (
	// ErrCannotSleep: the backend has no Sleeper capability (non-retryable).
	ErrCannotSleep = "CannotSleep"
	// ErrWakeFailed: the instance did not come back within its resume timeout; it is broken.
	ErrWakeFailed = "WakeFailed"
)

// Audit actions of sleeps and wakes (the instance's row changes with them).
const (
	ActionInstanceSleep      = "instance.sleep"
	ActionInstanceWake       = "instance.wake"
	ActionInstanceWakeFailed = "instance.wake_failed"
)

// Metrics of sleeps and wakes, by pool ("profile"), backend and outcome.
const (
	// MetricInstanceSleeps counts sleeps (outcome success, failure).
	MetricInstanceSleeps = "kobe_instance_sleeps_total"
	// MetricInstanceWakes counts wakes (outcome success, failure: a wake failure).
	MetricInstanceWakes = "kobe_instance_wakes_total"
	// MetricInstanceWakeDuration is a wake's start → ready (or failure), seconds.
	MetricInstanceWakeDuration = "kobe_instance_wake_duration_seconds"
)

// Sleep stops an instance's compute and keeps its state (backends.Sleeper), then records it
// Sleeping (row and audit event instance.sleep). A backend that cannot sleep fails it with
// ErrCannotSleep and changes nothing.
func Sleep(ctx workflow.Context, in SleepInput) error {
	var a *Activities
	req := BackendRequest{Backend: in.Backend, Spec: in.Spec}
	sctx := workflow.WithActivityOptions(ctx, sleepOptions(in.Placement.TaskQueue))
	err := workflow.ExecuteActivity(sctx, a.BackendSleep, req).Get(ctx, nil)
	sleepMetrics(ctx, in, err).Counter(MetricInstanceSleeps).Inc(1)
	if err != nil {
		return err
	}
	return recordSleep(ctx, in, api.InstanceSleeping, ActionInstanceSleep, "")
}

// Wake starts a sleeping instance again (backends.Sleeper Resume), re-issues its certificates
// when they expire within in.CertificatesMinRemaining (a cluster resumed after a long sleep is
// not handed back with expired certificates; wakeCertificates), and waits until it is ready,
// all within the resume timeout. Past it, or if the backend fails, or if its certificates
// expired and its backend cannot re-issue them, the instance is broken: it is recorded
// Unhealthy (audit event instance.wake_failed) and the wake fails with ErrWakeFailed. Its
// pool's health checks then see it as they see any broken member: a warm member is recycled
// and replaced, a leased one is reported to its lease.
func Wake(ctx workflow.Context, in SleepInput) (WakeResult, error) {
	var a *Activities
	started := workflow.Now(ctx)
	timeout := in.ResumeTimeout
	if timeout <= 0 {
		timeout = DefaultResumeTimeout
	}
	left := func() time.Duration { return timeout - workflow.Now(ctx).Sub(started) }
	req := BackendRequest{Backend: in.Backend, Spec: in.Spec}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, resumeOptions(in.Placement.TaskQueue, timeout)),
		a.BackendResume, req).Get(ctx, nil)
	if err == nil {
		err = wakeCertificates(ctx, in, left)
	}
	if err == nil {
		left := left()
		if left <= 0 {
			err = fmt.Errorf("resumed but no time left to wait until ready (resume timeout %s)", timeout)
		} else {
			var st backends.InstanceStatus
			err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitReadyOptions(in.Placement.TaskQueue, left)),
				a.BackendWaitReady, req).Get(ctx, &st)
		}
	}
	res := WakeResult{Duration: workflow.Now(ctx).Sub(started)}
	m := sleepMetrics(ctx, in, err)
	m.Counter(MetricInstanceWakes).Inc(1)
	m.Timer(MetricInstanceWakeDuration).Record(res.Duration)
	if err == nil {
		return res, recordSleep(ctx, in, api.InstanceReady, ActionInstanceWake, fmt.Sprintf("awake in %s", res.Duration))
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == ErrCannotSleep {
		return res, err // nothing was asleep: nothing broke
	}
	msg := fmt.Sprintf("did not wake within its resume timeout %s: %v", timeout, err)
	if errors.As(err, &ae) && ae.Type() == ErrCannotReissue {
		msg = "did not wake: " + ae.Message()
	}
	_ = recordSleep(ctx, in, api.InstanceUnhealthy, ActionInstanceWakeFailed, msg)
	return res, temporal.NewNonRetryableApplicationError(msg, ErrWakeFailed, err)
}

// WakeCertificateAction is what a wake does about the certificates of the instance it resumed.
type WakeCertificateAction string

const (
	// WakeCertificatesKeep: they are valid for long enough, or their expiry is unknown (a
	// backend that cannot say: its wait until ready is the judge).
	WakeCertificatesKeep WakeCertificateAction = "keep"
	// WakeCertificatesReissue: they expire within the minimum; the backend re-issues them in
	// place, from the same CA, before the instance is handed back.
	WakeCertificatesReissue WakeCertificateAction = "reissue"
	// WakeCertificatesExpired: they have expired and cannot be re-issued in place (the backend
	// cannot, or the CA itself has expired); the wake fails.
	WakeCertificatesExpired WakeCertificateAction = "expired"
)

// WakeCertificates decides, from the certificate state of an instance just resumed, what its
// wake does: re-issue the serving and admin certificates when they expire within minRemaining
// and the backend can (its CA still valid), fail the wake when they have expired and cannot be
// re-issued, and otherwise keep them. Certificates that expire soon but not yet and cannot be
// re-issued are kept: the certificate workflow warns the holder, as for any leased member.
func WakeCertificates(st CertificateState, now time.Time, minRemaining time.Duration) WakeCertificateAction {
	leaves := st.Expiry.Leaves()
	if leaves.IsZero() || leaves.Sub(now) > minRemaining {
		return WakeCertificatesKeep
	}
	if st.CanReissue && (st.Expiry.CA.IsZero() || st.Expiry.CA.After(now)) {
		return WakeCertificatesReissue
	}
	if !leaves.After(now) || (!st.Expiry.CA.IsZero() && !st.Expiry.CA.After(now)) {
		return WakeCertificatesExpired
	}
	return WakeCertificatesKeep
}

// wakeCertificates checks the certificates of an instance just resumed (CheckCertificates,
// which also records their expiry) and acts on WakeCertificates: a re-issue (cause "wake")
// within what is left of the resume timeout, or a non-retryable ErrCannotReissue.
func wakeCertificates(ctx workflow.Context, in SleepInput, left func() time.Duration) error {
	var a *Activities
	need := in.CertificatesMinRemaining
	if need <= 0 {
		need = poolspec.DefaultRecycleBefore
	}
	queue := in.Placement.TaskQueue
	var states []CertificateState
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, checkCertificatesOptions(queue, left())), a.CheckCertificates,
		CertificatesRequest{Backend: in.Backend, Pool: in.Spec.Pool, InstanceIDs: []string{in.Spec.ID}}).Get(ctx, &states)
	if err != nil || len(states) != 1 {
		return err
	}
	st := states[0]
	switch WakeCertificates(st, workflow.Now(ctx), need) {
	case WakeCertificatesExpired:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("its certificates expired at %s and the %s backend cannot re-issue them in place (%s)",
			st.Expiry.Earliest().UTC().Format(time.RFC3339), in.Backend, api.ReasonCertificatesExpiring), ErrCannotReissue, nil)
	case WakeCertificatesReissue:
		budget := left()
		if budget <= 0 {
			return fmt.Errorf("resumed but no time left to re-issue its certificates")
		}
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, waitReadyOptions(queue, budget)), a.ReissueCertificates,
			ReissueRequest{Backend: in.Backend, Pool: in.Spec.Pool, InstanceID: in.Spec.ID, LeaseID: in.LeaseID, Cause: CauseWake,
				MinRemaining: need}).Get(ctx, nil)
	}
	return nil
}

// CertificatesExpiredInSleep says whether a wake failed because the instance's certificates
// expired in its sleep and could not be re-issued (an ErrCannotReissue anywhere in err's chain:
// a wake's ErrWakeFailed wraps it).
func CertificatesExpiredInSleep(err error) bool {
	for err != nil {
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) {
			return false
		}
		if ae.Type() == ErrCannotReissue {
			return true
		}
		err = ae.Unwrap() // its cause
	}
	return false
}

func sleepMetrics(ctx workflow.Context, in SleepInput, err error) metricsHandler {
	outcome := "success"
	if err != nil {
		outcome = "failure"
	}
	return workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": in.Spec.Pool, "backend": in.Backend, "outcome": outcome})
}

func recordSleep(ctx workflow.Context, in SleepInput, phase api.InstancePhase, action, msg string) error {
	var a *Activities
	if in.LeaseID != "" && msg == "" {
		msg = "leased to " + in.LeaseID
	} else if in.LeaseID != "" {
		msg = fmt.Sprintf("leased to %s: %s", in.LeaseID, msg)
	}
	short := workflow.WithActivityOptions(ctx, StoreWriteOptions())
	return workflow.ExecuteActivity(short, a.RecordInstance, Record{ID: in.Spec.ID, Pool: in.Spec.Pool, Backend: in.Backend,
		Host: in.Placement.HostID, Phase: phase, Endpoint: in.Endpoint, Message: msg, Action: action}).Get(ctx, nil)
}

type metricsHandler = client.MetricsHandler
