package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Certificate vocabulary: metrics, audit actions and the error type of a backend that cannot
// re-issue.
const (
	// MetricCertReissues counts re-issues of a member's certificates in place, by pool
	// ("profile"), cause (expiring, wake) and result (ok, failed).
	MetricCertReissues = "kobe_instance_cert_reissues_total"
	// ActionCertificatesReissued is the audit action of a re-issue (Result ok or failed).
	ActionCertificatesReissued = "instance.certificates_reissued"
	// ActionCertificatesExpiring is the audit action of a member whose certificates expire
	// within the pool's recycleBefore: recycled (warm), or its holder warned (leased, on a
	// backend that cannot re-issue).
	ActionCertificatesExpiring = "instance.certificates_expiring"
	// ErrCannotReissue is the non-retryable error type of ReissueCertificates on a backend
	// that is no backends.CertManager.
	ErrCannotReissue = "CannotReissueCertificates"
)

// Causes of a re-issue (ReissueRequest.Cause; the cause label of MetricCertReissues).
const (
	// CauseExpiring: the certificate workflow found a leased member's certificates expiring
	// within its pool's recycleBefore.
	CauseExpiring = "expiring"
	// CauseWake: a member woken after a long sleep had certificates expiring within its
	// pool's minimum (poolspec.Policy.WakeCertificateMinimum).
	CauseWake = "wake"
)

// CertificatesRequest asks when the certificates of some members of one pool, all on one host,
// expire.
type CertificatesRequest struct {
	Backend     string   `json:"backend"`
	Pool        string   `json:"pool"`
	InstanceIDs []string `json:"instanceIds"`
}

// CertificateState is when one member's certificates expire, and whether its backend can
// re-issue them in place. A zero Expiry is unknown (the backend cannot say, or failed to).
type CertificateState struct {
	InstanceID string                     `json:"instanceId"`
	Expiry     backends.CertificateExpiry `json:"expiry"`
	CanReissue bool                       `json:"canReissue"`
	// Message says why the expiry is unknown.
	Message string `json:"message,omitempty"`
}

// CheckCertificates reads each member's certificate expiry from its backend and records it in
// the store (kobe_instance_cert_expiry_seconds). One member that cannot answer does not fail
// the others: its state is unknown, and the pool does nothing about it this time.
func (a *Activities) CheckCertificates(ctx context.Context, req CertificatesRequest) ([]CertificateState, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return nil, err
	}
	cm, ok := b.(backends.CertManager)
	out := make([]CertificateState, 0, len(req.InstanceIDs))
	for _, id := range req.InstanceIDs {
		st := CertificateState{InstanceID: id, CanReissue: ok}
		if !ok {
			st.Message = fmt.Sprintf("the %s backend cannot report its certificates", req.Backend)
			out = append(out, st)
			continue
		}
		e, err := cm.CertificateExpiry(ctx, id)
		if err == nil {
			err = a.recordCertificates(ctx, req.Pool, id, e)
		}
		if err != nil {
			st.Message = truncate(err.Error(), 300)
		} else {
			st.Expiry = e
		}
		out = append(out, st)
	}
	return out, nil
}

func (a *Activities) recordCertificates(ctx context.Context, pool, id string, e backends.CertificateExpiry) error {
	return a.Store.PutInstanceCertificates(ctx, store.InstanceCertificates{InstanceID: id, Pool: pool, CA: e.CA, Serving: e.Serving, Client: e.Client})
}

// recordCreatedCertificates records a new Ready instance's certificate expiry, where its
// backend knows it. A failure is logged, not returned: the certificate workflow records it on
// its next run, and a member must not fail over its metric.
func (a *Activities) recordCreatedCertificates(ctx context.Context, b backends.RuntimeBackend, spec backends.InstanceSpec) {
	cm, ok := b.(backends.CertManager)
	if !ok {
		return
	}
	e, err := cm.CertificateExpiry(ctx, spec.ID)
	if err == nil {
		err = a.recordCertificates(ctx, spec.Pool, spec.ID, e)
	}
	if err != nil {
		activity.GetLogger(ctx).Warn("the certificate expiry of a new instance was not recorded", "instance", spec.ID, "error", err)
	}
}

// ReissueRequest asks for new certificates of one member, in place (same CA).
type ReissueRequest struct {
	Backend    string `json:"backend"`
	Pool       string `json:"pool"`
	InstanceID string `json:"instanceId"`
	// LeaseID is the member's holder, for the audit event ("" when none).
	LeaseID string `json:"leaseId,omitempty"`
	// Cause is the metric's and the audit event's word for why: CauseExpiring (the
	// certificate workflow) or CauseWake (a member woken after a long sleep).
	Cause string `json:"cause"`
	// MinRemaining: re-issue only if the serving or admin certificate expires within it (0:
	// always). Every wake passes the minimum its lease's terms carry (its pool's
	// poolspec.Policy.WakeCertificateMinimum), so that a member woken with
	// valid certificates is not restarted for nothing.
	MinRemaining time.Duration `json:"minRemaining,omitempty"`
}

