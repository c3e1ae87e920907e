// Package lease is the lease workflow: it claims an instance from its pool, issues the
// lease's own credential, holds the instance until the lease is released, expires or goes
// idle, then revokes the credential and gives the instance back. Extensions are Updates,
// validated before they are accepted.
package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease/leasestart"
	"github.com/kunobi-ninja/kobe/pool"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// WorkflowName is the registered name of the lease workflow (the pool starts it by this name
// on a warm bind).
const WorkflowName = leasestart.WorkflowType

// Lease signals, update and query.
const (
	SignalReleaseLease = "release-lease" // from the API: the user is done
	// SignalHeartbeat tells a lease with an idle timeout that its user is still there.
	SignalHeartbeat = "heartbeat"
	UpdateExtend    = "extend" // ExtendRequest → ExtendResult
	// UpdateWaitBound returns the View once the lease is no longer Pending: a client
	// waits for its kubeconfig without polling (also as update-with-start).
	UpdateWaitBound = "wait-bound"
	QueryLease      = "lease" // → View
)

// Input, Resume and View are defined with the lease workflow's type and id in leasestart, below
// pool, so that the pool starts a lease with a typed Input.
type (
	Input  = leasestart.Input
	Resume = leasestart.Resume
	View   = leasestart.View
)

// leaseContinueAsNewAfter is the default history length at which a Bound lease continues as new.
const leaseContinueAsNewAfter = 5000

// ExtendRequest adds By to the lease's expiry.
type ExtendRequest struct {
	By time.Duration `json:"by"`
}

// ExtendResult is the new expiry.
type ExtendResult struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// ExtendRejection is the error type of a refused extension; its message is the reason code.
const ExtendRejection = "ExtendRejected"

// Lease claims an instance from its pool, issues the lease's credentials, holds the instance
// until its TTL (extendable within budget and ceiling) or a release, then hands it back to the
// pool, which tears it down: an instance is never reused. What the lease decides is State's
// (state.go); this carries it out.
func Lease(ctx workflow.Context, in Input) (View, error) {
	st := NewState(in)
	r := &leaseRun{ctx: ctx, in: in, st: st}
	resumed := in.Resume != nil
	// A lease the pool bound (a warm bind) starts Bound.
	warm := in.Bound != nil && !resumed
	if err := r.registerWaits(); err != nil {
		return st.View, err
	}
	var pendingRecorded workflow.Future
	if !resumed && !warm {
		// The claim goes out at once and the Pending row is written meanwhile: the projection
		// is not on the bind path.
		pendingRecorded = r.projectAsync()
	}
	r.metrics = workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": in.Pool})
	// The extend, sleep and wake handlers exist from the start (their validators refuse until
	// Bound): a client that sees Bound — by query or by the wait-bound update — can extend at once.
	if err := r.registerUpdates(); err != nil {
		return st.View, err
	}
	r.release = workflow.GetSignalChannel(ctx, SignalReleaseLease)
	r.assigned = workflow.GetSignalChannel(ctx, pool.SignalAssigned)
	r.failed = workflow.GetSignalChannel(ctx, pool.SignalClaimFailed)

	switch {
	case warm:
		if !r.ensureWarmBound() {
			return st.View, nil
		}
	case !resumed:
		if bound, err := r.claimAndBind(pendingRecorded); !bound {
			return st.View, err
		}
	case in.SearchAttributes:
		// A new run: the phase it shows in the Web UI is the one it carries on.
		r.showPhase()
	}

	b := r.holder()
	st.Hold()
	if b.hold() {
		next := in
		next.Resume = st.Resume()
		return st.View, workflow.NewContinueAsNewError(ctx, WorkflowName, next)
	}
	return st.View, r.end()
}

// leaseRun is one run of a lease's workflow: its state, and what carries its decisions out.
type leaseRun struct {
	ctx     workflow.Context
	in      Input
	st      *State
	metrics metricsHandler
	// abandonExtension cancels the issuance of the extension under way (nil when none).
	abandonExtension          workflow.CancelFunc
	release, assigned, failed workflow.ReceiveChannel
}

// registerWaits registers the query and the wait-bound Update.
func (r *leaseRun) registerWaits() error {
	if err := workflow.SetQueryHandler(r.ctx, QueryLease, func() (View, error) { return r.st.View, nil }); err != nil {
		return err
	}
	return workflow.SetUpdateHandler(r.ctx, UpdateWaitBound, func(ctx workflow.Context) (View, error) {
		err := workflow.Await(ctx, func() bool { return r.st.View.Phase != api.LeasePending })
		return r.st.View, err
	})
}

