package pool

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// The pool's decisions, without Temporal. A State is what a pool knows (its Snapshot, carried
// across continue-as-new, plus what one run keeps); each message the pool receives is a method
// on it that changes the state and asks an Executor to carry out the actions it decides on
// (start a member's Provision or Teardown, signal a lease, cancel a wedged creation, count a
// metric). The workflow (workflows.go) is one Executor, the tests are others.
//
// The decisions talk to an executor rather than return a list of actions because some depend
// on the outcome and the time of an earlier action of the same decision: a member whose
// Provision did not start is dropped before the pool decides whether to roll the next one, a
// wedged creation whose cancellation fails is torn down, and each member is stamped with the
// time its own workflow was started. Recorded histories must replay, so every command goes
// out in the order, and every timestamp is taken at the moment, that the pool always used.

// State is a pool's state as its decisions see it.
type State struct {
	Snapshot
	// arrived holds the claims received since the last reconcile (served now = not queued).
	arrived map[string]bool
}

// NewState is the state a run starts from: st as the previous run left it (or as applied).
func NewState(st Snapshot) *State {
	if st.Members == nil {
		st.Members = map[string]*Member{}
	}
	if st.Assigned == nil {
		st.Assigned = map[string]string{}
	}
	if st.AssignedAt == nil {
		st.AssignedAt = map[string]time.Time{}
	}
	return &State{Snapshot: st}
}

// Executor carries the pool's actions out, in the order they are given.
type Executor interface {
	// Now is the workflow's time: it moves on while the pool waits for an action's outcome.
	Now() time.Time
	// Do carries an action out and waits for its outcome.
	Do(Action) error
	// Send carries an action out without waiting; the function returned waits for its outcome.
	Send(Action) func() error
}

// Action is something the pool decided to do outside its own state.
type Action interface{ action() }

// StartProvision starts the instance.Provision workflow of a new member (it reports back by
// signal). Its outcome is whether the workflow started.
type StartProvision struct {
	MemberID string
	Input    instance.ProvisionInput
}

// StartTeardown starts an instance.Teardown workflow of a member, under WorkflowID (one per
// attempt). Its outcome is whether the workflow started.
type StartTeardown struct {
	MemberID   string
	WorkflowID string
	Reason     string
	Input      instance.TeardownInput
}

// SignalLease sends a lease one of the pool's signals (SignalAssigned with an Assignment,
// SignalClaimFailed with a ClaimFailure, SignalInstanceUnhealthy with a HealthReport). Its
// outcome is an error when the lease's workflow is gone.
type SignalLease struct {
	LeaseID string
	Signal  string
	Arg     any
}

// CancelCreation asks a wedged member's Provision workflow to stop. Its outcome is an error
// when that workflow no longer runs.
type CancelCreation struct {
	MemberID string
}

// CountRecycle counts a member torn down (MetricInstanceRecycles) by reason.
type CountRecycle struct {
	Reason string
}

// CountHealthCheck counts a health check (MetricHealthChecks) by result: ok or failed.
type CountHealthCheck struct {
	Result string
}

// RecordInstance writes a member's store row and its audit event (instance.RecordInstance).
type RecordInstance struct {
	Record instance.Record
}

// CheckHealth is a health check to start: the members of one host queue.
type CheckHealth struct {
	Queue   string
	IDs     []string
	Request instance.HealthRequest
	// Timeout bounds the one attempt.
	Timeout time.Duration
}

func (StartProvision) action()   {}
func (StartTeardown) action()    {}
func (SignalLease) action()      {}
func (CancelCreation) action()   {}
func (CountRecycle) action()     {}
func (CountHealthCheck) action() {}
func (RecordInstance) action()   {}

