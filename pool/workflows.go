// Package pool is the pool entity workflow: it keeps a pool's warm members (through
// instance.Provision and instance.Teardown), hands them to the leases that claim them, checks
// their health and recycles them, rolls them to a new spec and drains the pool when it is
// deleted. It defines the messages it receives and sends (claims, releases, assignments, claim
// failures, health reports); the lease package imports it.
package pool

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"time"

	"github.com/kunobi-ninja/kobe/instance"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/pools"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PoolWorkflowName is the registered name of the pool entity workflow.
const PoolWorkflowName = "Pool"

// LeaseWorkflowID is the workflow id of a lease (lease ids already start with "lease-").
func LeaseWorkflowID(leaseID string) string { return leaseID }

// PoolWorkflowID is the workflow id of a pool.
func PoolWorkflowID(pool string) string { return "pool-" + pool }

// Signals the pool receives, and the query it answers.
const (
	SignalClaim       = "claim"        // ClaimRequest, from a lease
	SignalCancelClaim = "cancel-claim" // lease id, from a lease that no longer waits
	SignalRelease     = "release"      // ReleaseRequest, from a lease done with its instance
	SignalApply       = "apply"        // pools.Policy: a new spec
	SignalDeletePool  = "delete"       // drain and forget the pool
	QueryPoolStatus   = "status"
)

// Signals a lease receives from its pool.
const (
	SignalAssigned    = "assigned"     // Assignment
	SignalClaimFailed = "claim-failed" // ClaimFailure
)

// Member phases inside the pool.
const (
	MemberCreating = "Creating"
	MemberReady    = "Ready"
	MemberLeased   = "Leased"
	MemberDeleting = "Deleting"
)

// Pool phases (upstream names).
const (
	PoolHealthy     = "Healthy"
	PoolScalingUp   = "ScalingUp"
	PoolScalingDown = "ScalingDown"
	PoolBackoff     = "Backoff"
	PoolFailing     = "Failing"
	PoolIdle        = "Idle"
	// PoolDraining: deleted, tearing its members down (leased ones when their leases end).
	PoolDraining = "Draining"
)

// ClaimRequest is a lease asking for an instance.
type ClaimRequest struct {
	LeaseID  string    `json:"leaseId"`
	Priority int       `json:"priority"`
	At       time.Time `json:"at"`
}

// ReleaseRequest hands an instance back; the pool tears it down (never reused).
type ReleaseRequest struct {
	LeaseID    string `json:"leaseId"`
	InstanceID string `json:"instanceId"`
	Reason     string `json:"reason"`
}

// Assignment tells a lease which instance is its own.
type Assignment struct {
	// Seq numbers the pool's assignments in the order it made them.
	Seq        int64                   `json:"seq"`
	InstanceID string                  `json:"instanceId"`
	Backend    string                  `json:"backend"`
	Placement  instance.HostAssignment `json:"placement"`
	Endpoint   string                  `json:"endpoint"`
	// Queued is false when a Ready member was there for the claim the moment it arrived.
	Queued bool `json:"queued,omitempty"`
}

// ClaimFailure tells a lease it will not get an instance.
type ClaimFailure struct {
	Reason string `json:"reason"` // pool_exhausted, pool_deleted
	Detail string `json:"detail"`
}

// Member is one instance as the pool tracks it.
type Member struct {
	ID        string                  `json:"id"`
	Phase     string                  `json:"phase"`
	LeaseID   string                  `json:"leaseId,omitempty"`
	Placement instance.HostAssignment `json:"placement"`
	Endpoint  string                  `json:"endpoint,omitempty"`
	Since     time.Time               `json:"since"`
	// Generation of the member template it was created with (drift detection).
	Generation int64 `json:"generation"`
	// Reason it is being torn down (Deleting) or was asked to stop creating (Recycling).
	Reason string `json:"reason,omitempty"`
	// CancelRequested is set once a wedged creation was asked to stop.
	CancelRequested bool `json:"cancelRequested,omitempty"`
	// HealthFailures counts the health checks failed in a row; HealthMessage says what the
	// last failure was. A member with failures is not handed to a claim.
	HealthFailures int    `json:"healthFailures,omitempty"`
	HealthMessage  string `json:"healthMessage,omitempty"`
	// Broken marks a Leased member that failed failureThreshold checks: its lease was told.
	Broken bool `json:"broken,omitempty"`
	// TeardownAttempts counts the teardowns started for it (each a workflow of its own id).
	TeardownAttempts int `json:"teardownAttempts,omitempty"`
}