// registerUpdates registers the extend Update (validated by State.ExtendRefusal: a refused
// Update leaves no event, and validators do not run on replay), and the sleep and wake ones.
func (r *leaseRun) registerUpdates() error {
	if err := workflow.SetUpdateHandlerWithOptions(r.ctx, UpdateExtend, r.extend,
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, req ExtendRequest) error {
			return extendRejection(r.st.ExtendRefusal(req.By))
		}}); err != nil {
		return err
	}
	return r.registerSleep()
}

// extend carries an extension out: after the extensions before it, it issues a credential that
// expires with the lease's new expiry, then commits (State.BeginExtension, ExtensionIssued).
// The lease may expire or be released while it issues: the issuance is then cancelled (end).
func (r *leaseRun) extend(ctx workflow.Context, req ExtendRequest) (ExtendResult, error) {
	st := r.st
	if err := workflow.Await(ctx, func() bool { return !st.Extending() }); err != nil {
		return ExtendResult{}, err
	}
	// Another extension may have run meanwhile, or the lease fallen asleep: decide on the
	// state as it is now.
	next, refused := st.BeginExtension(req.By)
	if refused != "" {
		return ExtendResult{}, extendRejection(refused)
	}
	// The issuance runs in a context the lease cancels when it ends under it (it is not
	// cancelled otherwise).
	ictx, abandon := workflow.WithCancel(ctx)
	r.abandonExtension = abandon
	defer func() { st.EndExtension(); r.abandonExtension = nil }()
	if err := r.issueUntil(ictx, next); err != nil {
		if refused := st.ExtensionFailed(IsInstanceSleeping(err)); refused != "" {
			return ExtendResult{}, extendRejection(refused)
		}
		return ExtendResult{}, err
	}
	if refused := st.ExtensionIssued(next, workflow.Now(ctx)); refused != "" {
		return ExtendResult{}, extendRejection(refused)
	}
	r.claimEvent("extended")
	return ExtendResult{ExpiresAt: st.View.ExpiresAt}, nil
}

// extendRejection is the error of a refused extension ("": none).
func extendRejection(reason api.ReasonCode) error {
	if reason == "" {
		return nil
	}
	return temporal.NewApplicationError(string(reason), ExtendRejection)
}

// ensureWarmBound makes sure a warm-bound lease has its credential and its Bound row: the API
// minted and wrote them before it answered; if it died in between, this does. In the lease's
// first workflow task, as a local activity: the bound lease's first task is its only one until
// it ends or is extended. It says whether the lease goes on to hold its member.
func (r *leaseRun) ensureWarmBound() bool {
	lctx := workflow.WithLocalActivityOptions(r.ctx, bindLocalOptions())
	err := workflow.ExecuteLocalActivity(lctx, ActivityEnsureLeaseBound, BoundLease{
		Lease: r.st.View, NotAfter: r.st.View.BoundAt.Add(r.in.MaxTTL),
	}).Get(r.ctx, nil)
	if err != nil {
		r.st.Fail(api.ReasonBackendError)
		r.showPhase()
		r.claimEvent("failed")
		r.project()
		r.revoke()
		giveBack(r.ctx, r.in, r.st.asg.InstanceID, "credentials failed")
		return false
	}
	// Claimed and bound in the same instant of workflow time (the pool's Update).
	r.metrics.Timer(MetricClaimBindDuration).Record(0)
	r.claimEvent("created_fast")
	return true
}

