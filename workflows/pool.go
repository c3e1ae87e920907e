package workflows

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/pools"
)

// PoolWorkflowName is the registered name of the pool entity workflow.
const PoolWorkflowName = "Pool"

// PoolWorkflowID is the workflow id of a pool.
func PoolWorkflowID(pool string) string { return "pool-" + pool }

// Signals the pool receives, and the query it answers.
const (
	SignalClaim       = "claim"        // ClaimRequest, from a lease
	SignalCancelClaim = "cancel-claim" // lease id, from a lease that no longer waits
	SignalRelease     = "release"      // ReleaseRequest, from a lease done with its instance
	SignalMemberReady = "member-ready" // MemberReport, from Provision
	SignalMemberFail  = "member-failed"
	SignalMemberGone  = "member-gone" // MemberReport, from Teardown
	SignalApply       = "apply"       // pools.Policy: a new spec
	QueryPoolStatus   = "status"
)

// Signals a lease receives from its pool.
const (
	SignalAssigned    = "assigned"     // Assignment
	SignalClaimFailed = "claim-failed" // ClaimFailure
	SignalQueued      = "queued"       // queue position (int)
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

// MemberReport is Provision's or Teardown's word about an instance.
type MemberReport struct {
	InstanceID string                    `json:"instanceId"`
	Placement  activities.HostAssignment `json:"placement"`
	Endpoint   string                    `json:"endpoint,omitempty"`
	Reason     string                    `json:"reason,omitempty"`
}

// Assignment tells a lease which instance is its own.
type Assignment struct {
	// Seq numbers the pool's assignments in the order it made them.
	Seq        int64                     `json:"seq"`
	InstanceID string                    `json:"instanceId"`
	Backend    string                    `json:"backend"`
	Placement  activities.HostAssignment `json:"placement"`
	Endpoint   string                    `json:"endpoint"`
}

// ClaimFailure tells a lease it will not get an instance.
type ClaimFailure struct {
	Reason string `json:"reason"` // pool_exhausted, pool_deleted
	Detail string `json:"detail"`
}

// Member is one instance as the pool tracks it.
type Member struct {
	ID        string                    `json:"id"`
	Phase     string                    `json:"phase"`
	LeaseID   string                    `json:"leaseId,omitempty"`
	Placement activities.HostAssignment `json:"placement"`
	Endpoint  string                    `json:"endpoint,omitempty"`
	Since     time.Time                 `json:"since"`
	// Generation of the policy it was created with (drift detection).
	Generation int64 `json:"generation"`
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
	// Assigned remembers every instance ever handed to a lease (bounded by continue-as-new
	// carrying only live ones): an instance is bound at most once.
	Assigned map[string]string `json:"assigned"`
}

// PoolStatus answers QueryPoolStatus (upstream field names).
type PoolStatus struct {
	Name                string          `json:"name"`
	Phase               string          `json:"phase"`
	Ready               int             `json:"ready"`
	Leased              int             `json:"leased"`
	Creating            int             `json:"creating"`
	Deleting            int             `json:"deleting"`
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
	ID      string `json:"id"`
	Phase   string `json:"phase"`
	LeaseID string `json:"leaseId,omitempty"`
	Host    string `json:"host,omitempty"`
}

// failingAfter consecutive failures the pool reports Failing (upstream: ≥ 3).
const failingAfter = 3

// maxHistoryBeforeContinue keeps the entity's history bounded.
const maxHistoryBeforeContinue = 5000

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
	if err := workflow.SetQueryHandler(ctx, QueryPoolStatus, func() (PoolStatus, error) { return p.status(), nil }); err != nil {
		return err
	}
	claims := workflow.GetSignalChannel(ctx, SignalClaim)
	cancels := workflow.GetSignalChannel(ctx, SignalCancelClaim)
	releases := workflow.GetSignalChannel(ctx, SignalRelease)
	ready := workflow.GetSignalChannel(ctx, SignalMemberReady)
	failed := workflow.GetSignalChannel(ctx, SignalMemberFail)
	gone := workflow.GetSignalChannel(ctx, SignalMemberGone)
	apply := workflow.GetSignalChannel(ctx, SignalApply)

	for {
		p.reconcile()
		if workflow.GetInfo(ctx).GetCurrentHistoryLength() > maxHistoryBeforeContinue {
			break
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(claims, func(c workflow.ReceiveChannel, _ bool) {
			var r ClaimRequest
			c.Receive(ctx, &r)
			p.enqueue(r)
		})
		sel.AddReceive(cancels, func(c workflow.ReceiveChannel, _ bool) {
			var leaseID string
			c.Receive(ctx, &leaseID)
			p.dequeue(leaseID)
		})
		sel.AddReceive(releases, func(c workflow.ReceiveChannel, _ bool) {
			var r ReleaseRequest
			c.Receive(ctx, &r)
			p.release(r)
		})
		sel.AddReceive(ready, func(c workflow.ReceiveChannel, _ bool) {
			var r MemberReport
			c.Receive(ctx, &r)
			p.memberReady(r)
		})
		sel.AddReceive(failed, func(c workflow.ReceiveChannel, _ bool) {
			var r MemberReport
			c.Receive(ctx, &r)
			p.memberFailed(r)
		})
		sel.AddReceive(gone, func(c workflow.ReceiveChannel, _ bool) {
			var r MemberReport
			c.Receive(ctx, &r)
			delete(st.Members, r.InstanceID)
		})
		sel.AddReceive(apply, func(c workflow.ReceiveChannel, _ bool) {
			var pol pools.Policy
			c.Receive(ctx, &pol)
			if !reflect.DeepEqual(pol, st.Policy) {
				st.Policy = pol
				st.Generation++
			}
		})
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
	}
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

type poolRun struct {
	ctx workflow.Context
	st  *PoolState
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

func (p *poolRun) dequeue(leaseID string) {
	q := p.st.Queue[:0]
	for _, c := range p.st.Queue {
		if c.LeaseID != leaseID {
			q = append(q, c)
		}
	}
	p.st.Queue = q
}

func (p *poolRun) release(r ReleaseRequest) {
	m, ok := p.st.Members[r.InstanceID]
	if !ok || m.LeaseID != r.LeaseID || m.Phase != MemberLeased {
		return // already released (a retried signal)
	}
	p.teardown(m)
}

func (p *poolRun) memberReady(r MemberReport) {
	m, ok := p.st.Members[r.InstanceID]
	if !ok || m.Phase != MemberCreating {
		return
	}
	m.Phase, m.Placement, m.Endpoint, m.Since = MemberReady, r.Placement, r.Endpoint, p.now()
	p.st.ConsecutiveFailures, p.st.NextAttemptAt, p.st.LastFailureReason = 0, time.Time{}, ""
}

func (p *poolRun) memberFailed(r MemberReport) {
	if _, ok := p.st.Members[r.InstanceID]; !ok {
		return
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
	// Serve the queue from Ready members, oldest Ready first.
	for len(p.st.Queue) > 0 {
		m := p.oldestReady()
		if m == nil {
			break
		}
		claim := p.st.Queue[0]
		p.st.Queue = p.st.Queue[1:]
		m.Phase, m.LeaseID, m.Since = MemberLeased, claim.LeaseID, now
		p.st.Assigned[claim.LeaseID] = m.ID
		p.st.AssignSeq++
		if err := p.signalLease(claim.LeaseID, SignalAssigned, Assignment{Seq: p.st.AssignSeq, InstanceID: m.ID, Backend: pol.Backend,
			Placement: m.Placement, Endpoint: m.Endpoint}); err != nil {
			// The lease is gone (ended, terminated): nobody will release this instance. It was
			// bound all the same, so it is torn down rather than reused.
			p.teardown(m)
		}
	}
	// Claims past queueTimeout fail with pool_exhausted; the others learn their position.
	var keep []ClaimRequest
	for i, c := range p.st.Queue {
		if now.Sub(c.At) >= pol.QueueTimeout {
			_ = p.signalLease(c.LeaseID, SignalClaimFailed, ClaimFailure{Reason: "pool_exhausted",
				Detail: fmt.Sprintf("no cluster of pool %s became free within queueTimeout %s", pol.Name, pol.QueueTimeout)})
			continue
		}
		_ = i
		keep = append(keep, c)
	}
	p.st.Queue = keep

	// Provision: warm target plus waiting claims, within maxClusters and the provision concurrency,
	// unless backing off after failures.
	creating := p.count(MemberCreating)
	total := len(p.st.Members)
	want := pol.WarmTarget + len(p.st.Queue) - p.count(MemberReady) - creating
	if now.Before(p.st.NextAttemptAt) {
		want = 0
	}
	for want > 0 && creating < pol.MaxConcurrentProvisions && total < pol.MaxClusters {
		p.provision()
		want--
		creating++
		total++
	}

	// Scale down: Ready members above the warm target, idle for scaleDownAfter, when nobody waits.
	if len(p.st.Queue) == 0 {
		excess := p.count(MemberReady) - pol.WarmTarget
		for _, m := range p.sortedMembers() {
			if excess <= 0 {
				break
			}
			if m.Phase == MemberReady && now.Sub(m.Since) >= pol.ScaleDownAfter {
				p.teardown(m)
				excess--
			}
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
	return t
}

func (p *poolRun) provision() {
	p.st.Seq++
	id := fmt.Sprintf("%s-%d", p.st.Policy.Name, p.st.Seq)
	p.st.Members[id] = &Member{ID: id, Phase: MemberCreating, Since: p.now(), Generation: p.st.Generation}
	pol := p.st.Policy
	in := ProvisionInput{
		Backend: pol.Backend,
		Spec: backends.InstanceSpec{ID: id, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion,
			Options: pol.BackendOptions},
		CreatingTimeout: pol.CreatingTimeout,
		NotifyPool:      PoolWorkflowID(pol.Name),
		Addons:          pol.Addons,
		Gates:           pol.Gates,
	}
	p.startChild(InstanceWorkflowID(id), ProvisionWorkflowName, in)
}

func (p *poolRun) teardown(m *Member) {
	m.Phase, m.Since = MemberDeleting, p.now()
	pol := p.st.Policy
	in := TeardownInput{
		Backend:    pol.Backend,
		Spec:       backends.InstanceSpec{ID: m.ID, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion},
		Placement:  m.Placement,
		NotifyPool: PoolWorkflowID(pol.Name),
	}
	p.startChild("teardown-"+m.ID, TeardownWorkflowName, in)
}

// startChild starts a member workflow that outlives this run (continue-as-new, pool deletion):
// it reports back by signal, not through its future.
func (p *poolRun) startChild(id, name string, in any) {
	cctx := workflow.WithChildOptions(p.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		RetryPolicy:           &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	f := workflow.ExecuteChildWorkflow(cctx, name, in)
	// Wait only for the start, so that an id clash is seen; the result arrives by signal.
	var started workflow.Execution
	if err := f.GetChildWorkflowExecution().Get(p.ctx, &started); err != nil {
		workflow.GetLogger(p.ctx).Error("member workflow did not start", "id", id, "error", err)
	}
}

func (p *poolRun) signalLease(leaseID, signal string, arg any) error {
	return workflow.SignalExternalWorkflow(p.ctx, LeaseWorkflowID(leaseID), "", signal, arg).Get(p.ctx, nil)
}

func (p *poolRun) status() PoolStatus {
	pol := p.st.Policy
	s := PoolStatus{
		Name: pol.Name, Ready: p.count(MemberReady), Leased: p.count(MemberLeased), Creating: p.count(MemberCreating),
		Deleting: p.count(MemberDeleting), QueueDepth: len(p.st.Queue), Queue: []string{},
		WarmTarget: pol.WarmTarget, MaxClusters: pol.MaxClusters, ConsecutiveFailures: p.st.ConsecutiveFailures,
		NextAttemptAt: p.st.NextAttemptAt, LastFailureReason: p.st.LastFailureReason,
	}
	for _, c := range p.st.Queue {
		s.Queue = append(s.Queue, c.LeaseID)
	}
	s.Members = []MemberSummary{}
	for _, m := range p.sortedMembers() {
		s.Members = append(s.Members, MemberSummary{ID: m.ID, Phase: m.Phase, LeaseID: m.LeaseID, Host: m.Placement.HostID})
	}
	switch {
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