// Status answers QueryPoolStatus (upstream field names).
type Status struct {
	Name     string        `json:"name"`
	Phase    api.PoolPhase `json:"phase"`
	Ready    int           `json:"ready"`
	Leased   int           `json:"leased"`
	Creating int           `json:"creating"`
	Deleting int           `json:"deleting"`
	// Unhealthy counts Ready or Leased members whose last health check failed.
	Unhealthy int `json:"unhealthy"`
	// Quarantined counts members whose teardown kept failing.
	Quarantined int `json:"quarantined"`
	// Outdated counts Ready members made from an older spec, waiting to be rolled.
	Outdated int `json:"outdated"`
	// Frozen counts Ready members that are frozen (or being frozen): spares beyond thawedSpares.
	Frozen int `json:"frozen"`
	// WarmWindow is the window of spec.scaling.schedule open now: WarmTarget is its minReady.
	WarmWindow *ActiveWindow `json:"warmWindow,omitempty"`
	Generation int64         `json:"generation"`
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

// MemberSummary is one member in Status.
type MemberSummary struct {
	ID         string      `json:"id"`
	Phase      MemberPhase `json:"phase"`
	LeaseID    string      `json:"leaseId,omitempty"`
	Host       string      `json:"host,omitempty"`
	Generation int64       `json:"generation"`
	Reason     string      `json:"reason,omitempty"`
	// HealthFailures and HealthMessage: see Member.
	HealthFailures int    `json:"healthFailures,omitempty"`
	HealthMessage  string `json:"healthMessage,omitempty"`
	// Freeze: see Member.
	Freeze FreezeState `json:"freeze,omitempty"`
}

// failingAfter consecutive failures the pool reports Failing (upstream: ≥ 3).
const failingAfter = 3

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

// MemberPhase is where a member is in its life inside the pool. The pool's phases are its own
// (a member is Leased before its instance row says so); the instance rows use api.InstancePhase.
type MemberPhase string

// Member phases inside the pool.
const (
	MemberCreating MemberPhase = "Creating"
	MemberReady    MemberPhase = "Ready"
	MemberLeased   MemberPhase = "Leased"
	MemberDeleting MemberPhase = "Deleting"
)

// Member is one instance as the pool tracks it.
type Member struct {
	ID        string                  `json:"id"`
	Phase     MemberPhase             `json:"phase"`
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
	// SyncReason is what a Leased member's lease was last told of its sync errors (the newest
	// one's reason code; empty: synced, or never told).
	SyncReason api.ReasonCode `json:"syncReason,omitempty"`
	// TeardownAttempts counts the teardowns started for it (each a workflow of its own id).
	TeardownAttempts int `json:"teardownAttempts,omitempty"`
	// Prepared: its lease credential was prepared when it became Ready (UpdateClaim binds it).
	Prepared bool `json:"prepared,omitempty"`
	// CertificatesWarned: its lease was told its certificates expire soon (CertificatesChecked).
	CertificatesWarned bool `json:"certificatesWarned,omitempty"`
	// Freeze says whether a Ready spare runs or is frozen (freeze.go); NoFreeze that freezing
	// it failed, so it is not tried again.
	Freeze   FreezeState `json:"freeze,omitempty"`
	NoFreeze bool        `json:"noFreeze,omitempty"`
	// ClaimDuringThaw is the slow path's claim of the lease a warm bind is thawing this member
	// for, come while the thaw ran (the API stopped waiting and started the lease itself): it
	// queues if the thaw fails (ClaimThawed).
	ClaimDuringThaw *ClaimRequest `json:"claimDuringThaw,omitempty"`
}

// Snapshot is the whole state of a pool; it is the input of every continue-as-new run.
type Snapshot struct {
	Policy     poolspec.Policy    `json:"policy"`
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
	// CertificateCheckDue is set when the certificate workflow asked for a check not started yet.
	CertificateCheckDue bool `json:"certificateCheckDue,omitempty"`
	// ContinueAsNewAfter is the history length past which the run continues as new (0 means
	// maxHistoryBeforeContinue); tests lower it.
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// FreezeUnavailable says why the pool stopped freezing its spares (the backend or its host
	// cannot); empty while it freezes them.
	FreezeUnavailable string `json:"freezeUnavailable,omitempty"`
	// ScheduleState: the pool's Temporal Schedules and its open warm window (schedules.go).
	ScheduleState
}

// templateChanged says whether a new policy changes what a member is (and so makes existing
// members outdated), as opposed to knobs such as TTL or pool size that apply to members as
// they are.
func templateChanged(a, b poolspec.Policy) bool {
	//workflowcheck:ignore DeepEqual compares two values; nothing in it depends on the run
	return a.Backend != b.Backend || a.KubernetesVersion != b.KubernetesVersion ||
		string(a.BackendOptions) != string(b.BackendOptions) ||
		!reflect.DeepEqual(a.Gates, b.Gates) || !reflect.DeepEqual(a.Addons, b.Addons) ||
		a.HostCluster != b.HostCluster || // members move to the named host cluster
		a.CertificateValidity != b.CertificateValidity
}

func (s *State) count(phase MemberPhase) int {
	n := 0
	//workflowcheck:ignore a count: the order of the members does not matter
	for _, m := range s.Members {
		if m.Phase == phase {
			n++
		}
	}
	return n
}

// Claim queues a lease's claim, unless it is a retried one (queued or already served).
func (s *State) Claim(r ClaimRequest, now time.Time) {
	for _, q := range s.Queue {
		if q.LeaseID == r.LeaseID {
			return // a retried signal
		}
	}
	if id, done := s.Assigned[r.LeaseID]; done {
		// A warm bind of this lease is thawing its member: the claim waits for the thaw's outcome
		// (the bind stands, or the claim queues), instead of passing for a retry.
		if m, ok := s.Members[id]; ok && m.thawingFor(r.LeaseID) {
			if r.At.IsZero() {
				r.At = now
			}
			m.ClaimDuringThaw = &r
		}
		return
	}
	if r.At.IsZero() {
		r.At = now
	}
	if s.arrived == nil {
		s.arrived = map[string]bool{}
	}
	s.arrived[r.LeaseID] = true
	s.Queue = append(s.Queue, r)
	// Service order: higher priority first, then older first (stable for equal keys).
	sort.SliceStable(s.Queue, func(i, j int) bool {
		a, b := s.Queue[i], s.Queue[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.At.Before(b.At)
	})
}

// CancelClaim forgets the claim of a lease that ended without being bound (released or failed
// while Pending). If the pool had already assigned it a member, the lease may have ended before
// the assignment reached it: that member is torn down here, since its lease will never use nor
// return it.
func (s *State) CancelClaim(leaseID string, fx Executor) {
	q := s.Queue[:0]
	for _, c := range s.Queue {
		if c.LeaseID != leaseID {
			q = append(q, c)
		}
	}
	s.Queue = q
	for _, m := range s.sortedMembers() {
		if m.Phase == MemberLeased && m.LeaseID == leaseID {
			s.teardown(m, RecycleLeaseGone, fx)
		}
	}
}

// Release tears down the member a lease is done with (never reused).
func (s *State) Release(r ReleaseRequest, fx Executor) {
	m, ok := s.Members[r.InstanceID]
	if !ok || m.LeaseID != r.LeaseID || m.Phase != MemberLeased {
		return // already released (a retried signal)
	}
	s.teardown(m, RecycleLeaseReleased, fx)
}

// MemberReady: a member's Provision finished; it can be handed out.
func (s *State) MemberReady(r instance.MemberReport, now time.Time) {
	m, ok := s.Members[r.InstanceID]
	if !ok || m.Phase != MemberCreating {
		return
	}
	m.Phase, m.Placement, m.Endpoint, m.Since, m.Reason = MemberReady, r.Placement, r.Endpoint, now, ""
	m.Prepared = r.Prepared
	s.ConsecutiveFailures, s.NextAttemptAt, s.LastFailureReason = 0, time.Time{}, ""
}

// MemberFailed: a member's Provision failed (and cleaned up after itself); the pool backs off.
func (s *State) MemberFailed(r instance.MemberReport, now time.Time) {
	m, ok := s.Members[r.InstanceID]
	if !ok {
		return
	}
	if m.CancelRequested {
		r.Reason = fmt.Sprintf("creation took longer than creatingTimeout %s and was cancelled: %s", s.Policy.CreatingTimeout, r.Reason)
	}
	delete(s.Members, r.InstanceID)
	s.ConsecutiveFailures++
	s.LastFailureReason = r.Reason
	pol := s.Policy
	backoff := float64(pol.BackoffBase) * math.Pow(pol.BackoffMultiplier, float64(s.ConsecutiveFailures-1))
	if backoff > float64(pol.BackoffMax) || backoff <= 0 {
		backoff = float64(pol.BackoffMax)
	}
	s.NextAttemptAt = now.Add(time.Duration(backoff))
}

// MemberGone: a member's Teardown finished.
func (s *State) MemberGone(r instance.MemberReport) {
	delete(s.Members, r.InstanceID)
}

// Apply takes a new spec. A change of what a member is makes the members outdated (a new
// generation); applying a deleted pool again keeps it.
func (s *State) Apply(pol poolspec.Policy) {
	if templateChanged(pol, s.Policy) {
		s.Generation++
	}
	s.Policy = pol
	s.Draining, s.DeleteGeneration = false, 0
}

// Delete starts the pool's drain.
func (s *State) Delete(d Deletion) {
	s.Draining, s.DeleteGeneration = true, d.Generation
}

// KeptByTheStore: the drained pool's store row was applied again after its delete (it has a
// newer generation), so the pool lives on; the apply's own signal, if not read yet, comes next.
func (s *State) KeptByTheStore() {
	s.Draining, s.DeleteGeneration = false, 0
}

// MemberQuarantined: the member's teardown kept failing. It stays, visible and counted as
// quarantined, until an operator retries the teardown or forgets it.
func (s *State) MemberQuarantined(r instance.MemberReport, now time.Time) {
	m, ok := s.Members[r.InstanceID]
	if !ok {
		return
	}
	m.Phase, m.Since, m.Reason = MemberQuarantined, now, r.Reason
}

// RetryTeardown: an operator asks for a Quarantined member's teardown again.
func (s *State) RetryTeardown(a MemberAction, fx Executor) {
	m, ok := s.Members[a.InstanceID]
	if !ok || m.Phase != MemberQuarantined {
		return
	}
	s.teardown(m, RecycleManual, fx)
}

// ForgetMember: an operator cleaned a Quarantined member up by hand.
func (s *State) ForgetMember(a MemberAction) {
	if m, ok := s.Members[a.InstanceID]; ok && m.Phase == MemberQuarantined {
		delete(s.Members, a.InstanceID)
	}
}

// PruneAssigned keeps the assignments of live leases and the recent ones (at continue-as-new).
func (s *State) PruneAssigned(now time.Time) {
	live := map[string]bool{}
	//workflowcheck:ignore builds a set: the order does not matter
	for _, m := range s.Members {
		if m.LeaseID != "" {
			live[m.LeaseID] = true
		}
	}
	//workflowcheck:ignore deletes what is stale: the order does not matter
	for lease := range s.Assigned {
		at, ok := s.AssignedAt[lease]
		if live[lease] || (ok && now.Sub(at) < assignedWindow) {
			continue
		}
		delete(s.Assigned, lease)
		delete(s.AssignedAt, lease)
	}
	//workflowcheck:ignore deletes what is stale: the order does not matter
	for lease := range s.AssignedAt {
		if _, ok := s.Assigned[lease]; !ok {
			delete(s.AssignedAt, lease)
		}
	}
}

// Reconcile assigns, expires, provisions and scales down.
func (s *State) Reconcile(fx Executor) {
	now := fx.Now()
	pol := s.Policy
	s.endWarmWindow(now)
	if s.Draining {
		s.Drain(fx)
		return
	}
	// Serve the queue from Ready members, oldest Ready first (current spec first while rolling).
	// The assignments of one pass are signalled together and awaited together: a burst of
	// claims costs one round trip, not one per lease.
	type sentAssignment struct {
		member *Member
		wait   func() error
	}
	var sent []sentAssignment
	for len(s.Queue) > 0 {
		m := pickForClaim(s.claimOrder(false))
		if m == nil {
			break
		}
		if !s.thawForAssignment(m, fx) {
			continue // torn down; the next one
		}
		claim := s.Queue[0]
		s.Queue = s.Queue[1:]
		m.Phase, m.LeaseID, m.Since = MemberLeased, claim.LeaseID, now
		s.Assigned[claim.LeaseID] = m.ID
		s.AssignedAt[claim.LeaseID] = now
		s.AssignSeq++
		asg := SignalLease{LeaseID: claim.LeaseID, Signal: SignalAssigned, Arg: Assignment{Seq: s.AssignSeq, InstanceID: m.ID,
			Backend: pol.Backend, Placement: m.Placement, Endpoint: m.Endpoint, Queued: !s.arrived[claim.LeaseID]}}
		sent = append(sent, sentAssignment{m, fx.Send(asg)})
	}
	for _, a := range sent {
		if err := a.wait(); err != nil {
			// The lease is gone (ended, terminated): nobody will release this instance. It was
			// bound all the same, so it is torn down rather than reused.
			s.teardown(a.member, RecycleLeaseGone, fx)
		}
	}
	// Claims past queueTimeout fail with pool_exhausted; the others learn their position.
	var keep []ClaimRequest
	var refusals []func() error
	for _, c := range s.Queue {
		if now.Sub(c.At) >= pol.QueueTimeout {
			refusal := SignalLease{LeaseID: c.LeaseID, Signal: SignalClaimFailed, Arg: ClaimFailure{Reason: "pool_exhausted",
				Detail: fmt.Sprintf("no cluster of pool %s became free within queueTimeout %s", pol.Name, pol.QueueTimeout)}}
			refusals = append(refusals, fx.Send(refusal))
			continue
		}
		keep = append(keep, c)
	}
	for _, wait := range refusals {
		_ = wait() // a lease that is gone needs no answer
	}
	s.Queue = keep
	s.arrived = nil

	// Provision: warm target plus waiting claims, within maxClusters and the provision concurrency,
	// unless backing off after failures.
	s.provisionHardened(now, fx)
	s.scaleDown(now, fx)
	s.rollOutdated(fx)
}

// provisionHardened makes members for the warm target and the waiting claims. Members that
// failed a health check and outdated ones do not count toward the target (replacements start
// at once), but while a roll is under way at most maxSurge members exist beyond what the
// target and the claims need.
func (s *State) provisionHardened(now time.Time, fx Executor) {
	pol := s.Policy
	s.recycleWedged(fx)
	creating := s.count(MemberCreating)
	healthy := s.healthyReady()
	current := healthy - s.outdatedHealthyReady()
	want := s.warmTarget() + len(s.Queue) - current - creating
	if s.outdatedReady() > 0 {
		want = min(want, s.surgeRoom())
	}
	if now.Before(s.NextAttemptAt) || s.quarantineBlocks() {
		want = 0
	}
	total := s.capacityUsed()
	for want > 0 && creating < pol.MaxConcurrentProvisions && total < pol.MaxClusters {
		s.provision(fx)
		want--
		creating++
		total++
	}
}

// surgeRoom is how many more members a roll may create: maxSurge above the warm target and
// the waiting claims, counting every healthy Ready member (outdated ones too) and creations.
func (s *State) surgeRoom() int {
	pol := s.Policy
	return s.warmTarget() + len(s.Queue) + pol.MaxSurge - s.healthyReady() - s.count(MemberCreating)
}

func (s *State) outdatedHealthyReady() int {
	n := 0
	//workflowcheck:ignore a count: the order of the members does not matter
	for _, m := range s.Members {
		if m.Phase == MemberReady && m.HealthFailures == 0 && s.outdated(m) {
			n++
		}
	}
	return n
}

// scaleDown tears down Ready members above the warm target, idle for scaleDownAfter, when
// nobody waits.
func (s *State) scaleDown(now time.Time, fx Executor) {
	pol := s.Policy
	if len(s.Queue) == 0 {
		excess := s.count(MemberReady) - s.warmTarget()
		for _, m := range s.sortedMembers() {
			if excess <= 0 {
				break
			}
			if m.Phase == MemberReady && now.Sub(m.Since) >= pol.ScaleDownAfter {
				s.teardown(m, RecycleScaleDown, fx)
				excess--
			}
		}
	}
}

// Drain refuses every claim and tears down every member not leased; leased members go when
// their leases end, creating ones once they report.
func (s *State) Drain(fx Executor) {
	var refusals []func() error
	for _, c := range s.Queue {
		refusals = append(refusals, fx.Send(SignalLease{LeaseID: c.LeaseID, Signal: SignalClaimFailed, Arg: ClaimFailure{Reason: RecyclePoolDeleted,
			Detail: fmt.Sprintf("pool %s was deleted", s.Policy.Name)}}))
	}
	s.Queue = nil
	for _, wait := range refusals {
		_ = wait()
	}
	for _, m := range s.sortedMembers() {
		if m.Phase == MemberReady {
			s.teardown(m, RecyclePoolDeleted, fx)
		}
	}
}

// Drained says whether a deleted pool has nothing left to wait for: every member is gone, or
// Quarantined, which an operator handles after the pool is gone.
func (s *State) Drained() bool {
	//workflowcheck:ignore all members must be Quarantined: the order does not matter
	for _, m := range s.Members {
		if m.Phase != MemberQuarantined {
			return false
		}
	}
	return true
}

func (s *State) outdated(m *Member) bool { return m.Generation < s.Generation }

func (s *State) outdatedReady() int {
	n := 0
	//workflowcheck:ignore a count: the order of the members does not matter
	for _, m := range s.Members {
		if m.Phase == MemberReady && s.outdated(m) {
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
func (s *State) rollOutdated(fx Executor) {
	pol := s.Policy
	if pol.MaxRecycling == 0 {
		return // drift recycling paused
	}
	rolling := 0
	//workflowcheck:ignore a count: the order of the members does not matter
	for _, m := range s.Members {
		if m.Phase == MemberDeleting && m.Reason == RecycleSpecDrift {
			rolling++
		}
	}
	floor := pol.MinReadyDuringUpgrade
	if s.WarmWindow != nil {
		floor = min(floor, s.warmTarget()) // a window with a smaller target rolls down to it
	}
	// No replacement can be made (maxClusters, or maxSurge used up): one below the floor,
	// or the roll would never progress.
	noRoom := s.capacityUsed() >= pol.MaxClusters || s.surgeRoom() <= 0
	if noRoom && s.count(MemberCreating) == 0 {
		floor = min(floor, max(s.warmTarget()-1, 0))
	}
	for _, m := range s.sortedMembers() {
		if rolling >= pol.MaxRecycling || s.count(MemberReady)-1 < floor {
			return
		}
		if m.Phase == MemberReady && s.outdated(m) {
			s.teardown(m, RecycleSpecDrift, fx)
			rolling++
		}
	}
}

// recycleWedged cancels creations that outlived creatingTimeout by creatingGrace: their
// Provision cleans up and reports member-failed, which counts as a failure (backoff).
func (s *State) recycleWedged(fx Executor) {
	limit := s.Policy.CreatingTimeout + creatingGrace
	for _, m := range s.sortedMembers() {
		if m.Phase != MemberCreating || m.CancelRequested || fx.Now().Sub(m.Since) < limit {
			continue
		}
		m.CancelRequested, m.Reason = true, RecycleCreatingTimeout
		_ = fx.Do(CountRecycle{Reason: RecycleCreatingTimeout})
		if err := fx.Do(CancelCreation{MemberID: m.ID}); err != nil {
			// Its Provision is no longer running, and its report never came: it cleaned up
			// after itself on failure, and on success it recorded the instance, which the
			// teardown below removes.
			s.teardown(m, RecycleCreatingTimeout, fx)
		}
	}
}

func (s *State) sortedMembers() []*Member {
	ms := make([]*Member, 0, len(s.Members))
	//workflowcheck:ignore collects the members, sorted below by (Since, ID), a total order
	for _, m := range s.Members {
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

// Why a claim is not bound at once by ClaimNow.
const (
	NotBoundDraining  = "draining"
	NotBoundQueue     = "claims_queued"
	NotBoundNoMember  = "no_prepared_member"
	NotBoundWasServed = "served_before"
	// NotBoundThawFailed: the only member left was frozen and could not be thawed (it is torn
	// down); the claim queues.
	NotBoundThawFailed = "thaw_failed"
)

// ClaimNow binds a claim at once to a Ready member whose lease credential is prepared, if the
// pool serves claims, none is queued before it (a warm bind never overtakes the queue), and
// one is there: the member is Leased and the assignment returned. A claim already bound (a
// retry the Update's id did not catch, from an earlier run) gets its assignment again. When
// the answer is false nothing changed.
func (s *State) ClaimNow(r ClaimRequest, now time.Time) (Assignment, string, bool) {
	if id, done := s.Assigned[r.LeaseID]; done {
		m, ok := s.Members[id]
		if !ok || m.LeaseID != r.LeaseID || m.Phase != MemberLeased {
			return Assignment{}, NotBoundWasServed, false
		}
		return Assignment{InstanceID: m.ID, Backend: s.Policy.Backend, Placement: m.Placement, Endpoint: m.Endpoint,
			At: m.Since, Prepared: true}, "", true
	}
	switch {
	case s.Draining:
		return Assignment{}, NotBoundDraining, false
	case len(s.Queue) > 0:
		return Assignment{}, NotBoundQueue, false
	}
	m := pickForClaim(s.claimOrder(true))
	if m == nil {
		return Assignment{}, NotBoundNoMember, false
	}
	m.Phase, m.LeaseID, m.Since = MemberLeased, r.LeaseID, now
	s.Assigned[r.LeaseID] = m.ID
	s.AssignedAt[r.LeaseID] = now
	s.AssignSeq++
	return Assignment{Seq: s.AssignSeq, InstanceID: m.ID, Backend: s.Policy.Backend, Placement: m.Placement,
		Endpoint: m.Endpoint, At: now, Prepared: true}, "", true
}

// WarmBindLost: the lease a warm bind gave a member to does not run and could not be told;
// nobody will release the member, so it is torn down.
func (s *State) WarmBindLost(leaseID, instanceID string, fx Executor) {
	if m, ok := s.Members[instanceID]; ok && m.Phase == MemberLeased && m.LeaseID == leaseID {
		s.teardown(m, RecycleLeaseGone, fx)
	}
}

// NextWake is the earliest moment Reconcile has something to do without a signal (zero:
// nothing to wait for).
func (s *State) NextWake(now time.Time) time.Time {
	var t time.Time
	earliest := func(c time.Time) {
		if !c.IsZero() && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	pol := s.Policy
	for _, c := range s.Queue {
		earliest(c.At.Add(pol.QueueTimeout))
	}
	if now.Before(s.NextAttemptAt) {
		earliest(s.NextAttemptAt)
	}
	if s.count(MemberReady) > s.warmTarget() {
		//workflowcheck:ignore the earliest deadline: the order does not matter
		for _, m := range s.Members {
			if m.Phase == MemberReady {
				earliest(m.Since.Add(pol.ScaleDownAfter))
			}
		}
	}
	//workflowcheck:ignore the earliest deadline: the order does not matter
	for _, m := range s.Members {
		if m.Phase == MemberCreating && !m.CancelRequested {
			earliest(m.Since.Add(pol.CreatingTimeout + creatingGrace))
		}
	}
	if s.WarmWindow != nil {
		earliest(s.WarmWindow.Until)
	}
	if s.SchedulesError != "" {
		earliest(s.SchedulesRetryAt)
	}
	//workflowcheck:ignore any checked member sets the same deadline: the order does not matter
	for _, m := range s.Members {
		if s.checked(m) {
			earliest(s.NextHealthCheckAt)
			break
		}
	}
	return t
}

func (s *State) provision(fx Executor) {
	s.Seq++
	id := fmt.Sprintf("%s-%s-%d", s.Policy.Name, s.Incarnation, s.Seq)
	s.Members[id] = &Member{ID: id, Phase: MemberCreating, Since: fx.Now(), Generation: s.Generation}
	pol := s.Policy
	in := instance.ProvisionInput{
		Backend: pol.Backend,
		Spec: backends.InstanceSpec{ID: id, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion,
			Options: pol.BackendOptions, CertificateValidity: pol.CertificateValidity},
		CreatingTimeout: pol.CreatingTimeout,
		NotifyPool:      WorkflowID(pol.Name),
		Addons:          pol.Addons,
		Gates:           pol.Gates,
		HostCluster:     pol.HostCluster,
	}
	if err := fx.Do(StartProvision{MemberID: id, Input: in}); err != nil {
		// Nothing was created: the member is dropped and it counts as a failed creation.
		s.MemberFailed(instance.MemberReport{InstanceID: id, Reason: fmt.Sprintf("its instance.Provision workflow did not start: %v", err)}, fx.Now())
	}
}

func (s *State) teardown(m *Member, reason string, fx Executor) {
	m.Phase, m.Since, m.Reason = MemberDeleting, fx.Now(), reason
	id := "teardown-" + m.ID
	// Each attempt is a workflow of its own: a retry after a quarantine is never refused as
	// a duplicate of the failed one.
	m.TeardownAttempts++
	if m.TeardownAttempts > 1 {
		id = fmt.Sprintf("teardown-%s-%d", m.ID, m.TeardownAttempts)
	}
	if reason != RecycleCreatingTimeout {
		_ = fx.Do(CountRecycle{Reason: reason})
	}
	pol := s.Policy
	in := instance.TeardownInput{
		Backend:    pol.Backend,
		Spec:       backends.InstanceSpec{ID: m.ID, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion},
		Placement:  m.Placement,
		NotifyPool: WorkflowID(pol.Name),
	}
	if err := fx.Do(StartTeardown{MemberID: m.ID, WorkflowID: id, Reason: reason, Input: in}); err != nil {
		// Left Deleting it would wait forever for a report that cannot come.
		m.Phase, m.Reason = MemberQuarantined, fmt.Sprintf("its instance.Teardown workflow did not start: %v", err)
	}
}

// Status answers QueryPoolStatus.
func (s *State) Status(now time.Time) Status {
	pol := s.Policy
	st := Status{
		Name: pol.Name, Ready: s.count(MemberReady), Leased: s.count(MemberLeased), Creating: s.count(MemberCreating),
		Deleting: s.count(MemberDeleting), Outdated: s.outdatedReady(), Generation: s.Generation,
		Quarantined: s.count(MemberQuarantined), Frozen: s.frozenCount(),
		QueueDepth: len(s.Queue), Queue: []string{}, WarmWindow: s.WarmWindow,
		WarmTarget: s.warmTarget(), MaxClusters: pol.MaxClusters, ConsecutiveFailures: s.ConsecutiveFailures,
		NextAttemptAt: s.NextAttemptAt, LastFailureReason: s.LastFailureReason,
	}
	for _, c := range s.Queue {
		st.Queue = append(st.Queue, c.LeaseID)
		if st.OldestPendingSince.IsZero() || c.At.Before(st.OldestPendingSince) {
			st.OldestPendingSince = c.At
		}
	}
	st.Members = []MemberSummary{}
	for _, m := range s.sortedMembers() {
		st.Members = append(st.Members, MemberSummary{ID: m.ID, Phase: m.Phase, LeaseID: m.LeaseID, Host: m.Placement.HostID,
			Generation: m.Generation, Reason: m.Reason, HealthFailures: m.HealthFailures, HealthMessage: m.HealthMessage,
			Freeze: m.Freeze})
		if (m.Phase == MemberReady || m.Phase == MemberLeased) && (m.HealthFailures > 0 || m.Broken) {
			st.Unhealthy++
		}
		if m.Phase == MemberCreating && (st.OldestCreatingSince.IsZero() || m.Since.Before(st.OldestCreatingSince)) {
			st.OldestCreatingSince = m.Since
		}
	}
	switch {
	case s.Draining:
		st.Phase = api.PoolDraining
	case s.ConsecutiveFailures >= failingAfter:
		st.Phase = api.PoolFailing
	case now.Before(s.NextAttemptAt):
		st.Phase = api.PoolBackoff
	case st.Creating > 0:
		st.Phase = api.PoolScalingUp
	case st.Ready > s.warmTarget():
		st.Phase = api.PoolScalingDown
	case st.Ready+st.Leased+st.Creating == 0 && s.warmTarget() == 0:
		st.Phase = api.PoolIdle
	default:
		st.Phase = api.PoolHealthy
	}
	return st
}

func (s *State) healthInterval() time.Duration {
	if d := s.Policy.HealthCheckInterval; d > 0 {
		return d
	}
	return poolspec.DefaultHealthCheckInterval
}

func (s *State) healthThreshold() int {
	if n := s.Policy.HealthFailureThreshold; n > 0 {
		return n
	}
	return poolspec.DefaultHealthFailureThreshold
}

// checked says whether a member's health is watched: Ready members, and Leased ones until they
// are known broken (the lease was told; it holds the member until it ends).
func (s *State) checked(m *Member) bool {
	if m.Phase == MemberLeased && m.Freeze == Thawing {
		// A warm bind is thawing it: its lease has no answer yet and a frozen process fails.
		return false
	}
	return m.Phase == MemberReady || (m.Phase == MemberLeased && !m.Broken)
}

// thawingFor: a warm bind of leaseID holds the member and is thawing it.
func (m *Member) thawingFor(leaseID string) bool {
	return m.Phase == MemberLeased && m.LeaseID == leaseID && m.Freeze == Thawing
}

// HealthChecksDue says, when the time has come, which health checks to start: one per host
// queue for the members it holds. A queue whose previous check is still in flight is skipped
// this round.
func (s *State) HealthChecksDue(now time.Time, inFlight map[string]bool) []CheckHealth {
	if now.Before(s.NextHealthCheckAt) {
		return nil
	}
	s.NextHealthCheckAt = now.Add(s.healthInterval())
	byQueue := map[string][]string{}
	var queues []string
	for _, m := range s.sortedMembers() {
		if !s.checked(m) || inFlight[m.Placement.TaskQueue] {
			continue
		}
		q := m.Placement.TaskQueue
		if _, ok := byQueue[q]; !ok {
			queues = append(queues, q)
		}
		byQueue[q] = append(byQueue[q], m.ID)
	}
	var due []CheckHealth
	for _, q := range queues {
		ids := byQueue[q]
		// One attempt, bounded by the interval: a check that cannot run (the host's worker is
		// gone) counts as a failed check of each of its members, and the next round tries again.
		due = append(due, CheckHealth{Queue: q, IDs: ids, Request: instance.HealthRequest{Backend: s.Policy.Backend, InstanceIDs: ids},
			Timeout: max(s.healthInterval(), time.Duration(len(ids))*10*time.Second)})
	}
	return due
}

// HealthCheckFailed is what a check that could not run means: a failed check of each of its
// members.
func HealthCheckFailed(c CheckHealth, err error) []instance.HealthResult {
	msg := fmt.Sprintf("the health check could not run on %s: %v", c.Queue, err)
	var results []instance.HealthResult
	for _, id := range c.IDs {
		results = append(results, instance.HealthResult{InstanceID: id, Message: msg})
	}
	return results
}

// HealthChecked acts on the results of a finished check.
func (s *State) HealthChecked(results []instance.HealthResult, fx Executor) {
	for _, r := range results {
		m, ok := s.Members[r.InstanceID]
		if !ok || !s.checked(m) {
			continue // it changed meanwhile (leased, released, recycled)
		}
		result := "ok"
		if !r.Healthy {
			result = "failed"
		}
		_ = fx.Do(CountHealthCheck{Result: result})
		if r.Healthy {
			m.HealthFailures, m.HealthMessage = 0, ""
			s.syncChecked(m, r.Sync, fx)
			continue
		}
		m.HealthFailures++
		m.HealthMessage = r.Message
		if m.HealthFailures < s.healthThreshold() {
			continue
		}
		s.memberBroken(m, fx)
	}
}

// syncChecked tells a Leased member's lease when what its instance could not sync onto its host
// changed: the first sync error, another reason, or every object synced again. A sync state
// that is unknown (nil: the backend does not sync, or could not say) changes nothing.
func (s *State) syncChecked(m *Member, st *instance.SyncState, fx Executor) {
	if st == nil || m.Phase != MemberLeased || st.Reason == m.SyncReason {
		return
	}
	m.SyncReason = st.Reason
	report := SyncReport{InstanceID: m.ID, Synced: st.Reason == "", Reason: st.Reason, Message: st.Message, Objects: st.Objects, At: fx.Now()}
	// A lease that already ended needs no report.
	_ = fx.Do(SignalLease{LeaseID: m.LeaseID, Signal: SignalInstanceSync, Arg: report})
}

// MemberDown acts on a member its backend saw stop serving on its own (its host's
// SignalMemberDown): as on one that failed failureThreshold health checks, at once. A member
// that is not watched (being thawed for a claim: the thaw itself fails; already broken, torn
// down or gone) is left to what is under way.
func (s *State) MemberDown(r MemberDown, fx Executor) {
	m, ok := s.Members[r.InstanceID]
	if !ok || !s.checked(m) {
		return
	}
	m.HealthFailures = max(m.HealthFailures, s.healthThreshold())
	m.HealthMessage = r.Message
	s.memberLost(m, fmt.Sprintf("stopped serving: %s", r.Message), fx)
}

// memberBroken acts on a member that failed failureThreshold checks in a row: a Ready one is
// recycled (and replaced); a Leased one is reported to its lease, whose holder decides; once it
// is given back it is torn down and the pool refills.
func (s *State) memberBroken(m *Member, fx Executor) {
	s.memberLost(m, fmt.Sprintf("failed %d health checks in a row: %s", m.HealthFailures, m.HealthMessage), fx)
}

// memberLost is memberBroken with the message saying why.
func (s *State) memberLost(m *Member, msg string, fx Executor) {
	rec := instance.Record{ID: m.ID, Pool: s.Policy.Name, Backend: s.Policy.Backend, Host: m.Placement.HostID,
		Phase: api.InstanceUnhealthy, Endpoint: m.Endpoint, Message: msg}
	if m.LeaseID != "" && m.Phase == MemberLeased {
		rec.Message = fmt.Sprintf("leased to %s: %s", m.LeaseID, msg)
	}
	fx.Send(RecordInstance{Record: rec}) // off the pool's path: not awaited
	if m.Phase == MemberReady {
		s.teardown(m, RecycleHealthFailed, fx)
		return
	}
	m.Broken = true
	report := HealthReport{InstanceID: m.ID, Reason: ReasonHealthFailed, Message: msg, Failures: m.HealthFailures, At: fx.Now()}
	// A lease that already ended needs no report: its release brings the member back.
	_ = fx.Do(SignalLease{LeaseID: m.LeaseID, Signal: SignalInstanceUnhealthy, Arg: report})
}

// capacityUsed is what counts against maxClusters: every member but the Quarantined ones (an
// operator's matter, bounded by quarantineBlocks). A broken Leased member still counts: it
// holds what it holds until its lease ends, and maxClusters is a ceiling on what exists.
func (s *State) capacityUsed() int {
	return len(s.Members) - s.count(MemberQuarantined)
}

// quarantineBlocks stops new members once as many as maxClusters are Quarantined: a backend
// that cannot delete must not leak without bound.
func (s *State) quarantineBlocks() bool {
	return s.count(MemberQuarantined) >= s.Policy.MaxClusters
}

// healthyReady counts the Ready members a claim may get: no failed health check.
func (s *State) healthyReady() int {
	n := 0
	//workflowcheck:ignore a count: the order of the members does not matter
	for _, m := range s.Members {
		if m.Phase == MemberReady && m.HealthFailures == 0 {
			n++
		}
	}
	return n
}