// claimAndBind claims a member of the pool, waits for it and issues the lease's credential. It
// says whether the lease is Bound; an error when the pool could not be asked.
func (r *leaseRun) claimAndBind(pendingRecorded workflow.Future) (bool, error) {
	ctx, st := r.ctx, r.st
	st.Claimed(workflow.Now(ctx))
	claimErr := workflow.SignalExternalWorkflow(ctx, pool.WorkflowID(r.in.Pool), "", pool.SignalClaim,
		pool.ClaimRequest{LeaseID: r.in.LeaseID, Priority: r.in.Priority, At: st.View.ClaimedAt}).Get(ctx, nil)
	if pendingRecorded != nil {
		_ = pendingRecorded.Get(ctx, nil)
	}
	if err := claimErr; err != nil {
		st.Fail(api.ReasonNotFound)
		r.showPhase()
		r.claimEvent("failed")
		r.project()
		return false, fmt.Errorf("pool %s: %w", r.in.Pool, err)
	}

	for st.Waiting() {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(r.assigned, func(c workflow.ReceiveChannel, _ bool) {
			var asg pool.Assignment
			c.Receive(ctx, &asg)
			st.Assigned(asg)
		})
		sel.AddReceive(r.failed, func(c workflow.ReceiveChannel, _ bool) {
			var f pool.ClaimFailure
			c.Receive(ctx, &f)
			st.Fail(api.ReasonCode(f.Reason))
		})
		sel.AddReceive(r.release, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			st.Release()
		})
		sel.Select(ctx)
	}
	if st.View.Phase != api.LeasePending {
		r.showPhase()
		r.claimEvent(st.EndEvent())
		// Failed or released while waiting: the pool forgets the claim.
		_ = workflow.SignalExternalWorkflow(ctx, pool.WorkflowID(r.in.Pool), "", pool.SignalCancelClaim, r.in.LeaseID).Get(ctx, nil)
		// An assignment racing with the cancellation is handed straight back.
		var late pool.Assignment
		if r.assigned.ReceiveAsync(&late) {
			giveBack(ctx, r.in, late.InstanceID, "cancelled")
		}
		r.project()
		return false, nil
	}

	// Bound: issue credentials for exactly this lease, valid for its TTL.
	expiresAt := st.Bind(workflow.Now(ctx))
	if err := r.issueUntil(ctx, expiresAt); err != nil {
		st.Fail(api.ReasonBackendError)
		r.showPhase()
		r.claimEvent("failed")
		r.project()
		giveBack(ctx, r.in, st.asg.InstanceID, "credentials failed")
		return false, nil
	}
	st.Bound()
	r.showPhase()
	r.project()
	r.metrics.Timer(MetricClaimBindDuration).Record(workflow.Now(ctx).Sub(st.View.ClaimedAt))
	if st.asg.Queued {
		r.claimEvent("created_queued")
	} else {
		r.claimEvent("created_fast")
	}
	// The bind, once recorded, is the holder's first sign of life (the idle timeout's).
	st.Heartbeat(workflow.Now(ctx))
	return true, nil
}

// end carries out the end of a lease that was held: it abandons an extension still issuing,
// waits for a sleep or wake under way, revokes the credential and gives the member back.
func (r *leaseRun) end() error {
	st := r.st
	if r.abandonExtension != nil && st.AbandonExtension() {
		r.abandonExtension()
	}
	// An extension that was issuing when the lease ended has stored its credential by now (or
	// was abandoned): the revocation below is the last word.
	if err := workflow.Await(r.ctx, st.Settled); err != nil {
		return err
	}
	if st.Abandoned() {
		r.showPhase()
		r.project()
	}
	// Revoke first so the credential dies at once, then hand the instance back for teardown.
	if st.Revokes() {
		r.revoke()
	}
	giveBack(r.ctx, r.in, st.asg.InstanceID, string(st.View.Phase))
	r.showPhase()
	r.claimEvent(st.EndEvent())
	r.project()
	return nil
}

// projectAsync writes the lease's row (RecordLease); project waits for it.
func (r *leaseRun) projectAsync() workflow.Future {
	var a *Activities
	short := workflow.WithActivityOptions(r.ctx, instance.StoreWriteOptions())
	return workflow.ExecuteActivity(short, a.RecordLease, r.st.View)
}

func (r *leaseRun) project() { _ = r.projectAsync().Get(r.ctx, nil) }

// showPhase shows the lease's phase in its search attribute KobePhase, when it has them.
func (r *leaseRun) showPhase() {
	if !r.in.SearchAttributes {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, SearchAttributePhase.ValueSet(string(r.st.View.Phase))); err != nil {
		workflow.GetLogger(r.ctx).Warn("cannot update the lease's search attributes", "error", err)
	}
}

func (r *leaseRun) claimEvent(event string) {
	r.metrics.WithTags(map[string]string{"event": event}).Counter(MetricClaims).Inc(1)
}

