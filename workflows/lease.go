package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/activities"
)

// LeaseWorkflowName is the registered name of the lease workflow.
const LeaseWorkflowName = "Lease"

// LeaseWorkflowID is the workflow id of a lease (lease ids already start with "lease-").
func LeaseWorkflowID(leaseID string) string { return leaseID }

// Lease signals, update and query.
const (
	SignalReleaseLease = "release-lease" // from the API: the user is done
	// SignalHeartbeat tells a lease with an idle timeout that its user is still there.
	SignalHeartbeat = "heartbeat"
	UpdateExtend    = "extend" // ExtendRequest → ExtendResult
	// UpdateWaitBound returns the LeaseView once the lease is no longer Pending: a client
	// waits for its kubeconfig without polling (also as update-with-start).
	UpdateWaitBound = "wait-bound"
	QueryLease      = "lease" // → LeaseView
)

// Lease phases (upstream names).
const (
	LeasePending  = "Pending"
	LeaseBound    = "Bound"
	LeaseReleased = "Released"
	LeaseExpired  = "Expired"
	LeaseFailed   = "Failed"
)

// Reason codes a lease can end or be refused with (API contract).
const (
	ReasonPoolExhausted            = "pool_exhausted"
	ReasonExtensionBudgetExhausted = "extension_budget_exhausted"
	ReasonMaxTTLCeiling            = "max_ttl_ceiling"
	ReasonNotReady                 = "not_ready"
	ReasonInvalidRequest           = "invalid_request"
	ReasonIdleTimeout              = "idle_timeout"
)

// LeaseInput starts a lease.
type LeaseInput struct {
	LeaseID       string        `json:"leaseId"`
	Pool          string        `json:"pool"`
	Principal     string        `json:"principal"`
	TTL           time.Duration `json:"ttl"`
	MaxTTL        time.Duration `json:"maxTtl"`
	MaxExtensions int           `json:"maxExtensions"`
	Priority      int           `json:"priority"`
	// IdleTimeout, when set, ends a Bound lease (Expired, reason idle_timeout) that got no
	// heartbeat signal for that long: a crashed CI job gives its cluster back early. Runs that
	// predate it have it zero, so they replay unchanged.
	IdleTimeout time.Duration `json:"idleTimeout,omitempty"`
	// SearchAttributes says the starter set KobePool/KobeOwner/KobePhase (they are registered
	// on the namespace), so the lease keeps KobePhase current for the Web UI's filters.
	SearchAttributes bool `json:"searchAttributes,omitempty"`
}

