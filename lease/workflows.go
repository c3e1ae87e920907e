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
// pool, which tears it down: an instance is never reused.
func Lease(ctx workflow.Context, in Input) (View, error) {
	var a *Activities
	view := View{ID: in.LeaseID, Pool: in.Pool, Phase: api.LeasePending, IdleTimeout: in.IdleTimeout, AfterInactivity: in.AfterInactivity}
	resumed := in.Resume != nil
	// A lease the pool bound (a warm bind) starts Bound.
	warm := in.Bound != nil && !resumed
	var asg pool.Assignment
	var lastSeen, lastActive time.Time
	issueFor := 2 * time.Minute
	if resumed {
		view, asg, lastSeen, issueFor = in.Resume.View, in.Resume.Assignment, in.Resume.LastSeen, in.Resume.IssueFor
		lastActive = in.Resume.LastActive
	}
	if warm {
		// Bound from the first event, before the handlers below exist: an extension or a
		// release sent the moment the API answered finds it Bound.
		asg = *in.Bound
		view.Phase = api.LeaseBound // the pool started the workflow with KobePhase Bound
		view.ClaimedAt, view.BoundAt = asg.At, asg.At
		view.InstanceID, view.Endpoint, view.AssignmentSeq = asg.InstanceID, asg.Endpoint, asg.Seq
		view.ExpiresAt = view.BoundAt.Add(in.TTL)
		issueFor = 10 * time.Minute
	}
	if err := workflow.SetQueryHandler(ctx, QueryLease, func() (View, error) { return view, nil }); err != nil {
		return view, err
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateWaitBound, func(ctx workflow.Context) (View, error) {
		err := workflow.Await(ctx, func() bool { return view.Phase != api.LeasePending })
		return view, err
	}); err != nil {
		return view, err
	}
	short := workflow.WithActivityOptions(ctx, instance.StoreWriteOptions())
	projectAsync := func() workflow.Future {
		return workflow.ExecuteActivity(short, a.RecordLease, Record{
			ID: view.ID, Pool: view.Pool, Principal: in.Principal, Phase: view.Phase, InstanceID: view.InstanceID,
			TTL: in.TTL, ExpiresAt: view.ExpiresAt, Reason: view.Reason,
		})
	}
	project := func() { _ = projectAsync().Get(ctx, nil) }
	var pendingRecorded workflow.Future
	if !resumed && !warm {
		// The claim goes out at once and the Pending row is written meanwhile: the projection
		// is not on the bind path.
		pendingRecorded = projectAsync()
	}
	metrics := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": in.Pool})
	claimEvent := func(event string) {
		metrics.WithTags(map[string]string{"event": event}).Counter(MetricClaims).Inc(1)
	}
	searchable := in.SearchAttributes
	setPhase := func(phase api.LeasePhase) {
		view.Phase = phase
		if searchable {
			if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttributePhase.ValueSet(string(phase))); err != nil {
				workflow.GetLogger(ctx).Warn("cannot update the lease's search attributes", "error", err)
			}
		}
	}

	// issueUntil issues a credential for this lease expiring at expiresAt, on the instance's
	// host (it replaces the stored one).
	issueUntil := func(ctx workflow.Context, expiresAt time.Time) error {
		if asg.Prepared {
			// Minted from the prepared signer, valid until the lease's ceiling: an extension
			// (refused past the ceiling) needs no new credential.
			return nil
		}
		hctx := workflow.WithActivityOptions(ctx, credentialOptions(asg.Placement.TaskQueue, issueFor))
		return workflow.ExecuteActivity(hctx, a.IssueLeaseCredentials, CredentialRequest{
			LeaseID: in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID, ExpiresAt: expiresAt,
		}).Get(ctx, nil)
	}
	refusal := func(req ExtendRequest) error {
		switch {
		case view.Phase != api.LeaseBound:
			return temporal.NewApplicationError(string(api.ReasonNotReady), ExtendRejection)
		case req.By <= 0:
			return temporal.NewApplicationError(string(api.ReasonInvalidRequest), ExtendRejection)
		case view.Extensions >= in.MaxExtensions:
			return temporal.NewApplicationError(string(api.ReasonExtensionBudgetExhausted), ExtendRejection)
		case view.ExpiresAt.Add(req.By).After(view.BoundAt.Add(in.MaxTTL)):
			return temporal.NewApplicationError(string(api.ReasonMaxTTLCeiling), ExtendRejection)
		}
		return nil
	}

	// The sleep and wake updates' state: an extension asks it whether the lease sleeps.
	sleeps := &sleeper{in: in, view: &view, asg: &asg, lastSeen: &lastSeen, lastActive: &lastActive}
	// asleep: the lease's instance is asleep, or a sleep or a wake of it is under way: its
	// cluster cannot issue a credential now (a stopped API server refuses the connection, and an
	// issuance would retry for issueFor).
	asleep := func() bool { return view.Sleeping || sleeps.busy }
	sleepingRefusal := func() error { return temporal.NewApplicationError(string(api.ReasonSleeping), ExtendRejection) }

	// The extend handler exists from the start (its validator refuses until Bound): a client
	// that sees Bound — by query or by the wait-bound update — can extend at once.
	// extending is true while an extension issues its credential: extensions go one at a time,
	// and the lease does not continue as new under one. It does expire (and end) under one:
	// abandonExtension cancels the issuance, and abandoned tells the extension why.
	extending := false
	var abandonExtension workflow.CancelFunc
	abandoned := false
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateExtend,
		func(ctx workflow.Context, req ExtendRequest) (ExtendResult, error) {
			if err := workflow.Await(ctx, func() bool { return !extending }); err != nil {
				return ExtendResult{}, err
			}
			// Another extension may have run meanwhile: decide on the state as it is now.
			if err := refusal(req); err != nil {
				return ExtendResult{}, err
			}
			// The lease may have fallen asleep while this extension waited for another one (the
			// validator refused it only if it was asleep when it came).
			if asleep() {
				return ExtendResult{}, sleepingRefusal()
			}
			extending = true
			// The issuance runs in a context the lease cancels when it ends under it (it is not
			// cancelled otherwise).
			ictx, abandon := workflow.WithCancel(ctx)
			abandonExtension = abandon
			defer func() { extending, abandonExtension = false, nil }()
			// Compute, issue a fresh certificate that expires with the lease, then commit: a
			// failed issuance changes nothing and spends no extension.
			next := view.ExpiresAt.Add(req.By)
			if err := issueUntil(ictx, next); err != nil {
				switch {
				case abandoned:
					// The lease ended (expired or released) while this issued: nothing changed.
					return ExtendResult{}, temporal.NewApplicationError(string(api.ReasonNotReady), ExtendRejection)
				case IsInstanceSleeping(err):
					// The lease's instance fell asleep while this issued (its backend says so).
					return ExtendResult{}, sleepingRefusal()
				}
				return ExtendResult{}, err
			}
			if view.Phase != api.LeaseBound {
				return ExtendResult{}, temporal.NewApplicationError(string(api.ReasonNotReady), ExtendRejection)
			}
			view.ExpiresAt = next
			view.Extensions++
			lastActive = workflow.Now(ctx) // an extension is its holder's activity (AfterInactivity)
			claimEvent("extended")
			return ExtendResult{ExpiresAt: view.ExpiresAt}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req ExtendRequest) error {
			if err := refusal(req); err != nil {
				return err
			}
			// A sleeping lease's cluster cannot issue the extension's credential: refused at
			// once (validators do not run on replay), whatever its kind of
			// credential, so that the holder learns it must wake the lease first.
			if asleep() {
				return sleepingRefusal()
			}
			return nil
		}}); err != nil {
		return view, err
	}

	// The sleep and wake updates exist from the start too; they are refused until the lease is
	// held.
	if err := sleeps.register(ctx); err != nil {
		return view, err
	}

	releaseCh := workflow.GetSignalChannel(ctx, SignalReleaseLease)
	assignedCh := workflow.GetSignalChannel(ctx, pool.SignalAssigned)
	failedCh := workflow.GetSignalChannel(ctx, pool.SignalClaimFailed)

	if warm {
		// The API minted the credential and wrote the Bound row before it answered; if it died
		// in between, this mints and writes them. In this workflow task, as a local activity:
		// the bound lease's first task is its only one until it ends or is extended.
		lctx := workflow.WithLocalActivityOptions(ctx, bindLocalOptions())
		err := workflow.ExecuteLocalActivity(lctx, ActivityEnsureLeaseBound, BoundLease{
			Record: Record{ID: view.ID, Pool: view.Pool, Principal: in.Principal, Phase: api.LeaseBound, InstanceID: view.InstanceID,
				TTL: in.TTL, ExpiresAt: view.ExpiresAt},
			NotAfter: view.BoundAt.Add(in.MaxTTL),
		}).Get(ctx, nil)
		if err != nil {
			setPhase(api.LeaseFailed)
			view.Reason = api.ReasonBackendError
			claimEvent("failed")
			project()
			revokeCtx := workflow.WithActivityOptions(ctx, credentialOptions(asg.Placement.TaskQueue, issueFor))
			_ = workflow.ExecuteActivity(revokeCtx, a.RevokeLeaseCredentials, CredentialRequest{
				LeaseID: in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID}).Get(ctx, nil)
			giveBack(ctx, in, asg.InstanceID, "credentials failed")
			return view, nil
		}
		// Claimed and bound in the same instant of workflow time (the pool's Update).
		metrics.Timer(MetricClaimBindDuration).Record(0)
		claimEvent("created_fast")
		lastSeen = view.BoundAt
	} else if !resumed {
		view.ClaimedAt = workflow.Now(ctx)
		claimErr := workflow.SignalExternalWorkflow(ctx, pool.WorkflowID(in.Pool), "", pool.SignalClaim,
			pool.ClaimRequest{LeaseID: in.LeaseID, Priority: in.Priority, At: view.ClaimedAt}).Get(ctx, nil)
		if pendingRecorded != nil {
			_ = pendingRecorded.Get(ctx, nil)
		}
		if err := claimErr; err != nil {
			setPhase(api.LeaseFailed)
			view.Reason = "not_found"
			claimEvent("failed")
			project()
			return view, fmt.Errorf("pool %s: %w", in.Pool, err)
		}

		for view.Phase == api.LeasePending && asg.InstanceID == "" {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(assignedCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &asg) })
			sel.AddReceive(failedCh, func(c workflow.ReceiveChannel, _ bool) {
				var f pool.ClaimFailure
				c.Receive(ctx, &f)
				view.Phase, view.Reason = api.LeaseFailed, api.ReasonCode(f.Reason)
			})
			sel.AddReceive(releaseCh, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				view.Phase = api.LeaseReleased
			})
			sel.Select(ctx)
		}
		if view.Phase != api.LeasePending {
			phase := view.Phase
			setPhase(phase)
			if phase == api.LeaseFailed {
				claimEvent("failed")
			} else {
				claimEvent("released")
			}
			// Failed or released while waiting: the pool forgets the claim.
			_ = workflow.SignalExternalWorkflow(ctx, pool.WorkflowID(in.Pool), "", pool.SignalCancelClaim, in.LeaseID).Get(ctx, nil)
			// An assignment racing with the cancellation is handed straight back.
			var late pool.Assignment
			if assignedCh.ReceiveAsync(&late) {
				giveBack(ctx, in, late.InstanceID, "cancelled")
			}
			project()
			return view, nil
		}

		// Bound: issue credentials for exactly this lease, valid for its TTL.
		view.InstanceID, view.Endpoint, view.AssignmentSeq = asg.InstanceID, asg.Endpoint, asg.Seq
		view.BoundAt = workflow.Now(ctx)
		view.ExpiresAt = view.BoundAt.Add(in.TTL)
		// Issuing credentials is a few milliseconds of work against a Ready instance; when it takes
		// minutes the host is overloaded, not broken (the 50-client bench on 2 cores: a lease failed
		// with backend_error after 2 minutes while its instance was fine). The lease waits
		// longer, so an overloaded host slows binds down instead of failing them.
		issueFor = 10 * time.Minute
		if err := issueUntil(ctx, view.ExpiresAt); err != nil {
			setPhase(api.LeaseFailed)
			view.Reason = "backend_error"
			claimEvent("failed")
			project()
			giveBack(ctx, in, asg.InstanceID, "credentials failed")
			return view, nil
		}
		setPhase(api.LeaseBound)
		project()
		metrics.Timer(MetricClaimBindDuration).Record(workflow.Now(ctx).Sub(view.ClaimedAt))
		if asg.Queued {
			claimEvent("created_queued")
		} else {
			claimEvent("created_fast")
		}
		lastSeen = workflow.Now(ctx)
	} else if searchable {
		// A new run: the phase it shows in the Web UI is the one it carries on.
		setPhase(view.Phase)
	}

	heartbeatCh := workflow.GetSignalChannel(ctx, SignalHeartbeat)
	b := &boundLease{ctx: ctx, in: in, view: &view, lastSeen: &lastSeen, extending: &extending, metrics: metrics,
		release: releaseCh, heartbeat: heartbeatCh, unhealthy: workflow.GetSignalChannel(ctx, pool.SignalInstanceUnhealthy),
		assigned: assignedCh, leftovers: []workflow.ReceiveChannel{failedCh}, project: project, sleeps: sleeps,
		synced: workflow.GetSignalChannel(ctx, pool.SignalInstanceSync), certs: workflow.GetSignalChannel(ctx, pool.SignalInstanceCertificates)}
	if in.AfterInactivity > 0 {
		b.auto = &autoSleep{after: in.AfterInactivity, lastActive: &lastActive, signals: workflow.GetSignalChannel(ctx, SignalActivity)}
	}
	sleeps.holding = true
	if b.hold() {
		next := in
		next.Resume = &Resume{View: view, Assignment: asg, LastSeen: lastSeen, LastActive: lastActive, IssueFor: issueFor}
		return view, workflow.NewContinueAsNewError(ctx, WorkflowName, next)
	}
	// An extension still issuing when the lease ended is abandoned (its issuance cancelled),
	// so that the lease ends now, not when the issuance gives up.
	if extending && abandonExtension != nil {
		abandoned = true
		abandonExtension()
	}
	// An extension that was issuing when the lease ended has stored its credential by now
	// (or was abandoned): the revocation below is the last word. A sleep or wake under way
	// finishes first.
	if err := workflow.Await(ctx, func() bool { return !extending && !sleeps.busy }); err != nil {
		return view, err
	}
	if abandoned {
		// The abandoned issuance's attempt may still be running on the instance's host:
		// the lease's end is recorded before the revocation, so that the store refuses a
		// credential it stores after (ErrLeaseEnded) and the revocation deletes one it
		// stored before.
		setPhase(view.Phase)
		project()
	}

	// Revoke first so the credential dies at once, then hand the instance back for teardown.
	// An instance asleep serves nothing: its credential dies with its teardown (a revocation
	// that needs its API would only wait for it).
	if !view.Sleeping {
		revokeCtx := workflow.WithActivityOptions(ctx, credentialOptions(asg.Placement.TaskQueue, issueFor))
		_ = workflow.ExecuteActivity(revokeCtx, a.RevokeLeaseCredentials, CredentialRequest{
			LeaseID: in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID}).Get(ctx, nil)
	}
	giveBack(ctx, in, asg.InstanceID, string(view.Phase))
	setPhase(view.Phase)
	if view.Phase == api.LeaseExpired {
		claimEvent("expired")
	} else {
		claimEvent("released")
	}
	project()
	return view, nil
}