// PoolState is the whole state of a pool; it is the input of every continue-as-new run.
type PoolState struct {
	Policy     pools.Policy       `json:"policy"`
	Generation int64              `json:"generation"`
	Members    map[string]*Member `json:"members"`
	Queue      []ClaimRequest     `json:"queue"`
	// Seq numbers instances deterministically: <pool>-<seq>.
	Seq int64 `json:"seq"`
	// AssignSeq numbers assignments.
	AssignSeq           int64     `json:"assignSeq"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	NextAttemptAt       time.Time `json:"nextAttemptAt,omitempty"`
	LastFailureReason   string    `json:"lastFailureReason,omitempty"`
	// Draining is set by a delete: no new members, no claims served; the workflow ends once
	// the last member is gone.
	Draining bool `json:"draining,omitempty"`
	// DeleteGeneration is the store generation of the pool's row that the delete saw: the
	// drained pool forgets its row only if nobody applied it since (0: whatever row there is).
	DeleteGeneration int64 `json:"deleteGeneration,omitempty"`
	// Assigned remembers the instance handed to each lease, so that a retried claim is not
	// served twice; AssignedAt is when. At continue-as-new it is pruned to live leases plus
	// assignedWindow (entries without a time predate the pruning and go unless live).
	Assigned   map[string]string    `json:"assigned"`
	AssignedAt map[string]time.Time `json:"assignedAt,omitempty"`
	// Incarnation tells this pool's members from those of an earlier pool of the same name
	// (deleted, then applied again): member ids are <pool>-<incarnation>-<seq>, so that their
	// workflow ids never collide with closed workflows of the earlier pool.
	Incarnation string `json:"incarnation,omitempty"`
	// NextHealthCheckAt is when the members are checked next.
	NextHealthCheckAt time.Time `json:"nextHealthCheckAt,omitempty"`
	// ContinueAsNewAfter is the history length past which the run continues as new (0 means
	// maxHistoryBeforeContinue); tests lower it.
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
}

// PoolStatus answers QueryPoolStatus (upstream field names).
type PoolStatus struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    int    `json:"ready"`
	Leased   int    `json:"leased"`
	Creating int    `json:"creating"`
	Deleting int    `json:"deleting"`
	// Unhealthy counts Ready or Leased members whose last health check failed.
	Unhealthy int `json:"unhealthy"`
	// Quarantined counts members whose teardown kept failing.
	Quarantined int `json:"quarantined"`
	// Outdated counts Ready members made from an older spec, waiting to be rolled.
	Outdated   int   `json:"outdated"`
	Generation int64 `json:"generation"`
	// OldestPendingSince and OldestCreatingSince are zero when nothing waits or creates.
	OldestPendingSince  time.Time       `json:"oldestPendingSince,omitempty"`
	OldestCreatingSince time.Time       `json:"oldestCreatingSince,omitempty"`
	QueueDepth          int             `json:"queueDepth"`
	Queue               []string        `json:"queue"` // lease ids in service order
	WarmTarget          int             `json:"warmTarget"`
	MaxClusters         int             `json:"maxClusters"`
	ConsecutiveFailures int             `json:"consecutiveFailures"`
	NextAttemptAt       time.Time       `json:"nextAttemptAt,omitempty"`
	LastFailureReason   string          `json:"lastFailureReason,omitempty"`
	Members             []MemberSummary `json:"members"`
}

// MemberSummary is one member in PoolStatus.
type MemberSummary struct {
	ID         string `json:"id"`
	Phase      string `json:"phase"`
	LeaseID    string `json:"leaseId,omitempty"`
	Host       string `json:"host,omitempty"`
	Generation int64  `json:"generation"`
	Reason     string `json:"reason,omitempty"`
	// HealthFailures and HealthMessage: see Member.
	HealthFailures int    `json:"healthFailures,omitempty"`
	HealthMessage  string `json:"healthMessage,omitempty"`
}

// failingAfter consecutive failures the pool reports Failing (upstream: ≥ 3).
const failingAfter = 3

// maxHistoryBeforeContinue keeps the entity's history bounded.
const maxHistoryBeforeContinue = 5000

// assignedWindow is how long an assignment is remembered after its lease is no longer
// Leased: a claim retried within it is recognised and not served again.
const assignedWindow = 15 * time.Minute

// creatingGrace is how long past creatingTimeout the pool waits for a member's own Provision
// to give up (its activities are bounded by creatingTimeout) before it cancels the creation.
const creatingGrace = time.Minute

// Recycle reasons (label of kobe_instance_recycles_total, upstream names where they exist).
const (
	RecycleLeaseReleased   = "lease_released"
	RecycleSpecDrift       = "spec_drift"
	RecycleScaleDown       = "scale_down"
	RecycleCreatingTimeout = "creating_timeout"
	RecycleLeaseGone       = "lease_gone"
	RecyclePoolDeleted     = "pool_deleted"
	RecycleManual          = "manual" // an operator retried a quarantined member's teardown
)

// Versions of the pool's behaviour (workflow.GetVersion) so that runs recorded before a change
// replay as they ran.
const (
	poolVersionChange = "pool-drift-wedged-metrics"
	// poolVersionRolling adds drift rolling, wedged-creation recycling and recycle metrics.
	poolVersionRolling workflow.Version = 1

	// poolVersionCancelChange: a claim cancelled after its assignment went out tears the
	// assigned member down. Before it, a lease released while Pending could end before the
	// assignment signal reached it; the member stayed Leased to a finished lease for good
	// (found by the soak: an instance outlived its pool's deletion).
	poolVersionCancelChange                    = "pool-cancel-reclaims"
	poolVersionCancelReclaims workflow.Version = 1

	// poolVersionHardenChange (issue 11): health checks of Ready and Leased members, nothing
	// lost across continue-as-new (every channel drained, continue when suggested, Assigned
	// pruned), Quarantined members, member ids unique across incarnations of a pool name,
	// maxSurge honoured during a roll, member workflows that fail to start handled.
	poolVersionHardenChange                  = "pool-hardening"
	poolVersionHardened     workflow.Version = 1

	// poolVersionForgetChange: a drained pool forgets its store row only if it was not applied
	// again since its delete, and reads every signal that came meanwhile before it ends (an
	// apply keeps it serving, a claim is refused): before, an apply landing as the drained pool
	// ended was lost, leaving a pool row with no workflow, and a claim was never answered.
	poolVersionForgetChange                      = "pool-forget-unchanged"
	poolVersionForgetsUnchanged workflow.Version = 1
)

// templateChanged says whether a new policy changes what a member is (and so makes existing
// members outdated), as opposed to knobs such as TTL or pool size that apply to members as
// they are.
func templateChanged(a, b pools.Policy) bool {
	return a.Backend != b.Backend || a.KubernetesVersion != b.KubernetesVersion ||
		string(a.BackendOptions) != string(b.BackendOptions) ||
		!reflect.DeepEqual(a.Gates, b.Gates) || !reflect.DeepEqual(a.Addons, b.Addons)
}

// Pool is the entity workflow of one pool: the single writer of assignment. It keeps the warm
// target, provisions and tears down members (as separate workflows that report back by
// signal, so that continue-as-new never orphans them), and serves claims in order.
func Pool(ctx workflow.Context, st PoolState) error {
	if st.Members == nil {
		st.Members = map[string]*Member{}
	}
	if st.Assigned == nil {
		st.Assigned = map[string]string{}
	}
	p := &poolRun{ctx: ctx, st: &st}
	p.version = workflow.GetVersion(ctx, poolVersionChange, workflow.DefaultVersion, poolVersionRolling)
	p.cancelReclaims = workflow.GetVersion(ctx, poolVersionCancelChange, workflow.DefaultVersion, poolVersionCancelReclaims) >= poolVersionCancelReclaims
	p.hardened = workflow.GetVersion(ctx, poolVersionHardenChange, workflow.DefaultVersion, poolVersionHardened) >= poolVersionHardened
	p.forgetsUnchanged = workflow.GetVersion(ctx, poolVersionForgetChange, workflow.DefaultVersion, poolVersionForgetsUnchanged) >= poolVersionForgetsUnchanged
	if p.hardened {
		if st.AssignedAt == nil {
			st.AssignedAt = map[string]time.Time{}
		}
		if st.Incarnation == "" {
			// Random once per pool, recorded in history (a side effect), carried by every run.
			var tag string
			if err := workflow.SideEffect(ctx, func(workflow.Context) any {
				return fmt.Sprintf("%08x", rand.Uint32())
			}).Get(&tag); err != nil {
				return err
			}
			st.Incarnation = tag
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryPoolStatus, func() (PoolStatus, error) { return p.status(), nil }); err != nil {
		return err
	}
	claims := workflow.GetSignalChannel(ctx, SignalClaim)
	handlers := []signalHandler{
		{claims, func(c workflow.ReceiveChannel) {
			var r ClaimRequest
			c.Receive(ctx, &r)
			p.enqueue(r)
			// Take the whole burst that has arrived, so that one pass serves it.
			for p.version >= poolVersionRolling && c.ReceiveAsync(&r) {
				p.enqueue(r)
			}
		}},
		{workflow.GetSignalChannel(ctx, SignalCancelClaim), func(c workflow.ReceiveChannel) {
			var leaseID string
			c.Receive(ctx, &leaseID)
			p.dequeue(leaseID)
		}},
		{workflow.GetSignalChannel(ctx, SignalRelease), func(c workflow.ReceiveChannel) {
			var r ReleaseRequest
			c.Receive(ctx, &r)
			p.release(r)
		}},
		{workflow.GetSignalChannel(ctx, instance.SignalMemberReady), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			p.memberReady(r)
		}},
		{workflow.GetSignalChannel(ctx, instance.SignalMemberFail), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			p.memberFailed(r)
		}},
		{workflow.GetSignalChannel(ctx, instance.SignalMemberGone), func(c workflow.ReceiveChannel) {
			var r instance.MemberReport
			c.Receive(ctx, &r)
			delete(st.Members, r.InstanceID)
		}},
		{workflow.GetSignalChannel(ctx, SignalApply), func(c workflow.ReceiveChannel) {
			var pol pools.Policy
			c.Receive(ctx, &pol)
			if p.version < poolVersionRolling {
				if !reflect.DeepEqual(pol, st.Policy) {
					st.Policy = pol
					st.Generation++
				}
				return
			}
			if templateChanged(pol, st.Policy) {
				st.Generation++
			}
			st.Policy = pol
			st.Draining, st.DeleteGeneration = false, 0 // applying a deleted pool again keeps it
		}},
	}
	if p.version >= poolVersionRolling {
		handlers = append(handlers, signalHandler{workflow.GetSignalChannel(ctx, SignalDeletePool), func(c workflow.ReceiveChannel) {
			var d PoolDeletion
			c.Receive(ctx, &d)
			st.Draining, st.DeleteGeneration = true, d.Generation
		}})
	}
	if p.hardened {
		handlers = append(handlers,
			signalHandler{workflow.GetSignalChannel(ctx, instance.SignalMemberQuarantined), func(c workflow.ReceiveChannel) {
				var r instance.MemberReport
				c.Receive(ctx, &r)
				p.memberQuarantined(r)
			}},
			signalHandler{workflow.GetSignalChannel(ctx, SignalRetryTeardown), func(c workflow.ReceiveChannel) {
				var a MemberAction
				c.Receive(ctx, &a)
				p.retryTeardown(a)
			}},
			signalHandler{workflow.GetSignalChannel(ctx, SignalForgetMember), func(c workflow.ReceiveChannel) {
				var a MemberAction
				c.Receive(ctx, &a)
				p.forgetMember(a)
			}},
		)
	}

	for {
		p.reconcile()
		if st.Draining && p.version >= poolVersionRolling && p.drained() {
			if !p.forgetsUnchanged {
				return p.forget()
			}
			forgotten, err := p.forgetUnchanged()
			if err != nil {
				return err
			}
			if !forgotten {
				// Applied again after the delete: the row is newer, the pool lives on (its
				// apply signal, if not read yet, comes next).
				st.Draining, st.DeleteGeneration = false, 0
				continue
			}
			if p.endForgotten(handlers) {
				return nil
			}
			continue // applied again while it was being forgotten
		}
		if p.hardened {
			p.startHealthChecks()
			if p.shouldContinueAsNew() {
				break
			}
		} else if workflow.GetInfo(ctx).GetCurrentHistoryLength() > maxHistoryBeforeContinue {
			break
		}
		sel := workflow.NewSelector(ctx)
		for _, h := range handlers {
			sel.AddReceive(h.ch, func(c workflow.ReceiveChannel, _ bool) { h.handle(c) })
		}
		for _, c := range p.checks {
			sel.AddFuture(c.future, func(f workflow.Future) { p.healthChecked(c, f) })
		}
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		if wake := p.nextWake(); !wake.IsZero() {
			d := wake.Sub(workflow.Now(ctx))
			if d < time.Millisecond {
				d = time.Millisecond
			}
			sel.AddFuture(workflow.NewTimer(timerCtx, d), func(workflow.Future) {})
		}
		sel.Select(ctx)
		cancelTimer()
		if ctx.Err() != nil {
			// Cancelled (an operator's request): stop serving. Members keep running and stay
			// recorded in the store; starting the pool again adopts nothing, so deleting a
			// pool goes through its drain, not through cancellation.
			return ctx.Err()
		}
	}
	if !p.hardened {
		// Drain what arrived meanwhile so that no signal is lost across the new run.
		for {
			var r ClaimRequest
			if !claims.ReceiveAsync(&r) {
				break
			}
			p.enqueue(r)
		}
		return workflow.NewContinueAsNewError(ctx, PoolWorkflowName, st)
	}
	// Every signal already delivered is handled here, not dropped: a release or a member
	// report lost at this point would leave a member Leased or Deleting for good.
	for pending := true; pending; {
		pending = false
		for _, h := range handlers {
			for h.ch.Len() > 0 {
				h.handle(h.ch)
				pending = true
			}
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	// Health checks in flight are dropped: the next run checks again at NextHealthCheckAt.
	p.pruneAssigned()
	return workflow.NewContinueAsNewError(ctx, PoolWorkflowName, st)
}

// signalHandler is one signal channel of the pool and what it does with a message.
type signalHandler struct {
	ch     workflow.ReceiveChannel
	handle func(workflow.ReceiveChannel)
}

// shouldContinueAsNew: the SDK suggests it (history size or length), or the history passed the
// run's own threshold.
func (p *poolRun) shouldContinueAsNew() bool {
	info := workflow.GetInfo(p.ctx)
	limit := p.st.ContinueAsNewAfter
	if limit <= 0 {
		limit = maxHistoryBeforeContinue
	}
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > limit
}

// pruneAssigned keeps the assignments of live leases and the recent ones.
func (p *poolRun) pruneAssigned() {
	live := map[string]bool{}
	for _, m := range p.st.Members {
		if m.LeaseID != "" {
			live[m.LeaseID] = true
		}
	}
	now := p.now()
	for lease := range p.st.Assigned {
		at, ok := p.st.AssignedAt[lease]
		if live[lease] || (ok && now.Sub(at) < assignedWindow) {
			continue
		}
		delete(p.st.Assigned, lease)
		delete(p.st.AssignedAt, lease)
	}
	for lease := range p.st.AssignedAt {
		if _, ok := p.st.Assigned[lease]; !ok {
			delete(p.st.AssignedAt, lease)
		}
	}
}

type poolRun struct {
	ctx     workflow.Context
	st      *PoolState
	version workflow.Version
	// cancelReclaims: see poolVersionCancelReclaims.
	cancelReclaims bool
	// hardened: see poolVersionHardened.
	hardened bool
	// forgetsUnchanged: see poolVersionForgetsUnchanged.
	forgetsUnchanged bool
	// checks are the health checks in flight, one per host queue.
	checks []*healthCheck
	// arrived holds the claims received since the last reconcile (served now = not queued).
	arrived map[string]bool
}

func (p *poolRun) metrics() metricsHandler {
	return workflow.GetMetricsHandler(p.ctx).WithTags(map[string]string{"profile": p.st.Policy.Name})
}

func (p *poolRun) now() time.Time { return workflow.Now(p.ctx) }

func (p *poolRun) count(phase string) int {
	n := 0
	for _, m := range p.st.Members {
		if m.Phase == phase {
			n++
		}
	}
	return n
}

func (p *poolRun) enqueue(r ClaimRequest) {
	for _, q := range p.st.Queue {
		if q.LeaseID == r.LeaseID {
			return // a retried signal
		}
	}
	if _, done := p.st.Assigned[r.LeaseID]; done {
		return
	}
	if r.At.IsZero() {
		r.At = p.now()
	}
	if p.arrived == nil {
		p.arrived = map[string]bool{}
	}
	p.arrived[r.LeaseID] = true
	p.st.Queue = append(p.st.Queue, r)
	// Service order: higher priority first, then older first (stable for equal keys).
	sort.SliceStable(p.st.Queue, func(i, j int) bool {
		a, b := p.st.Queue[i], p.st.Queue[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.At.Before(b.At)
	})
}

// dequeue forgets the claim of a lease that ended without being bound (released or failed while
// Pending). If the pool had already assigned it a member, the lease may have ended before the
// assignment reached it: that member is torn down here, since its lease will never use nor
// return it.
func (p *poolRun) dequeue(leaseID string) {
	q := p.st.Queue[:0]
	for _, c := range p.st.Queue {
		if c.LeaseID != leaseID {
			q = append(q, c)
		}
	}
	p.st.Queue = q
	if !p.cancelReclaims {
		return
	}
	for _, m := range p.sortedMembers() {
		if m.Phase == MemberLeased && m.LeaseID == leaseID {
			p.teardown(m, RecycleLeaseGone)
		}
	}
}

func (p *poolRun) release(r ReleaseRequest) {
	m, ok := p.st.Members[r.InstanceID]
	if !ok || m.LeaseID != r.LeaseID || m.Phase != MemberLeased {
		return // already released (a retried signal)
	}
	p.teardown(m, RecycleLeaseReleased)
}

func (p *poolRun) memberReady(r instance.MemberReport) {
	m, ok := p.st.Members[r.InstanceID]
	if !ok || m.Phase != MemberCreating {
		return
	}
	m.Phase, m.Placement, m.Endpoint, m.Since, m.Reason = MemberReady, r.Placement, r.Endpoint, p.now(), ""
	p.st.ConsecutiveFailures, p.st.NextAttemptAt, p.st.LastFailureReason = 0, time.Time{}, ""
}

func (p *poolRun) memberFailed(r instance.MemberReport) {
	m, ok := p.st.Members[r.InstanceID]
	if !ok {
		return
	}
	if m.CancelRequested && p.version >= poolVersionRolling {
		r.Reason = fmt.Sprintf("creation took longer than creatingTimeout %s and was cancelled: %s", p.st.Policy.CreatingTimeout, r.Reason)
	}
	// Provision already cleaned up after itself.
	delete(p.st.Members, r.InstanceID)
	p.st.ConsecutiveFailures++
	p.st.LastFailureReason = r.Reason
	pol := p.st.Policy
	backoff := float64(pol.BackoffBase) * math.Pow(pol.BackoffMultiplier, float64(p.st.ConsecutiveFailures-1))
	if backoff > float64(pol.BackoffMax) || backoff <= 0 {
		backoff = float64(pol.BackoffMax)
	}
	p.st.NextAttemptAt = p.now().Add(time.Duration(backoff))
}

// reconcile assigns, expires, provisions and scales down until nothing changes.
func (p *poolRun) reconcile() {
	now := p.now()
	pol := p.st.Policy
	if p.st.Draining && p.version >= poolVersionRolling {
		p.drain()
		return
	}
	// Serve the queue from Ready members, oldest Ready first (current spec first while rolling).
	// The assignments of one pass are signalled together and awaited together: a burst of
	// claims costs one round trip, not one per lease.
	type sentAssignment struct {
		member *Member
		done   workflow.Future
	}
	var sent []sentAssignment
	for len(p.st.Queue) > 0 {
		m := p.nextReady()
		if m == nil {
			break
		}
		claim := p.st.Queue[0]
		p.st.Queue = p.st.Queue[1:]
		m.Phase, m.LeaseID, m.Since = MemberLeased, claim.LeaseID, now
		p.st.Assigned[claim.LeaseID] = m.ID
		if p.hardened {
			p.st.AssignedAt[claim.LeaseID] = now
		}
		p.st.AssignSeq++
		asg := Assignment{Seq: p.st.AssignSeq, InstanceID: m.ID, Backend: pol.Backend,
			Placement: m.Placement, Endpoint: m.Endpoint, Queued: !p.arrived[claim.LeaseID]}
		if p.version >= poolVersionRolling {
			sent = append(sent, sentAssignment{m, p.signalLeaseAsync(claim.LeaseID, SignalAssigned, asg)})
			continue
		}
		if err := p.signalLease(claim.LeaseID, SignalAssigned, asg); err != nil {
			p.teardown(m, RecycleLeaseGone)
		}
	}
	for _, a := range sent {
		if err := a.done.Get(p.ctx, nil); err != nil {
			// The lease is gone (ended, terminated): nobody will release this instance. It was
			// bound all the same, so it is torn down rather than reused.
			p.teardown(a.member, RecycleLeaseGone)
		}
	}
	// Claims past queueTimeout fail with pool_exhausted; the others learn their position.
	var keep []ClaimRequest
	var refusals []workflow.Future
	for _, c := range p.st.Queue {
		if now.Sub(c.At) >= pol.QueueTimeout {
			failure := ClaimFailure{Reason: "pool_exhausted",
				Detail: fmt.Sprintf("no cluster of pool %s became free within queueTimeout %s", pol.Name, pol.QueueTimeout)}
			if p.version >= poolVersionRolling {
				refusals = append(refusals, p.signalLeaseAsync(c.LeaseID, SignalClaimFailed, failure))
			} else {
				_ = p.signalLease(c.LeaseID, SignalClaimFailed, failure)
			}
			continue
		}
		keep = append(keep, c)
	}
	for _, f := range refusals {
		_ = f.Get(p.ctx, nil) // a lease that is gone needs no answer
	}
	p.st.Queue = keep
	p.arrived = nil

	// Provision: warm target plus waiting claims, within maxClusters and the provision concurrency,
	// unless backing off after failures.
	if p.hardened {
		p.provisionHardened(now)
		p.scaleDown(now)
		p.rollOutdated()
		return
	}
	creating := p.count(MemberCreating)
	total := len(p.st.Members)
	ready := p.count(MemberReady)
	if p.version >= poolVersionRolling {
		// Outdated members do not count toward the warm target: replacements are made first,
		// and the outdated ones are rolled below.
		ready -= p.outdatedReady()
		p.recycleWedged()
	}
	want := pol.WarmTarget + len(p.st.Queue) - ready - creating
	if now.Before(p.st.NextAttemptAt) {
		want = 0
	}
	for want > 0 && creating < pol.MaxConcurrentProvisions && total < pol.MaxClusters {
		p.provision()
		want--
		creating++
		total++
	}

	p.scaleDown(now)
	if p.version >= poolVersionRolling {
		p.rollOutdated()
	}
}

// provisionHardened makes members for the warm target and the waiting claims. Members that
// failed a health check and outdated ones do not count toward the target (replacements start
// at once), but while a roll is under way at most maxSurge members exist beyond what the
// target and the claims need.
func (p *poolRun) provisionHardened(now time.Time) {
	pol := p.st.Policy
	p.recycleWedged()
	creating := p.count(MemberCreating)
	healthy := p.healthyReady()
	current := healthy - p.outdatedHealthyReady()
	want := pol.WarmTarget + len(p.st.Queue) - current - creating
	if p.outdatedReady() > 0 {
		want = min(want, p.surgeRoom())
	}
	if now.Before(p.st.NextAttemptAt) || p.quarantineBlocks() {
		want = 0
	}
	total := p.capacityUsed()
	for want > 0 && creating < pol.MaxConcurrentProvisions && total < pol.MaxClusters {
		p.provision()
		want--
		creating++
		total++
	}
}

// surgeRoom is how many more members a roll may create: maxSurge above the warm target and
// the waiting claims, counting every healthy Ready member (outdated ones too) and creations.
func (p *poolRun) surgeRoom() int {
	pol := p.st.Policy
	return pol.WarmTarget + len(p.st.Queue) + pol.MaxSurge - p.healthyReady() - p.count(MemberCreating)
}

func (p *poolRun) outdatedHealthyReady() int {
	n := 0
	for _, m := range p.st.Members {
		if m.Phase == MemberReady && m.HealthFailures == 0 && p.outdated(m) {
			n++
		}
	}
	return n
}

// scaleDown tears down Ready members above the warm target, idle for scaleDownAfter, when
// nobody waits.
func (p *poolRun) scaleDown(now time.Time) {
	pol := p.st.Policy
	if len(p.st.Queue) == 0 {
		excess := p.count(MemberReady) - pol.WarmTarget
		for _, m := range p.sortedMembers() {
			if excess <= 0 {
				break
			}
			if m.Phase == MemberReady && now.Sub(m.Since) >= pol.ScaleDownAfter {
				p.teardown(m, RecycleScaleDown)
				excess--
			}
		}
	}
}

// drain refuses every claim and tears down every member not leased; leased members go when
// their leases end, creating ones once they report.
func (p *poolRun) drain() {
	var refusals []workflow.Future
	for _, c := range p.st.Queue {
		refusals = append(refusals, p.signalLeaseAsync(c.LeaseID, SignalClaimFailed, ClaimFailure{Reason: RecyclePoolDeleted,
			Detail: fmt.Sprintf("pool %s was deleted", p.st.Policy.Name)}))
	}
	p.st.Queue = nil
	for _, f := range refusals {
		_ = f.Get(p.ctx, nil)
	}
	for _, m := range p.sortedMembers() {
		if m.Phase == MemberReady {
			p.teardown(m, RecyclePoolDeleted)
		}
	}
}

// forget removes the drained pool from the store; the workflow then ends.
func (p *poolRun) forget() error {
	var a *Activities
	ctx := workflow.WithActivityOptions(p.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	})
	return workflow.ExecuteActivity(ctx, a.ForgetPool, p.st.Policy.Name).Get(ctx, nil)
}

// forgetUnchanged removes the drained pool's row unless it was applied again since the delete.
func (p *poolRun) forgetUnchanged() (bool, error) {
	var a *Activities
	ctx := workflow.WithActivityOptions(p.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
	})
	var forgotten bool
	err := workflow.ExecuteActivity(ctx, a.ForgetUnchangedPool, ForgetPoolInput{
		Name: p.st.Policy.Name, Generation: p.st.DeleteGeneration}).Get(ctx, &forgotten)
	return forgotten, err
}

// endForgotten reads every signal delivered while the pool was being forgotten, so that the
// workflow never ends with one unread. An apply among them (recorded after the delete, so its
// row stands) keeps the pool serving: false. Otherwise the claims that came are refused with
// pool_deleted and the workflow may end: true.
func (p *poolRun) endForgotten(handlers []signalHandler) bool {
	for {
		pending := false
		for _, h := range handlers {
			for h.ch.Len() > 0 {
				h.handle(h.ch)
				pending = true
			}
		}
		if !p.st.Draining {
			return false
		}
		if !pending && len(p.st.Queue) == 0 {
			return true
		}
		p.drain() // refuses the claims; waiting for the refusals lets more signals arrive
	}
}

func (p *poolRun) outdated(m *Member) bool { return m.Generation < p.st.Generation }

func (p *poolRun) outdatedReady() int {
	n := 0
	for _, m := range p.st.Members {
		if m.Phase == MemberReady && p.outdated(m) {
			n++
		}
	}
	return n
}

// rollOutdated tears down Ready members made from an older spec, at most MaxRecycling at a
// time, and only while at least MinReadyDuringUpgrade members stay Ready; their replacements
// are provisioned by reconcile because outdated members do not count toward the warm target.
// When maxClusters leaves no room for a replacement, it allows one below the floor, or the
// roll would never progress.
func (p *poolRun) rollOutdated() {
	pol := p.st.Policy
	if pol.MaxRecycling == 0 {
		return // drift recycling paused
	}
	rolling := 0
	for _, m := range p.st.Members {
		if m.Phase == MemberDeleting && m.Reason == RecycleSpecDrift {
			rolling++
		}
	}
	floor := pol.MinReadyDuringUpgrade
	noRoom := len(p.st.Members) >= pol.MaxClusters
	if p.hardened {
		// No replacement can be made (maxClusters, or maxSurge used up): one below the floor,
		// or the roll would never progress.
		noRoom = p.capacityUsed() >= pol.MaxClusters || p.surgeRoom() <= 0
	}
	if noRoom && p.count(MemberCreating) == 0 {
		floor = min(floor, max(pol.WarmTarget-1, 0))
	}
	for _, m := range p.sortedMembers() {
		if rolling >= pol.MaxRecycling || p.count(MemberReady)-1 < floor {
			return
		}
		if m.Phase == MemberReady && p.outdated(m) {
			p.teardown(m, RecycleSpecDrift)
			rolling++
		}
	}
}

// recycleWedged cancels creations that outlived creatingTimeout by creatingGrace: their
// Provision cleans up and reports member-failed, which counts as a failure (backoff).
func (p *poolRun) recycleWedged() {
	limit := p.st.Policy.CreatingTimeout + creatingGrace
	for _, m := range p.sortedMembers() {
		if m.Phase != MemberCreating || m.CancelRequested || p.now().Sub(m.Since) < limit {
			continue
		}
		m.CancelRequested, m.Reason = true, RecycleCreatingTimeout
		p.metrics().WithTags(map[string]string{"reason": RecycleCreatingTimeout}).Counter(MetricInstanceRecycles).Inc(1)
		err := workflow.RequestCancelExternalWorkflow(p.ctx, instance.InstanceWorkflowID(m.ID), "").Get(p.ctx, nil)
		if err != nil {
			// Its Provision is no longer running, and its report never came: it cleaned up
			// after itself on failure, and on success it recorded the instance, which the
			// teardown below removes.
			workflow.GetLogger(p.ctx).Warn("wedged member's provision is not running", "member", m.ID, "error", err)
			p.teardown(m, RecycleCreatingTimeout)
		}
	}
}

func (p *poolRun) sortedMembers() []*Member {
	ms := make([]*Member, 0, len(p.st.Members))
	for _, m := range p.st.Members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		if !ms[i].Since.Equal(ms[j].Since) {
			return ms[i].Since.Before(ms[j].Since)
		}
		return ms[i].ID < ms[j].ID
	})
	return ms
}

func (p *poolRun) oldestReady() *Member {
	for _, m := range p.sortedMembers() {
		if m.Phase == MemberReady {
			return m
		}
	}
	return nil
}

// nextReady is the member a claim gets: the oldest Ready one, preferring the current spec
// (from the rolling version on).
func (p *poolRun) nextReady() *Member {
	if p.version < poolVersionRolling {
		return p.oldestReady()
	}
	var stale *Member
	for _, m := range p.sortedMembers() {
		if m.Phase != MemberReady || (p.hardened && m.HealthFailures > 0) {
			continue
		}
		if !p.outdated(m) {
			return m
		}
		if stale == nil {
			stale = m
		}
	}
	return stale
}

// nextWake is the earliest moment reconcile has something to do without a signal.
func (p *poolRun) nextWake() time.Time {
	var t time.Time
	earliest := func(c time.Time) {
		if !c.IsZero() && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	pol := p.st.Policy
	for _, c := range p.st.Queue {
		earliest(c.At.Add(pol.QueueTimeout))
	}
	if p.now().Before(p.st.NextAttemptAt) {
		earliest(p.st.NextAttemptAt)
	}
	if p.count(MemberReady) > pol.WarmTarget {
		for _, m := range p.st.Members {
			if m.Phase == MemberReady {
				earliest(m.Since.Add(pol.ScaleDownAfter))
			}
		}
	}
	if p.version >= poolVersionRolling {
		for _, m := range p.st.Members {
			if m.Phase == MemberCreating && !m.CancelRequested {
				earliest(m.Since.Add(pol.CreatingTimeout + creatingGrace))
			}
		}
	}
	if p.hardened {
		for _, m := range p.st.Members {
			if checked(m) {
				earliest(p.st.NextHealthCheckAt)
				break
			}
		}
	}
	return t
}

func (p *poolRun) provision() {
	p.st.Seq++
	id := fmt.Sprintf("%s-%d", p.st.Policy.Name, p.st.Seq)
	if p.hardened {
		id = fmt.Sprintf("%s-%s-%d", p.st.Policy.Name, p.st.Incarnation, p.st.Seq)
	}
	p.st.Members[id] = &Member{ID: id, Phase: MemberCreating, Since: p.now(), Generation: p.st.Generation}
	pol := p.st.Policy
	in := instance.ProvisionInput{
		Backend: pol.Backend,
		Spec: backends.InstanceSpec{ID: id, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion,
			Options: pol.BackendOptions},
		CreatingTimeout: pol.CreatingTimeout,
		NotifyPool:      PoolWorkflowID(pol.Name),
		Addons:          pol.Addons,
		Gates:           pol.Gates,
	}
	if err := p.startChild(instance.InstanceWorkflowID(id), instance.ProvisionWorkflowName, in); err != nil && p.hardened {
		// Nothing was created: the member is dropped and it counts as a failed creation.
		p.memberFailed(instance.MemberReport{InstanceID: id, Reason: fmt.Sprintf("its instance.Provision workflow did not start: %v", err)})
	}
}

func (p *poolRun) teardown(m *Member, reason string) {
	m.Phase, m.Since, m.Reason = MemberDeleting, p.now(), reason
	id := "teardown-" + m.ID
	if p.hardened {
		// Each attempt is a workflow of its own: a retry after a quarantine is never refused as
		// a duplicate of the failed one.
		m.TeardownAttempts++
		if m.TeardownAttempts > 1 {
			id = fmt.Sprintf("teardown-%s-%d", m.ID, m.TeardownAttempts)
		}
	}
	if p.version >= poolVersionRolling && reason != RecycleCreatingTimeout {
		p.metrics().WithTags(map[string]string{"reason": reason}).Counter(MetricInstanceRecycles).Inc(1)
	}
	pol := p.st.Policy
	in := instance.TeardownInput{
		Backend:    pol.Backend,
		Spec:       backends.InstanceSpec{ID: m.ID, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion},
		Placement:  m.Placement,
		NotifyPool: PoolWorkflowID(pol.Name),
	}
	if err := p.startChild(id, instance.TeardownWorkflowName, in); err != nil && p.hardened {
		// Left Deleting it would wait forever for a report that cannot come.
		m.Phase, m.Reason = MemberQuarantined, fmt.Sprintf("its instance.Teardown workflow did not start: %v", err)
	}
}

// startChild starts a member workflow that outlives this run (continue-as-new, pool deletion):
// it reports back by signal, not through its future.
func (p *poolRun) startChild(id, name string, in any) error {
	cctx := workflow.WithChildOptions(p.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		RetryPolicy:           &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	f := workflow.ExecuteChildWorkflow(cctx, name, in)
	// Wait only for the start, so that an id clash is seen; the result arrives by signal.
	var started workflow.Execution
	err := f.GetChildWorkflowExecution().Get(p.ctx, &started)
	if err != nil {
		workflow.GetLogger(p.ctx).Error("member workflow did not start", "id", id, "error", err)
	}
	return err
}

func (p *poolRun) signalLease(leaseID, signal string, arg any) error {
	return p.signalLeaseAsync(leaseID, signal, arg).Get(p.ctx, nil)
}

func (p *poolRun) signalLeaseAsync(leaseID, signal string, arg any) workflow.Future {
	return workflow.SignalExternalWorkflow(p.ctx, LeaseWorkflowID(leaseID), "", signal, arg)
}

func (p *poolRun) status() PoolStatus {
	pol := p.st.Policy
	s := PoolStatus{
		Name: pol.Name, Ready: p.count(MemberReady), Leased: p.count(MemberLeased), Creating: p.count(MemberCreating),
		Deleting: p.count(MemberDeleting), Outdated: p.outdatedReady(), Generation: p.st.Generation,
		Quarantined: p.count(MemberQuarantined),
		QueueDepth:  len(p.st.Queue), Queue: []string{},
		WarmTarget: pol.WarmTarget, MaxClusters: pol.MaxClusters, ConsecutiveFailures: p.st.ConsecutiveFailures,
		NextAttemptAt: p.st.NextAttemptAt, LastFailureReason: p.st.LastFailureReason,
	}
	for _, c := range p.st.Queue {
		s.Queue = append(s.Queue, c.LeaseID)
		if s.OldestPendingSince.IsZero() || c.At.Before(s.OldestPendingSince) {
			s.OldestPendingSince = c.At
		}
	}
	s.Members = []MemberSummary{}
	for _, m := range p.sortedMembers() {
		s.Members = append(s.Members, MemberSummary{ID: m.ID, Phase: m.Phase, LeaseID: m.LeaseID, Host: m.Placement.HostID,
			Generation: m.Generation, Reason: m.Reason, HealthFailures: m.HealthFailures, HealthMessage: m.HealthMessage})
		if (m.Phase == MemberReady || m.Phase == MemberLeased) && (m.HealthFailures > 0 || m.Broken) {
			s.Unhealthy++
		}
		if m.Phase == MemberCreating && (s.OldestCreatingSince.IsZero() || m.Since.Before(s.OldestCreatingSince)) {
			s.OldestCreatingSince = m.Since
		}
	}
	switch {
	case p.st.Draining:
		s.Phase = PoolDraining
	case p.st.ConsecutiveFailures >= failingAfter:
		s.Phase = PoolFailing
	case p.now().Before(p.st.NextAttemptAt):
		s.Phase = PoolBackoff
	case s.Creating > 0:
		s.Phase = PoolScalingUp
	case s.Ready > pol.WarmTarget:
		s.Phase = PoolScalingDown
	case s.Ready+s.Leased+s.Creating == 0 && pol.WarmTarget == 0:
		s.Phase = PoolIdle
	default:
		s.Phase = PoolHealthy
	}
	return s
}

// drained says whether a deleted pool has nothing left to wait for: every member is gone, or
// (from the hardened version on) Quarantined, which an operator handles after the pool is gone.
func (p *poolRun) drained() bool {
	if !p.hardened {
		return len(p.st.Members) == 0
	}
	for _, m := range p.st.Members {
		if m.Phase != MemberQuarantined {
			return false
		}
	}
	return true
}

// healthCheck is one CheckHealth activity in flight: the members of one host queue.
type healthCheck struct {
	queue  string
	ids    []string
	future workflow.Future
}

func (p *poolRun) healthInterval() time.Duration {
	if d := p.st.Policy.HealthCheckInterval; d > 0 {
		return d
	}
	return pools.DefaultHealthCheckInterval
}

func (p *poolRun) healthThreshold() int {
	if n := p.st.Policy.HealthFailureThreshold; n > 0 {
		return n
	}
	return pools.DefaultHealthFailureThreshold
}

// checked says whether a member's health is watched: Ready members, and Leased ones until they
// are known broken (the lease was told; it holds the member until it ends).
func checked(m *Member) bool {
	return m.Phase == MemberReady || (m.Phase == MemberLeased && !m.Broken)
}

// startHealthChecks starts, when the time has come, one CheckHealth per host queue for the
// members it holds. A queue whose previous check is still in flight is skipped this round.
func (p *poolRun) startHealthChecks() {
	now := p.now()
	if now.Before(p.st.NextHealthCheckAt) {
		return
	}
	p.st.NextHealthCheckAt = now.Add(p.healthInterval())
	inFlight := map[string]bool{}
	for _, c := range p.checks {
		inFlight[c.queue] = true
	}
	byQueue := map[string][]string{}
	var queues []string
	for _, m := range p.sortedMembers() {
		if !checked(m) || inFlight[m.Placement.TaskQueue] {
			continue
		}
		q := m.Placement.TaskQueue
		if _, ok := byQueue[q]; !ok {
			queues = append(queues, q)
		}
		byQueue[q] = append(byQueue[q], m.ID)
	}
	var a *instance.Activities
	for _, q := range queues {
		ids := byQueue[q]
		// One attempt, bounded by the interval: a check that cannot run (the host's worker is
		// gone) counts as a failed check of each of its members, and the next round tries again.
		ctx := workflow.WithActivityOptions(p.ctx, workflow.ActivityOptions{
			TaskQueue:              q,
			ScheduleToCloseTimeout: max(p.healthInterval(), time.Duration(len(ids))*10*time.Second),
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		f := workflow.ExecuteActivity(ctx, a.CheckHealth, instance.HealthRequest{Backend: p.st.Policy.Backend, InstanceIDs: ids})
		p.checks = append(p.checks, &healthCheck{queue: q, ids: ids, future: f})
	}
}

// healthChecked acts on a finished check.
func (p *poolRun) healthChecked(c *healthCheck, f workflow.Future) {
	kept := p.checks[:0]
	for _, o := range p.checks {
		if o != c {
			kept = append(kept, o)
		}
	}
	p.checks = kept
	var results []instance.HealthResult
	if err := f.Get(p.ctx, &results); err != nil {
		msg := fmt.Sprintf("the health check could not run on %s: %v", c.queue, err)
		results = results[:0]
		for _, id := range c.ids {
			results = append(results, instance.HealthResult{InstanceID: id, Message: msg})
		}
	}
	for _, r := range results {
		m, ok := p.st.Members[r.InstanceID]
		if !ok || !checked(m) {
			continue // it changed meanwhile (leased, released, recycled)
		}
		result := "ok"
		if !r.Healthy {
			result = "failed"
		}
		p.metrics().WithTags(map[string]string{"result": result}).Counter(MetricHealthChecks).Inc(1)
		if r.Healthy {
			m.HealthFailures, m.HealthMessage = 0, ""
			continue
		}
		m.HealthFailures++
		m.HealthMessage = r.Message
		if m.HealthFailures < p.healthThreshold() {
			continue
		}
		p.memberBroken(m)
	}
}

// memberBroken acts on a member that failed failureThreshold checks in a row: a Ready one is
// recycled (and replaced); a Leased one is reported to its lease, whose holder decides; once it
// is given back it is torn down and the pool refills.
func (p *poolRun) memberBroken(m *Member) {
	msg := fmt.Sprintf("failed %d health checks in a row: %s", m.HealthFailures, m.HealthMessage)
	p.recordInstanceAsync(m, instance.InstancePhaseUnhealthy, msg)
	if m.Phase == MemberReady {
		p.teardown(m, RecycleHealthFailed)
		return
	}
	m.Broken = true
	report := HealthReport{InstanceID: m.ID, Reason: ReasonHealthFailed, Message: msg, Failures: m.HealthFailures, At: p.now()}
	// A lease that already ended needs no report: its release brings the member back.
	_ = p.signalLeaseAsync(m.LeaseID, SignalInstanceUnhealthy, report).Get(p.ctx, nil)
}

// recordInstanceAsync writes the member's row and its audit event, off the pool's path.
func (p *poolRun) recordInstanceAsync(m *Member, phase, msg string) {
	var a *instance.Activities
	ctx := workflow.WithActivityOptions(p.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	rec := instance.InstanceRecord{ID: m.ID, Pool: p.st.Policy.Name, Backend: p.st.Policy.Backend, Host: m.Placement.HostID,
		Phase: phase, Endpoint: m.Endpoint, Message: msg}
	if m.LeaseID != "" && m.Phase == MemberLeased {
		rec.Message = fmt.Sprintf("leased to %s: %s", m.LeaseID, msg)
	}
	workflow.ExecuteActivity(ctx, a.RecordInstance, rec)
}

// memberQuarantined: the member's teardown kept failing. It stays, visible and counted as
// quarantined, until an operator retries the teardown or forgets it.
func (p *poolRun) memberQuarantined(r instance.MemberReport) {
	m, ok := p.st.Members[r.InstanceID]
	if !ok {
		return
	}
	m.Phase, m.Since, m.Reason = MemberQuarantined, p.now(), r.Reason
}

func (p *poolRun) retryTeardown(a MemberAction) {
	m, ok := p.st.Members[a.InstanceID]
	if !ok || m.Phase != MemberQuarantined {
		return
	}
	p.teardown(m, RecycleManual)
}

func (p *poolRun) forgetMember(a MemberAction) {
	if m, ok := p.st.Members[a.InstanceID]; ok && m.Phase == MemberQuarantined {
		delete(p.st.Members, a.InstanceID)
	}
}

// capacityUsed is what counts against maxClusters: every member but the Quarantined ones (an
// operator's matter, bounded by quarantineBlocks). A broken Leased member still counts: it
// holds what it holds until its lease ends, and maxClusters is a ceiling on what exists.
func (p *poolRun) capacityUsed() int {
	return len(p.st.Members) - p.count(MemberQuarantined)
}

// quarantineBlocks stops new members once as many as maxClusters are Quarantined: a backend
// that cannot delete must not leak without bound.
func (p *poolRun) quarantineBlocks() bool {
	return p.count(MemberQuarantined) >= p.st.Policy.MaxClusters
}

// healthyReady counts the Ready members a claim may get: no failed health check.
func (p *poolRun) healthyReady() int {
	n := 0
	for _, m := range p.st.Members {
		if m.Phase == MemberReady && m.HealthFailures == 0 {
			n++
		}
	}
	return n
}