// issueUntil issues a credential for this lease expiring at expiresAt, on the instance's host
// (it replaces the stored one), unless the lease's credential needs none.
func (r *leaseRun) issueUntil(ctx workflow.Context, expiresAt time.Time) error {
	if !r.st.NeedsCredential() {
		return nil
	}
	var a *Activities
	asg := r.st.asg
	hctx := workflow.WithActivityOptions(ctx, credentialOptions(asg.Placement.TaskQueue, r.st.issueFor))
	return workflow.ExecuteActivity(hctx, a.IssueLeaseCredentials, CredentialRequest{
		LeaseID: r.in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID, ExpiresAt: expiresAt,
	}).Get(ctx, nil)
}

// revoke revokes the lease's credential on the instance's host.
func (r *leaseRun) revoke() {
	var a *Activities
	asg := r.st.asg
	revokeCtx := workflow.WithActivityOptions(r.ctx, credentialOptions(asg.Placement.TaskQueue, r.st.issueFor))
	_ = workflow.ExecuteActivity(revokeCtx, a.RevokeLeaseCredentials, CredentialRequest{
		LeaseID: r.in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID}).Get(r.ctx, nil)
}

// audit records a change of one of the lease's conditions (RecordLeaseCondition).
func (r *leaseRun) audit(ctx workflow.Context, c api.LeaseCondition) {
	var a *Activities
	short := workflow.WithActivityOptions(ctx, instance.StoreWriteOptions())
	v := &r.st.View
	_ = workflow.ExecuteActivity(short, a.RecordLeaseCondition, ConditionChange{LeaseID: v.ID, Pool: v.Pool,
		InstanceID: v.InstanceID, Condition: c, At: workflow.Now(ctx)}).Get(ctx, nil)
}

// holder is the hold of the lease's member, with the signals it takes.
func (r *leaseRun) holder() *boundLease {
	b := &boundLease{leaseRun: r, heartbeat: workflow.GetSignalChannel(r.ctx, SignalHeartbeat),
		unhealthy: workflow.GetSignalChannel(r.ctx, pool.SignalInstanceUnhealthy),
		synced:    workflow.GetSignalChannel(r.ctx, pool.SignalInstanceSync),
		certs:     workflow.GetSignalChannel(r.ctx, pool.SignalInstanceCertificates),
		leftovers: []workflow.ReceiveChannel{r.failed}}
	if r.in.AfterInactivity > 0 {
		b.auto = &autoSleep{signals: workflow.GetSignalChannel(r.ctx, SignalActivity)}
	}
	return b
}

// boundLease holds a Bound lease until it ends or its run should continue as new. Heartbeats
// and extensions only move lastSeen and ExpiresAt: the timers are re-armed when they fire, not
// on every signal, so a burst of heartbeats costs its signals and nothing more.
type boundLease struct {
	*leaseRun
	heartbeat workflow.ReceiveChannel
	unhealthy workflow.ReceiveChannel
	// synced receives the pool's sync reports.
	synced workflow.ReceiveChannel
	// certs receives SignalInstanceCertificates.
	certs     workflow.ReceiveChannel
	leftovers []workflow.ReceiveChannel
	// auto checks the lease's inactivity (nil without Input.AfterInactivity).
	auto *autoSleep
	// ttlTimer and idleTimer run until the lease's expiry and its idle timeout (nil: not armed).
	ttlTimer, idleTimer workflow.Future
	// events is a lower bound of this run's history length (signals and timers), for when the
	// server's count is not known.
	events int
}

// hold returns true when the run should continue as new (every signal taken, every handler
// finished), false once the lease has ended.
func (b *boundLease) hold() bool {
	ctx, st := b.ctx, b.st
	threshold := b.in.ContinueAsNewAfter
	if threshold <= 0 {
		threshold = leaseContinueAsNewAfter
	}
	projected := st.View.ExpiresAt
	for st.View.Phase == api.LeaseBound {
		now := workflow.Now(ctx)
		if st.Expire(now) {
			break
		}
		if b.auto != nil && b.auto.due && st.MayCheckInactivity() {
			b.auto.check(b)
			continue
		}
		if !projected.Equal(st.View.ExpiresAt) {
			projected = st.View.ExpiresAt
			b.project()
			continue
		}
		if !st.Extending() && b.continueAsNew(threshold) {
			if !workflow.AllHandlersFinished(ctx) {
				_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
				continue
			}
			if b.drain() {
				continue
			}
			return true
		}
		if d := st.untilExpiry(now); b.ttlTimer == nil && d > 0 {
			b.ttlTimer = workflow.NewTimer(ctx, d)
			b.events += 2
		}
		if d := st.untilIdle(now); b.idleTimer == nil && d > 0 {
			b.idleTimer = workflow.NewTimer(ctx, d)
			b.events += 2
		}
		if b.auto != nil && b.auto.arm(b) && st.MayCheckInactivity() {
			continue // a check is due now
		}
		b.wait(projected)
	}
	return false
}

