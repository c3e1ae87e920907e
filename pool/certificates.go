package pool

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// The pool's part of the certificate workflow (CertificateSweep signals SignalCheckCertificates
// daily and at worker start): it reads its members' certificate expiry, one activity per host
// queue, and acts on what CertificatesChecked decides.

// SignalCheckCertificates asks a pool to check its members' certificates now.
const SignalCheckCertificates = "check-certificates"

// SignalInstanceCertificates goes from the pool to a lease whose member's certificates expire
// within the pool's recycleBefore and whose backend cannot re-issue them in place
// (CertificateReport); the lease shows it as its condition CertificatesValid.
const SignalInstanceCertificates = "instance-certificates"

// CertificateReport tells a lease when its member's certificates expire.
type CertificateReport struct {
	InstanceID string    `json:"instanceId"`
	ExpiresAt  time.Time `json:"expiresAt"`
	Message    string    `json:"message"`
	At         time.Time `json:"at"`
}

// RecycleCertExpiry is the recycle reason of a warm member whose certificates expire within
// recycleBefore; ReasonCertificatesExpiring the reason of the lease condition.
const (
	RecycleCertExpiry          = "cert_expiry"
	ReasonCertificatesExpiring = string(api.ReasonCertificatesExpiring)
)

// CheckCertificates is a certificate check to start: the members of one host queue.
type CheckCertificates struct {
	Queue   string
	IDs     []string
	Request instance.CertificatesRequest
}

// ReissueCertificates re-issues a Leased member's certificates in place
// (instance.Activities.ReissueCertificates, on its host queue); not awaited: the activity
// records, audits and counts its outcome.
type ReissueCertificates struct {
	Queue   string
	Request instance.ReissueRequest
}

// AuditCertificates appends the audit event of a decision about a member's certificates.
type AuditCertificates struct {
	Event instance.CertificateEvent
}

func (ReissueCertificates) action() {}
func (AuditCertificates) action()   {}

// recycleBefore is the policy's, or the default for policies written before it existed.
func (s *State) recycleBefore() time.Duration {
	if s.Policy.RecycleBefore > 0 {
		return s.Policy.RecycleBefore
	}
	return poolspec.DefaultRecycleBefore
}

// CertificateCheckRequested notes that the certificate workflow asked for a check.
func (s *State) CertificateCheckRequested() { s.CertificateCheckDue = true }

// CertificateChecksDue says, once a check was asked for, which checks to start: one per host
// queue of the Ready and Leased members. A queue whose check is still in flight is skipped.
func (s *State) CertificateChecksDue(inFlight map[string]bool) []CheckCertificates {
	if !s.CertificateCheckDue {
		return nil
	}
	s.CertificateCheckDue = false
	byQueue := map[string][]string{}
	var queues []string
	for _, m := range s.sortedMembers() {
		if (m.Phase != MemberReady && m.Phase != MemberLeased) || inFlight[m.Placement.TaskQueue] {
			continue
		}
		q := m.Placement.TaskQueue
		if _, ok := byQueue[q]; !ok {
			queues = append(queues, q)
		}
		byQueue[q] = append(byQueue[q], m.ID)
	}
	var due []CheckCertificates
	for _, q := range queues {
		due = append(due, CheckCertificates{Queue: q, IDs: byQueue[q],
			Request: instance.CertificatesRequest{Backend: s.Policy.Backend, Pool: s.Policy.Name, InstanceIDs: byQueue[q]}})
	}
	return due
}

// CertificatesChecked acts on the certificate expiry of members: a Ready member whose
// certificates expire within recycleBefore is recycled (and replaced); a Leased one gets new
// certificates in place when its backend can re-issue them and its CA outlives recycleBefore
// (the CA is kept: kubeconfigs issued keep working), and otherwise its lease is told once (the
// member is torn down at its release, as every released member is). Unknown expiry changes
// nothing.
func (s *State) CertificatesChecked(states []instance.CertificateState, fx Executor) {
	before := s.recycleBefore()
	for _, st := range states {
		m, ok := s.Members[st.InstanceID]
		exp := st.Expiry.Earliest()
		if !ok || exp.IsZero() || exp.Sub(fx.Now()) > before {
			continue
		}
		ev := instance.CertificateEvent{Action: instance.ActionCertificatesExpiring, Pool: s.Policy.Name, InstanceID: m.ID,
			LeaseID: m.LeaseID, ExpiresAt: exp}
		switch {
		case m.Phase == MemberReady:
			ev.Decision = "recycled"
			fx.Send(AuditCertificates{Event: ev})
			s.teardown(m, RecycleCertExpiry, fx)
		case m.Phase == MemberLeased && st.CanReissue && st.Expiry.CA.Sub(fx.Now()) > before:
			fx.Send(ReissueCertificates{Queue: m.Placement.TaskQueue, Request: instance.ReissueRequest{Backend: s.Policy.Backend,
				Pool: s.Policy.Name, InstanceID: m.ID, LeaseID: m.LeaseID, Cause: instance.CauseExpiring}})
		case m.Phase == MemberLeased && !m.CertificatesWarned:
			m.CertificatesWarned = true
			ev.Decision = "holder warned; recycled at release"
			fx.Send(AuditCertificates{Event: ev})
			report := CertificateReport{InstanceID: m.ID, ExpiresAt: exp, At: fx.Now(),
				Message: fmt.Sprintf("the certificates of instance %s expire at %s and cannot be re-issued in place: release the lease and take another before then",
					m.ID, exp.UTC().Format(time.RFC3339))}
			_ = fx.Do(SignalLease{LeaseID: m.LeaseID, Signal: SignalInstanceCertificates, Arg: report})
		}
	}
}

// certCheck is one CheckCertificates activity in flight.
type certCheck struct {
	CheckCertificates
	future workflow.Future
}

// startCertificateChecks starts the certificate checks that are due.
func (p *poolRun) startCertificateChecks() {
	inFlight := queuesBusy(p.certChecks, func(c *certCheck) string { return c.Queue })
	var a *instance.Activities
	for _, c := range p.s.CertificateChecksDue(inFlight) {
		ctx := workflow.WithActivityOptions(p.ctx, certificateOptions(c.Queue, time.Minute+time.Duration(len(c.IDs))*10*time.Second))
		f := workflow.ExecuteActivity(ctx, a.CheckCertificates, c.Request)
		p.certChecks = append(p.certChecks, &certCheck{CheckCertificates: c, future: f})
	}
}

// certificatesChecked acts on a finished check; one that failed is dropped (the next daily
// run checks again).
func (p *poolRun) certificatesChecked(c *certCheck, f workflow.Future) {
	p.certChecks = withoutCheck(p.certChecks, c)
	var states []instance.CertificateState
	if err := f.Get(p.ctx, &states); err != nil {
		workflow.GetLogger(p.ctx).Warn("certificate check failed", "queue", c.Queue, "error", err)
		return
	}
	p.s.CertificatesChecked(states, p)
}

// certificateOptions: a check or a re-issue on a member's host; a re-issue restarts an API
// server, so it gets minutes, and a few attempts.
func certificateOptions(queue string, timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToCloseTimeout: timeout,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
	}
}
