package pool

import (
	"fmt"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
)

// Frozen spares (poolVersionFreezesSpares). A pool keeps Policy.ThawedSpares of its Ready
// members running and freezes the spares beyond them (backends.Freezer: their processes stop in
// place and use no CPU). A claim takes a running member first, so a bind never waits on a thaw
// while one runs; after it the pool thaws the next spare, off the claim's path. When only frozen
// members remain, a claim thaws one itself before it is answered (tens of milliseconds).
//
// The decisions are here; the workflow runs the BackendFreeze and BackendThaw activities on the
// member's host queue (FreezeMember) and reports each outcome with FreezeDone.

// FreezeState is where a Ready member is between running and frozen.
type FreezeState string

// Freeze states. Running is the zero value: members of pools that never froze, and members
// recorded before spares were frozen, run.
const (
	Running  FreezeState = ""
	Freezing FreezeState = "Freezing" // its BackendFreeze is under way
	Frozen   FreezeState = "Frozen"
	Thawing  FreezeState = "Thawing" // its BackendThaw is under way
)

// RecycleThawFailed: a frozen member could not be thawed; it is torn down and replaced.
const RecycleThawFailed = "thaw_failed"

// FreezeMember freezes (or, with Thaw, thaws) a member's instance on its host queue. Its outcome
// is the activity's.
type FreezeMember struct {
	MemberID string
	Thaw     bool
	Queue    string
	Request  instance.BackendRequest
}

func (FreezeMember) action() {}

// FreezeResult is the outcome of a FreezeMember the workflow ran off the pool's path.
type FreezeResult struct {
	MemberID string
	Thaw     bool
	// Err is empty when it succeeded. Unavailable: the backend or its host cannot freeze at all
	// (instance.ErrCannotFreeze), so the pool stops trying.
	Err         string
	Unavailable bool
}

// freezes says whether this pool freezes its spares.
func (s *State) freezes() bool {
	return s.Policy.FreezesSpares && s.FreezeUnavailable == "" && !s.Draining
}

// claimOrder is the order in which claims take the Ready members that may be handed out (no
// failed health check, prepared if prepared): current spec first, then outdated, oldest first
// within each.
func (s *State) claimOrder(prepared bool) []*Member {
	var current, stale []*Member
	for _, m := range s.sortedMembers() {
		if m.Phase != MemberReady || m.HealthFailures > 0 || (prepared && !m.Prepared) {
			continue
		}
		if s.outdated(m) {
			stale = append(stale, m)
		} else {
			current = append(current, m)
		}
	}
	return append(current, stale...)
}

// pickForClaim is the member a claim gets among order: the first running one, else the first
// frozen one (the claim thaws it). A member whose freeze or thaw is under way is never picked:
// its activity would race the claim's.
func pickForClaim(order []*Member) *Member {
	var frozen *Member
	for _, m := range order {
		switch m.Freeze {
		case Running:
			return m
		case Frozen:
			if frozen == nil {
				frozen = m
			}
		}
	}
	return frozen
}

// FreezesDue decides which members to freeze or thaw now, and marks them Freezing or Thawing:
// the first ThawedSpares members in claim order keep running (thaws under way count), the
// running ones beyond are frozen, the last in claim order first; when fewer run, the frozen
// ones first in claim order are thawed.
func (s *State) FreezesDue() []FreezeMember {
	if !s.freezes() {
		return nil
	}
	order := s.claimOrder(false)
	running := 0
	for _, m := range order {
		if m.Freeze == Running || m.Freeze == Thawing {
			running++
		}
	}
	keep := s.Policy.ThawedSpares
	var due []FreezeMember
	for i := len(order) - 1; i >= 0 && running > keep; i-- {
		if m := order[i]; m.Freeze == Running && !m.NoFreeze {
			m.Freeze = Freezing
			due = append(due, s.freezeAction(m, false))
			running--
		}
	}
	for _, m := range order {
		if running >= keep {
			break
		}
		if m.Freeze == Frozen {
			m.Freeze = Thawing
			due = append(due, s.freezeAction(m, true))
			running++
		}
	}
	return due
}