// wait waits for the next thing that may change what the hold does: a timer, a signal, or a
// change that an Update made (an extension starting or ending, a new expiry to project, a
// sleep or wake).
func (b *boundLease) wait(projected time.Time) {
	ctx, st := b.ctx, b.st
	wctx, cancel := workflow.WithCancel(ctx)
	sel := workflow.NewSelector(ctx)
	if b.ttlTimer != nil {
		sel.AddFuture(b.ttlTimer, func(workflow.Future) { b.ttlTimer = nil })
	}
	if b.idleTimer != nil {
		sel.AddFuture(b.idleTimer, func(workflow.Future) { b.idleTimer = nil })
	}
	sel.AddReceive(b.release, func(c workflow.ReceiveChannel, _ bool) { b.takeRelease(c) })
	sel.AddReceive(b.heartbeat, func(c workflow.ReceiveChannel, _ bool) { b.takeHeartbeats(c) })
	sel.AddReceive(b.unhealthy, func(c workflow.ReceiveChannel, _ bool) { b.takeUnhealthy(c) })
	sel.AddReceive(b.synced, func(c workflow.ReceiveChannel, _ bool) { b.takeSynced(c) })
	sel.AddReceive(b.certs, func(c workflow.ReceiveChannel, _ bool) { b.takeCertificates(c) })
	sel.AddReceive(b.assigned, func(c workflow.ReceiveChannel, _ bool) { b.takeAssigned(c) })
	for _, ch := range b.leftovers {
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { b.takeLeftover(c) })
	}
	if b.auto != nil {
		if b.auto.timer != nil {
			sel.AddFuture(b.auto.timer, func(workflow.Future) { b.auto.timer, b.auto.due = nil, true })
		}
		sel.AddReceive(b.auto.signals, func(c workflow.ReceiveChannel, _ bool) { b.auto.take(b, c) })
	}
	wasExtending, wasSleeping, wasBusy := st.Extending(), st.View.Sleeping, st.SleepBusy()
	sel.AddFuture(waitChanged(wctx, func() bool {
		// A lease that checks its inactivity re-arms its check when it wakes, and runs a
		// due check once a sleep or wake is over.
		slept := b.auto != nil && (st.View.Sleeping != wasSleeping || st.SleepBusy() != wasBusy)
		return st.Extending() != wasExtending || !st.View.ExpiresAt.Equal(projected) || slept
	}), func(workflow.Future) {})
	sel.Select(ctx)
	cancel()
}

func (b *boundLease) continueAsNew(threshold int) bool {
	info := workflow.GetInfo(b.ctx)
	return info.GetContinueAsNewSuggested() || max(info.GetCurrentHistoryLength(), b.events) >= threshold
}

// drain takes every signal already delivered, so that none is lost with this run; it says
// whether there was any.
func (b *boundLease) drain() bool {
	got := false
	channels := []workflow.ReceiveChannel{b.release, b.heartbeat, b.unhealthy, b.assigned, b.synced, b.certs}
	if b.auto != nil {
		channels = append(channels, b.auto.signals)
	}
	for _, ch := range append(channels, b.leftovers...) {
		for ch.Len() > 0 {
			got = true
			switch ch {
			case b.release:
				b.takeRelease(ch)
			case b.heartbeat:
				b.takeHeartbeats(ch)
			case b.unhealthy:
				b.takeUnhealthy(ch)
			case b.synced:
				b.takeSynced(ch)
			case b.certs:
				b.takeCertificates(ch)
			case b.assigned:
				b.takeAssigned(ch)
			case b.auto.signalsOrNil():
				b.auto.take(b, ch)
			default:
				b.takeLeftover(ch)
			}
		}
	}
	return got
}

func (b *boundLease) takeRelease(c workflow.ReceiveChannel) {
	c.Receive(b.ctx, nil)
	b.events++
	b.st.Release()
}