// LeaseView answers QueryLease.
type LeaseView struct {
	ID         string    `json:"id"`
	Pool       string    `json:"pool"`
	Phase      string    `json:"phase"`
	Reason     string    `json:"reason,omitempty"`
	InstanceID string    `json:"instanceId,omitempty"`
	Endpoint   string    `json:"endpoint,omitempty"`
	BoundAt    time.Time `json:"boundAt,omitempty"`
	ExpiresAt  time.Time `json:"expiresAt,omitempty"`
	Extensions int       `json:"extensions"`
	// QueuePosition is 1-based while Pending and queued; 0 otherwise.
	QueuePosition int `json:"queuePosition,omitempty"`
	// ClaimedAt is when the lease asked its pool; AssignmentSeq the pool's order of assignment.
	ClaimedAt     time.Time `json:"claimedAt"`
	AssignmentSeq int64     `json:"assignmentSeq,omitempty"`
	// Conditions are observations about the lease, such as its instance failing health checks.
	Conditions []LeaseCondition `json:"conditions,omitempty"`
}

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
func Lease(ctx workflow.Context, in LeaseInput) (LeaseView, error) {
	var a *activities.Activities
	view := LeaseView{ID: in.LeaseID, Pool: in.Pool, Phase: LeasePending}
	if err := workflow.SetQueryHandler(ctx, QueryLease, func() (LeaseView, error) { return view, nil }); err != nil {
		return view, err
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateWaitBound, func(ctx workflow.Context) (LeaseView, error) {
		err := workflow.Await(ctx, func() bool { return view.Phase != LeasePending })
		return view, err
	}); err != nil {
		return view, err
	}
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	})
	projectAsync := func() workflow.Future {
		return workflow.ExecuteActivity(short, a.RecordLease, activities.LeaseRecord{
			ID: view.ID, Pool: view.Pool, Principal: in.Principal, Phase: view.Phase, InstanceID: view.InstanceID,
			TTL: in.TTL, ExpiresAt: view.ExpiresAt, Reason: view.Reason,
		})
	}
	project := func() { _ = projectAsync().Get(ctx, nil) }
	// From this version on the claim goes out at once and the Pending row is written
	// meanwhile: the projection is not on the bind path.
	claimFirst := workflow.GetVersion(ctx, leaseVersionClaimFirst, workflow.DefaultVersion, 1) >= 1
	var pendingRecorded workflow.Future
	if claimFirst {
		pendingRecorded = projectAsync()
	} else {
		project()
	}
	metrics := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"profile": in.Pool})
	claimEvent := func(event string) {
		metrics.WithTags(map[string]string{"event": event}).Counter(MetricClaims).Inc(1)
	}
	searchable := in.SearchAttributes &&
		workflow.GetVersion(ctx, leaseVersionChange, workflow.DefaultVersion, leaseVersionSearchAttributes) >= leaseVersionSearchAttributes
	setPhase := func(phase string) {
		view.Phase = phase
		if searchable {
			if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttributePhase.ValueSet(phase)); err != nil {
				workflow.GetLogger(ctx).Warn("cannot update the lease's search attributes", "error", err)
			}
		}
	}

	// The extend handler exists from the start (its validator refuses until Bound): a client
	// that sees Bound — by query or by the wait-bound update — can extend at once.
	var issue func(ctx workflow.Context) error
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateExtend,
		func(ctx workflow.Context, req ExtendRequest) (ExtendResult, error) {
			view.ExpiresAt = view.ExpiresAt.Add(req.By)
			view.Extensions++
			// A fresh certificate that expires with the lease.
			if err := issue(ctx); err != nil {
				return ExtendResult{}, err
			}
			claimEvent("extended")
			return ExtendResult{ExpiresAt: view.ExpiresAt}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req ExtendRequest) error {
			switch {
			case view.Phase != LeaseBound:
				return temporal.NewApplicationError(ReasonNotReady, ExtendRejection)
			case req.By <= 0:
				return temporal.NewApplicationError(ReasonInvalidRequest, ExtendRejection)
			case view.Extensions >= in.MaxExtensions:
				return temporal.NewApplicationError(ReasonExtensionBudgetExhausted, ExtendRejection)
			case view.ExpiresAt.Add(req.By).After(view.BoundAt.Add(in.MaxTTL)):
				return temporal.NewApplicationError(ReasonMaxTTLCeiling, ExtendRejection)
			}
			return nil
		}}); err != nil {
		return view, err
	}

	releaseCh := workflow.GetSignalChannel(ctx, SignalReleaseLease)
	assignedCh := workflow.GetSignalChannel(ctx, SignalAssigned)
	failedCh := workflow.GetSignalChannel(ctx, SignalClaimFailed)
	queuedCh := workflow.GetSignalChannel(ctx, SignalQueued)

	view.ClaimedAt = workflow.Now(ctx)
	claimErr := workflow.SignalExternalWorkflow(ctx, PoolWorkflowID(in.Pool), "", SignalClaim,
		ClaimRequest{LeaseID: in.LeaseID, Priority: in.Priority, At: view.ClaimedAt}).Get(ctx, nil)
	if pendingRecorded != nil {
		_ = pendingRecorded.Get(ctx, nil)
	}
	if err := claimErr; err != nil {
		setPhase(LeaseFailed)
		view.Reason = "not_found"
		claimEvent("failed")
		project()
		return view, fmt.Errorf("pool %s: %w", in.Pool, err)
	}

	var asg Assignment
	for view.Phase == LeasePending && asg.InstanceID == "" {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(assignedCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &asg) })
		sel.AddReceive(failedCh, func(c workflow.ReceiveChannel, _ bool) {
			var f ClaimFailure
			c.Receive(ctx, &f)
			view.Phase, view.Reason = LeaseFailed, f.Reason
		})
		sel.AddReceive(queuedCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &view.QueuePosition) })
		sel.AddReceive(releaseCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			view.Phase = LeaseReleased
		})
		sel.Select(ctx)
	}
	if view.Phase != LeasePending {
		phase := view.Phase
		setPhase(phase)
		if phase == LeaseFailed {
			claimEvent("failed")
		} else {
			claimEvent("released")
		}
		// Failed or released while waiting: the pool forgets the claim.
		_ = workflow.SignalExternalWorkflow(ctx, PoolWorkflowID(in.Pool), "", SignalCancelClaim, in.LeaseID).Get(ctx, nil)
		// An assignment racing with the cancellation is handed straight back.
		var late Assignment
		if assignedCh.ReceiveAsync(&late) {
			giveBack(ctx, in, late.InstanceID, "cancelled")
		}
		project()
		return view, nil
	}

	// Bound: issue credentials for exactly this lease, valid for its TTL.
	view.InstanceID, view.Endpoint, view.QueuePosition, view.AssignmentSeq = asg.InstanceID, asg.Endpoint, 0, asg.Seq
	view.BoundAt = workflow.Now(ctx)
	view.ExpiresAt = view.BoundAt.Add(in.TTL)
	// Issuing credentials is a few milliseconds of work against a Ready instance; when it takes
	// minutes the host is overloaded, not broken (the 50-client bench on 2 cores: a lease failed
	// with backend_error after 2 minutes while its instance was fine). From this version on the
	// lease waits longer, so an overloaded host slows binds down instead of failing them.
	issueFor := 2 * time.Minute
	if workflow.GetVersion(ctx, leaseVersionPatientCredentials, workflow.DefaultVersion, 1) >= 1 {
		issueFor = 10 * time.Minute
	}
	host := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              asg.Placement.TaskQueue,
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: issueFor,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	})
	issue = func(ctx workflow.Context) error {
		hctx := workflow.WithActivityOptions(ctx, workflow.GetActivityOptions(host))
		return workflow.ExecuteActivity(hctx, a.IssueLeaseCredentials, activities.LeaseCredentialRequest{
			LeaseID: in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID, ExpiresAt: view.ExpiresAt,
		}).Get(ctx, nil)
	}
	if err := issue(ctx); err != nil {
		setPhase(LeaseFailed)
		view.Reason = "backend_error"
		claimEvent("failed")
		project()
		giveBack(ctx, in, asg.InstanceID, "credentials failed")
		return view, nil
	}
	setPhase(LeaseBound)
	project()
	metrics.Timer(MetricClaimBindDuration).Record(workflow.Now(ctx).Sub(view.ClaimedAt))
	if asg.Queued {
		claimEvent("created_queued")
	} else {
		claimEvent("created_fast")
	}

	heartbeatCh := workflow.GetSignalChannel(ctx, SignalHeartbeat)
	lastSeen := workflow.Now(ctx)
	for view.Phase == LeaseBound {
		timerCtx, cancel := workflow.WithCancel(ctx)
		expiresAt := view.ExpiresAt
		timer := workflow.NewTimer(timerCtx, expiresAt.Sub(workflow.Now(ctx)))
		sel := workflow.NewSelector(ctx)
		if in.IdleTimeout > 0 {
			idle := workflow.NewTimer(timerCtx, lastSeen.Add(in.IdleTimeout).Sub(workflow.Now(ctx)))
			sel.AddFuture(idle, func(workflow.Future) {
				if !workflow.Now(ctx).Before(lastSeen.Add(in.IdleTimeout)) {
					view.Phase, view.Reason = LeaseExpired, ReasonIdleTimeout
				}
			})
			sel.AddReceive(heartbeatCh, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				for c.ReceiveAsync(nil) {
				}
				lastSeen = workflow.Now(ctx)
			})
		}
		sel.AddFuture(timer, func(workflow.Future) {
			if !workflow.Now(ctx).Before(view.ExpiresAt) {
				view.Phase = LeaseExpired
			}
		})
		sel.AddReceive(releaseCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			view.Phase = LeaseReleased
		})
		// An extension changes ExpiresAt: wake up to re-arm the timer.
		sel.AddFuture(waitChanged(timerCtx, func() bool { return !view.ExpiresAt.Equal(expiresAt) }), func(workflow.Future) {
			project()
		})
		sel.Select(ctx)
		cancel()
	}

	// Revoke first so the credential dies at once, then hand the instance back for teardown.
	_ = workflow.ExecuteActivity(host, a.RevokeLeaseCredentials, activities.LeaseCredentialRequest{
		LeaseID: in.LeaseID, Backend: asg.Backend, InstanceID: asg.InstanceID}).Get(ctx, nil)
	giveBack(ctx, in, asg.InstanceID, view.Phase)
	setPhase(view.Phase)
	if view.Phase == LeaseExpired {
		claimEvent("expired")
	} else {
		claimEvent("released")
	}
	project()
	return view, nil
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

func giveBack(ctx workflow.Context, in LeaseInput, instanceID, reason string) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.SignalExternalWorkflow(dctx, PoolWorkflowID(in.Pool), "", SignalRelease,
		ReleaseRequest{LeaseID: in.LeaseID, InstanceID: instanceID, Reason: reason}).Get(dctx, nil)
}

// IsExtendRejection returns the reason code of a refused extension.
func IsExtendRejection(err error) (string, bool) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == ExtendRejection {
		return ae.Message(), true
	}
	return "", false
}