func (s *State) freezeAction(m *Member, thaw bool) FreezeMember {
	pol := s.Policy
	return FreezeMember{MemberID: m.ID, Thaw: thaw, Queue: m.Placement.TaskQueue, Request: instance.BackendRequest{
		Backend: pol.Backend, Spec: backends.InstanceSpec{ID: m.ID, Pool: pol.Name, KubernetesVersion: pol.KubernetesVersion}}}
}

// FreezeDone acts on the outcome of a FreezeMember from FreezesDue. A freeze that failed leaves
// the member running (the backend thaws a half-frozen instance) and it is not frozen again; one
// the backend cannot do at all stops the pool freezing. A thaw that failed tears the member down:
// an instance that cannot run again is no spare.
func (s *State) FreezeDone(r FreezeResult, fx Executor) {
	m, ok := s.Members[r.MemberID]
	if !ok {
		return
	}
	switch {
	case !r.Thaw && m.Freeze == Freezing:
		if r.Err == "" {
			m.Freeze = Frozen
			return
		}
		m.Freeze = Running
		if r.Unavailable {
			s.FreezeUnavailable = r.Err
		} else {
			m.NoFreeze = true
		}
	case r.Thaw && m.Freeze == Thawing:
		if r.Err == "" {
			m.Freeze = Running
			return
		}
		m.HealthMessage = fmt.Sprintf("thawing it failed: %s", r.Err)
		if m.Phase == MemberReady {
			s.teardown(m, RecycleThawFailed, fx)
		}
	}
}

// ThawForClaim is what a warm bind of asg must do before it is answered: thaw the member if it
// is frozen (the claim took it because no running one was left). The member is then Thawing; the
// bind runs the FreezeMember and reports with ClaimThawed. Nothing to do: false.
func (s *State) ThawForClaim(asg Assignment) (FreezeMember, bool) {
	m, ok := s.Members[asg.InstanceID]
	if !ok || m.Phase != MemberLeased || m.Freeze != Frozen {
		return FreezeMember{}, false
	}
	m.Freeze = Thawing
	return s.freezeAction(m, true), true
}

// ClaimThawed acts on the thaw a warm bind ran: the member runs, or (failed) the bind is undone
// and the member torn down, and the claim is not bound at once: the API takes the slow path,
// whose claim queues as any other; a slow path's claim that came during the thaw queues now.
// A lease that ended during the thaw (CancelClaim tore its member down) is neither bound nor
// torn down again. It says whether the bind stands.
func (s *State) ClaimThawed(leaseID, instanceID, thawErr string, fx Executor) bool {
	m, ok := s.Members[instanceID]
	if !ok || m.LeaseID != leaseID {
		return false
	}
	return s.claimThawed(m, leaseID, thawErr, fx)
}

func (s *State) claimThawed(m *Member, leaseID, thawErr string, fx Executor) bool {
	during := m.ClaimDuringThaw
	m.ClaimDuringThaw = nil
	if !m.thawingFor(leaseID) {
		return false // the lease ended meanwhile: its member is already being torn down
	}
	if thawErr == "" {
		m.Freeze = Running
		return true
	}
	delete(s.Assigned, leaseID)
	delete(s.AssignedAt, leaseID)
	m.HealthMessage = fmt.Sprintf("thawing it failed: %s", thawErr)
	s.teardown(m, RecycleThawFailed, fx)
	if during != nil {
		s.Claim(*during, fx.Now())
	}
	return false
}

// thawForAssignment thaws a frozen member that a queued claim is about to get, and waits (the
// lease issues its credential on the member's API). A member that cannot be thawed is torn down:
// false.
func (s *State) thawForAssignment(m *Member, fx Executor) bool {
	if m.Freeze != Frozen {
		return true
	}
	m.Freeze = Thawing
	if err := fx.Do(s.freezeAction(m, true)); err != nil {
		m.HealthMessage = fmt.Sprintf("thawing it failed: %v", err)
		s.teardown(m, RecycleThawFailed, fx)
		return false
	}
	m.Freeze = Running
	return true
}

// frozenCount counts the Ready members that are frozen or being frozen.
func (s *State) frozenCount() int {
	n := 0
	//workflowcheck:ignore a count: the order of the members does not matter
	for _, m := range s.Members {
		if m.Phase == MemberReady && (m.Freeze == Frozen || m.Freeze == Freezing) {
			n++
		}
	}
	return n
}