// takeHeartbeats coalesces a burst: every heartbeat waiting counts as one.
func (b *boundLease) takeHeartbeats(c workflow.ReceiveChannel) {
	c.Receive(b.ctx, nil)
	b.events++
	for c.ReceiveAsync(nil) {
		b.events++
	}
	b.st.Heartbeat(workflow.Now(b.ctx))
}

// takeUnhealthy records that the lease's instance failed its health checks
// (State.UnhealthyCondition).
func (b *boundLease) takeUnhealthy(c workflow.ReceiveChannel) {
	var r pool.HealthReport
	c.Receive(b.ctx, &r)
	b.events++
	if cond, ours := b.st.UnhealthyCondition(r, workflow.Now(b.ctx)); ours && b.setCondition(cond) {
		b.metrics.Counter(MetricLeaseInstanceUnhealthy).Inc(1)
	}
}

// takeSynced records what the lease's instance could not sync onto its host
// (State.SyncCondition).
func (b *boundLease) takeSynced(c workflow.ReceiveChannel) {
	var r pool.SyncReport
	c.Receive(b.ctx, &r)
	b.events++
	if cond, ours := b.st.SyncCondition(r, workflow.Now(b.ctx)); ours {
		b.setCondition(cond)
	}
}

// takeCertificates records that the lease's instance's certificates expire soon and cannot be
// re-issued in place (State.CertificatesCondition).
func (b *boundLease) takeCertificates(c workflow.ReceiveChannel) {
	var r pool.CertificateReport
	c.Receive(b.ctx, &r)
	b.events++
	if cond, ours := b.st.CertificatesCondition(r, workflow.Now(b.ctx)); ours {
		b.setCondition(cond)
	}
}

// setCondition puts c in the view and audits a change of its status or reason
// (State.SetCondition); it says whether the status changed.
func (b *boundLease) setCondition(c api.LeaseCondition) bool {
	changed, audit := b.st.SetCondition(c)
	if audit {
		b.events += 3
		b.audit(b.ctx, c)
	}
	return changed
}

// takeAssigned handles an assignment that arrives once the lease is Bound (a duplicate of its
// own, or a second one): another instance goes straight back to the pool.
func (b *boundLease) takeAssigned(c workflow.ReceiveChannel) {
	var late pool.Assignment
	c.Receive(b.ctx, &late)
	b.events++
	if late.InstanceID != "" && late.InstanceID != b.st.View.InstanceID {
		giveBack(b.ctx, b.in, late.InstanceID, "cancelled")
	}
}

// takeLeftover drops a claim-failed or queued signal that came after the lease was Bound.
func (b *boundLease) takeLeftover(c workflow.ReceiveChannel) {
	var ignored any
	c.Receive(b.ctx, &ignored)
	b.events++
}

// waitChanged returns a future that resolves once cond holds.
func waitChanged(ctx workflow.Context, cond func() bool) workflow.Future {
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if err := workflow.Await(gctx, cond); err == nil {
			set.Set(nil, nil)
		}
	})
	return f
}

// giveBack hands the instance back to the pool, saying why (the lease's final phase, or what
// went wrong).
func giveBack(ctx workflow.Context, in Input, instanceID, reason string) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, pool.WorkflowID(in.Pool), "", pool.SignalRelease,
		pool.ReleaseRequest{LeaseID: in.LeaseID, InstanceID: instanceID, Reason: reason}).Get(dctx, nil)
}

// IsExtendRejection returns the reason code of a refused extension.
func IsExtendRejection(err error) (api.ReasonCode, bool) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == ExtendRejection {
		return api.ReasonCode(ae.Message()), true
	}
	return "", false
}

// IsInstanceSleeping says whether a credential was refused because the lease's instance is
// asleep (ErrInstanceSleeping).
func IsInstanceSleeping(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrInstanceSleeping
}

// IsInstanceBroken returns the message of a credential refused because the lease's instance is
// broken (its backend says so: the credential will not come by retrying).
func IsInstanceBroken(err error) (string, bool) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == ErrInstanceBroken {
		return ae.Message(), true
	}
	return "", false
}

// credentialOptions: issuing or revoking the lease's credential through the instance's backend,
// on its host, retried quickly for as long as the lease can wait (within).
// bindLocalOptions: the local activity that makes sure a warm-bound lease has its credential
// and its Bound row (store writes, retried within the workflow task's minute).
func bindLocalOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second},
	}
}

func credentialOptions(queue string, within time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: within,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	}
}