// ReissueResult says whether the certificates were re-issued and when they expire now.
type ReissueResult struct {
	Reissued bool                       `json:"reissued"`
	Expiry   backends.CertificateExpiry `json:"expiry"`
}

// ReissueCertificates re-issues a member's serving and admin certificates from the same CA
// (backends.CertManager), waits until the member serves again, records the new expiry and
// audits the re-issue; the metric MetricCertReissues counts it. Kubeconfigs already issued
// keep working: their CA and client certificates are unchanged. On a sleeping member it only
// writes the new certificates (the local backend): waking it is the caller's. It is what the
// wake path calls on a member resumed after a long sleep (Cause "wake", MinRemaining the pool's
// WakeCertificateMinimum). A backend that cannot re-issue is a non-retryable ErrCannotReissue.
func (a *Activities) ReissueCertificates(ctx context.Context, req ReissueRequest) (ReissueResult, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return ReissueResult{}, err
	}
	cm, ok := b.(backends.CertManager)
	if !ok {
		return ReissueResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the %s backend cannot re-issue certificates in place", req.Backend), ErrCannotReissue, nil)
	}
	before, err := cm.CertificateExpiry(ctx, req.InstanceID)
	if errors.Is(err, backends.ErrNotFound) {
		return ReissueResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "InstanceNotFound", err)
	}
	if err != nil {
		return ReissueResult{}, err
	}
	if req.MinRemaining > 0 && time.Until(before.Leaves()) > req.MinRemaining {
		return ReissueResult{Expiry: before}, a.recordCertificates(ctx, req.Pool, req.InstanceID, before)
	}
	defer keepHeartbeating(ctx, "re-issuing certificates")()
	err = cm.RotateCertificates(ctx, req.InstanceID)
	var st backends.InstanceStatus
	if err == nil {
		st, err = b.Status(ctx, req.InstanceID)
		if err == nil && st.Phase != backends.PhaseSleeping {
			_, err = b.WaitReady(ctx, req.InstanceID, nil)
		}
	}
	var after backends.CertificateExpiry
	if err == nil {
		after, err = cm.CertificateExpiry(ctx, req.InstanceID)
	}
	if err == nil {
		err = a.recordCertificates(ctx, req.Pool, req.InstanceID, after)
	}
	result := "ok"
	detail := map[string]any{"cause": req.Cause, "leaseId": req.LeaseID, "before": before, "after": after}
	if err != nil {
		result = "failed"
		detail["error"] = truncate(err.Error(), 300)
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": req.Pool, "cause": req.Cause, "result": result}).
		Counter(MetricCertReissues).Inc(1)
	if aerr := a.auditCertificates(ctx, ActionCertificatesReissued, req.Pool, req.InstanceID, result, detail); aerr != nil && err == nil {
		err = aerr
	}
	if err != nil {
		return ReissueResult{}, err
	}
	return ReissueResult{Reissued: true, Expiry: after}, nil
}

// CertificateEvent is an audit event about a member's certificates the pool decided on.
type CertificateEvent struct {
	Action     string    `json:"action"`
	Pool       string    `json:"pool"`
	InstanceID string    `json:"instanceId"`
	LeaseID    string    `json:"leaseId,omitempty"`
	ExpiresAt  time.Time `json:"expiresAt"`
	// Decision says what the pool does about it ("recycled", "holder warned").
	Decision string `json:"decision"`
}

// RecordCertificateEvent appends the audit event of a pool's decision about a member's
// certificates. Its key makes a retried activity write it once.
func (a *Activities) RecordCertificateEvent(ctx context.Context, e CertificateEvent) error {
	detail := map[string]any{"leaseId": e.LeaseID, "expiresAt": e.ExpiresAt, "decision": e.Decision}
	data, _ := json.Marshal(detail)
	_, err := a.Store.AppendEvent(ctx, store.Event{Actor: "kobe", Action: e.Action, Target: e.InstanceID, Pool: e.Pool, Result: "ok",
		Detail: data, Key: fmt.Sprintf("%s/%s/%s/%d", e.Action, e.InstanceID, e.Decision, e.ExpiresAt.Unix())})
	return err
}

func (a *Activities) auditCertificates(ctx context.Context, action, pool, id, result string, detail map[string]any) error {
	data, _ := json.Marshal(detail)
	_, err := a.Store.AppendEvent(ctx, store.Event{Actor: "kobe", Action: action, Target: id, Pool: pool, Result: result, Detail: data})
	return err
}