// boundLease holds a Bound lease until it ends or its run should continue as new. Heartbeats
// and extensions only move lastSeen and ExpiresAt: the timers are re-armed when they fire, not
// on every signal, so a burst of heartbeats costs its signals and nothing more.
type boundLease struct {
	ctx       workflow.Context
	in        Input
	view      *View
	lastSeen  *time.Time
	extending *bool
	metrics   metricsHandler
	release   workflow.ReceiveChannel
	heartbeat workflow.ReceiveChannel
	unhealthy workflow.ReceiveChannel
	// synced receives the pool's sync reports.
	synced workflow.ReceiveChannel
	// certs receives SignalInstanceCertificates.
	certs     workflow.ReceiveChannel
	assigned  workflow.ReceiveChannel
	leftovers []workflow.ReceiveChannel
	project   func()
	sleeps    *sleeper
	// auto checks the lease's inactivity (nil without Input.AfterInactivity).
	auto *autoSleep
	// events is a lower bound of this run's history length (signals and timers), for when the
	// server's count is not known.
	events int
}

// hold returns true when the run should continue as new (every signal taken, every handler
// finished), false once the lease has ended.
func (b *boundLease) hold() bool {
	ctx, view := b.ctx, b.view
	threshold := b.in.ContinueAsNewAfter
	if threshold <= 0 {
		threshold = leaseContinueAsNewAfter
	}
	projected := view.ExpiresAt
	var ttlTimer, idleTimer workflow.Future
	for view.Phase == api.LeaseBound {
		now := workflow.Now(ctx)
		expired := !now.Before(view.ExpiresAt)
		idle := b.in.IdleTimeout > 0 && !now.Before(b.lastSeen.Add(b.in.IdleTimeout))
		if expired || idle {
			view.Phase = api.LeaseExpired
			if !expired {
				view.Reason = api.ReasonIdleTimeout
			}
			break
		}
		if !*b.extending && b.auto != nil && b.auto.due && !b.sleeps.busy {
			b.auto.check(b)
			continue
		}
		if !projected.Equal(view.ExpiresAt) {
			projected = view.ExpiresAt
			b.project()
			continue
		}
		if !*b.extending && b.continueAsNew(threshold) {
			if !workflow.AllHandlersFinished(ctx) {
				_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
				continue
			}
			if b.drain() {
				continue
			}
			return true
		}
		if d := view.ExpiresAt.Sub(now); ttlTimer == nil && d > 0 {
			ttlTimer = workflow.NewTimer(ctx, d)
			b.events += 2
		}
		if d := b.lastSeen.Add(b.in.IdleTimeout).Sub(now); b.in.IdleTimeout > 0 && idleTimer == nil && d > 0 {
			idleTimer = workflow.NewTimer(ctx, d)
			b.events += 2
		}
		if b.auto != nil && b.auto.arm(b) && !*b.extending && !b.sleeps.busy {
			continue // a check is due now
		}
		wctx, cancel := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		if ttlTimer != nil {
			sel.AddFuture(ttlTimer, func(workflow.Future) { ttlTimer = nil })
		}
		if idleTimer != nil {
			sel.AddFuture(idleTimer, func(workflow.Future) { idleTimer = nil })
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
		wasExtending, wasSleeping, wasBusy := *b.extending, view.Sleeping, b.sleeps.busy
		sel.AddFuture(waitChanged(wctx, func() bool {
			// A lease that checks its inactivity re-arms its check when it wakes, and runs a
			// due check once a sleep or wake is over.
			slept := b.auto != nil && (view.Sleeping != wasSleeping || b.sleeps.busy != wasBusy)
			return *b.extending != wasExtending || !view.ExpiresAt.Equal(projected) || slept
		}), func(workflow.Future) {})
		sel.Select(ctx)
		cancel()
	}
	return false
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
	b.view.Phase = api.LeaseReleased
}

// takeHeartbeats coalesces a burst: every heartbeat waiting counts as one.
func (b *boundLease) takeHeartbeats(c workflow.ReceiveChannel) {
	c.Receive(b.ctx, nil)
	b.events++
	for c.ReceiveAsync(nil) {
		b.events++
	}
	*b.lastSeen = workflow.Now(b.ctx)
}

// takeUnhealthy records that the lease's instance failed its health checks. The lease stays
// Bound: its holder decides whether to give it back.
func (b *boundLease) takeUnhealthy(c workflow.ReceiveChannel) {
	var r pool.HealthReport
	c.Receive(b.ctx, &r)
	at, ours := b.about(r.InstanceID, r.At)
	if !ours {
		return
	}
	reason := r.Reason
	if reason == "" {
		reason = pool.ReasonHealthFailed
	}
	msg := r.Message
	if msg == "" {
		msg = fmt.Sprintf("instance %s failed %d health checks in a row", b.view.InstanceID, r.Failures)
	}
	if b.setCondition(api.LeaseCondition{Type: ConditionInstanceHealthy, Status: "False", Reason: api.ReasonCode(reason),
		Message: msg, LastTransitionTime: at}) {
		b.metrics.Counter(MetricLeaseInstanceUnhealthy).Inc(1)
	}
}

// takeSynced records what the lease's instance could not sync onto its host (condition
// Synced: False with the newest error's reason, True once every object synced again).
func (b *boundLease) takeSynced(c workflow.ReceiveChannel) {
	var r pool.SyncReport
	c.Receive(b.ctx, &r)
	at, ours := b.about(r.InstanceID, r.At)
	if !ours {
		return
	}
	cond := api.LeaseCondition{Type: ConditionSynced, Status: "True", Message: "every object synced onto the host", LastTransitionTime: at}
	if !r.Synced {
		cond.Status, cond.Reason = "False", r.Reason
		cond.Message = r.Message
		if r.Objects > 1 {
			cond.Message = fmt.Sprintf("%s (and %d more objects)", r.Message, r.Objects-1)
		}
	}
	b.setCondition(cond)
}

// takeCertificates records that the lease's instance's certificates expire soon and cannot be
// re-issued in place (condition CertificatesValid: False): the holder should move to another
// cluster before then.
func (b *boundLease) takeCertificates(c workflow.ReceiveChannel) {
	var r pool.CertificateReport
	c.Receive(b.ctx, &r)
	at, ours := b.about(r.InstanceID, r.At)
	if !ours {
		return
	}
	b.setCondition(api.LeaseCondition{Type: ConditionCertificatesValid, Status: "False", Reason: api.ReasonCertificatesExpiring,
		Message: r.Message, LastTransitionTime: at})
}

// about counts a report of the pool just received and says whether it is about this lease's
// instance (a report naming none is), and when it was made (now, for a report without a time).
func (b *boundLease) about(instanceID string, at time.Time) (time.Time, bool) {
	b.events++
	if instanceID != "" && instanceID != b.view.InstanceID {
		return at, false
	}
	if at.IsZero() {
		at = workflow.Now(b.ctx)
	}
	return at, true
}

// setCondition puts c in the view (see setCondition) and audits a change of its status or
// reason; it says whether the status changed.
func (b *boundLease) setCondition(c api.LeaseCondition) bool {
	var before *api.LeaseCondition
	for i := range b.view.Conditions {
		if b.view.Conditions[i].Type == c.Type {
			old := b.view.Conditions[i]
			before = &old
		}
	}
	changed := setCondition(b.view, c)
	if before != nil && before.Status == c.Status && before.Reason == c.Reason {
		return changed
	}
	var a *Activities
	short := workflow.WithActivityOptions(b.ctx, instance.StoreWriteOptions())
	b.events += 3
	_ = workflow.ExecuteActivity(short, a.RecordLeaseCondition, ConditionChange{LeaseID: b.view.ID, Pool: b.view.Pool,
		InstanceID: b.view.InstanceID, Condition: c, At: workflow.Now(b.ctx)}).Get(b.ctx, nil)
	return changed
}

// takeAssigned handles an assignment that arrives once the lease is Bound (a duplicate of its
// own, or a second one): another instance goes straight back to the pool.
func (b *boundLease) takeAssigned(c workflow.ReceiveChannel) {
	var late pool.Assignment
	c.Receive(b.ctx, &late)
	b.events++
	if late.InstanceID != "" && late.InstanceID != b.view.InstanceID {
		giveBack(b.ctx, b.in, late.InstanceID, "cancelled")
	}
}

// takeLeftover drops a claim-failed or queued signal that came after the lease was Bound.
func (b *boundLease) takeLeftover(c workflow.ReceiveChannel) {
	var ignored any
	c.Receive(b.ctx, &ignored)
	b.events++
}

// setCondition puts c in the view in place of a condition of the same type, keeping its
// transition time when the status is unchanged; it says whether the status changed.
func setCondition(v *View, c api.LeaseCondition) bool {
	for i, old := range v.Conditions {
		if old.Type != c.Type {
			continue
		}
		changed := old.Status != c.Status
		if !changed {
			c.LastTransitionTime = old.LastTransitionTime
		}
		v.Conditions[i] = c
		return changed
	}
	v.Conditions = append(v.Conditions, c)
	return true
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
