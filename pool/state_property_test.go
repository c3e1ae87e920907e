package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/propertytest"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// The property test: random sequences of what a pool lives through (claims, retried claims,
// cancels, releases, members ready, failed, gone, quarantined, health checks, spec changes,
// deletes, time passing, continue-as-new), played against the decisions with a simulated world
// (the leases and the member workflows) that also fails some of the pool's actions. After every
// step the invariants are checked. A sequence that breaks one is shrunk (events dropped while it
// still breaks) and printed.
//
// PROPERTY_SEQUENCES overrides the number of sequences; PROPERTY_SEED the first seed.

// eventKind is one thing that happens to a pool.
type eventKind int

const (
	evClaim eventKind = iota
	evRetryClaim
	evCancel
	evRelease
	evRetryRelease
	evReady
	evFail
	evGone
	evQuarantined
	evRetryTeardown
	evForget
	evHealth
	evApply
	evDelete
	evTime
	evContinueAsNew
	evTerminate
	evHealthDone
	evWarmClaim
	evRetryWarmClaim
	evWarmBindLost
	evFreezes
	evFreezeDone
	evWarmGiveUp
	evWarmThawDone
	evMemberDown
	evKinds
)

var eventNames = [...]string{"claim", "retry-claim", "cancel", "release", "retry-release", "member-ready", "member-failed",
	"member-gone", "member-quarantined", "retry-teardown", "forget-member", "health-check-start", "apply", "delete", "time",
	"continue-as-new", "lease-terminated", "health-check-done", "warm-claim", "retry-warm-claim", "warm-bind-lost",
	"freezes-start", "freeze-done", "warm-give-up", "warm-thaw-done", "member-down"}

// event is one step of a sequence. Which lease or member it concerns is pick modulo those that
// qualify when it happens, and seed decides the outcomes of the actions it leads to, so that a
// sequence with events dropped still means much the same.
type event struct {
	kind eventKind
	pick int
	n    int
	dt   time.Duration
	seed uint64
}

func (e event) String() string {
	s := fmt.Sprintf("%s pick=%d", eventNames[e.kind], e.pick)
	switch e.kind {
	case evClaim:
		s += fmt.Sprintf(" priority=%d", e.n%3)
	case evApply:
		s += " " + describePolicy(policyFor(e.n))
	case evTime:
		s += " +" + e.dt.String()
	}
	return s
}

func randomEvent(r *rand.Rand, thaws bool) event {
	// Weights: claims and member reports are the common case.
	weights := [evKinds]int{evClaim: 14, evRetryClaim: 4, evCancel: 5, evRelease: 10, evRetryRelease: 2, evReady: 14, evFail: 4,
		evGone: 10, evQuarantined: 2, evRetryTeardown: 2, evForget: 2, evHealth: 5, evApply: 4, evDelete: 1, evTime: 12,
		evContinueAsNew: 3, evTerminate: 2, evHealthDone: 5, evWarmClaim: 10, evRetryWarmClaim: 3, evWarmBindLost: 1,
		evFreezes: 6, evFreezeDone: 6, evWarmGiveUp: 3, evWarmThawDone: 5, evMemberDown: 3}
	if thaws {
		// The sequences whose pool freezes every spare: warm binds that thaw, and what races them.
		weights[evFreezes], weights[evWarmClaim], weights[evWarmGiveUp], weights[evWarmThawDone] = 20, 20, 8, 10
	}
	kind := eventKind(propertytest.Weighted(r, weights[:]))
	dts := []time.Duration{time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 11 * time.Minute, 20 * time.Minute}
	return event{kind: kind, pick: r.IntN(1000), n: r.IntN(1 << 20), dt: dts[r.IntN(len(dts))], seed: r.Uint64()}
}

// policyFor is the spec an apply event brings: small pools, so that the limits are reached.
func policyFor(n int) poolspec.Policy {
	pol := testPolicy()
	pol.WarmTarget = n % 3
	pol.MaxClusters = 1 + (n/3)%4
	pol.MaxConcurrentProvisions = 1 + (n/12)%2
	pol.MaxRecycling = (n / 24) % 3
	pol.MaxSurge = (n / 72) % 2
	pol.MinReadyDuringUpgrade = (n / 144) % 2
	pol.KubernetesVersion = []string{"v1.37.2", "v1.38.0"}[(n/288)%2]
	pol.HealthFailureThreshold = 1 + (n/576)%2
	pol.FreezesSpares = (n/1152)%3 != 0
	pol.ThawedSpares = (n / 3456) % 3
	return pol
}

func describePolicy(p poolspec.Policy) string {
	return fmt.Sprintf("{warm=%d max=%d concurrent=%d recycling=%d surge=%d minReady=%d version=%s threshold=%d freezes=%v thawed=%d}",
		p.WarmTarget, p.MaxClusters, p.MaxConcurrentProvisions, p.MaxRecycling, p.MaxSurge, p.MinReadyDuringUpgrade,
		p.KubernetesVersion, p.HealthFailureThreshold, p.FreezesSpares, p.ThawedSpares)
}

// leaseModel is a lease as the world sees it.
type leaseModel struct {
	id      string
	claim   ClaimRequest
	ended   bool   // released, cancelled or refused: it sends nothing more
	member  string // the member it was assigned (the signal reached it)
	answers int    // assignments and refusals that reached it or were sent to it
	holds   bool   // it holds member and has not released it
	// inflight is an assignment sent but not yet seen by the lease (it may end meanwhile).
	inflight string
	// terminated: it ended without a word to the pool, whose claim may stay queued until it times out.
	terminated bool
	// warm: the pool bound it at once (ClaimNow) and started it with its member.
	warm bool
	// thawing: its warm bind's Update is thawing a frozen member (warmThaw); gaveUp: the API
	// stopped waiting for that Update and started the lease itself, which claimed by signal.
	thawing, gaveUp bool
}

// warmThaw is a warm bind's Update waiting for the thaw of the member it took.
type warmThaw struct {
	lease *leaseModel
	asg   Assignment
	thaw  FreezeMember
}

// warmGrant is a member bound by ClaimNow: the lease starts holding it. counted: its
// assignment was counted when the bind began (a thaw ran in between).
func (w *world) warmGrant(l *leaseModel, asg Assignment, counted bool) {
	id := asg.InstanceID
	if prev, ok := w.granted[id]; ok {
		w.violate("member %s granted twice: to %s, then (warm) to %s", id, prev, l.id)
	}
	if !w.ready[id] || w.teardown[id] || !w.alive[id] {
		w.violate("member %s warm-bound to %s but it is not a Ready instance", id, l.id)
	}
	if m := w.s.Members[id]; m == nil || !m.Prepared {
		w.violate("member %s warm-bound to %s without a prepared credential", id, l.id)
	}
	if w.frozen[id] {
		w.violate("member %s warm-bound to %s while its instance is frozen", id, l.id)
	}
	if !counted {
		w.assigns++
		if asg.Seq != w.assigns {
			w.violate("warm assignment seq %d, want %d", asg.Seq, w.assigns)
		}
	}
	w.granted[id] = l.id
	l.answers++
	l.member, l.holds, l.warm = id, true, true
	if w.stats != nil {
		w.stats["warm bind"]++
	}
}

// provision phases in the world.
const (
	provRunning   = "running"   // will report ready or failed
	provCancelled = "cancelled" // asked to stop: will report failed (or ready, if it finished first)
	provSilent    = "silent"    // finished without a report coming (the pool's cancel found it gone)
	provReported  = "reported"
)

// world is the pool's surroundings, and the Executor of its actions.
type world struct {
	s        *State
	now      time.Time
	rng      *rand.Rand
	leases   []*leaseModel
	byID     map[string]*leaseModel
	prov     map[string]string // member id → provision phase
	ready    map[string]bool   // members whose provision reported ready
	teardown map[string]bool   // members with a Teardown running
	alive    map[string]bool   // instances that exist (provision started, not failed, not gone, not forgotten)
	granted  map[string]string // member → the lease it was granted to
	wfIDs    map[string]bool   // Teardown workflow ids started
	assigns  int64
	ended    bool // the drained pool ended
	// fx is the executor the state is given (the world itself, or a tracer in front of it).
	fx Executor
	// checks are the health checks in flight.
	checks []CheckHealth
	// frozen are the instances whose processes are frozen; freezes the freezes and thaws of
	// spares under way (FreezesDue), which finish in a later event.
	frozen  map[string]bool
	freezes []FreezeMember
	// thaws are the warm binds waiting for a thaw (their Updates run beside the pool's loop).
	thaws []warmThaw
	// freezeAll: the sequence started freezing every spare; half of its freezes finish at once.
	freezeAll bool
	// stats counts what happened, across sequences (nil: not counted).
	stats map[string]int
	// violation is the first invariant broken, with the action that broke it.
	violation string
}

func newWorld(events []event) *world {
	pol := testPolicy()
	pol.WarmTarget, pol.MaxClusters = 1, 3
	if len(events) > 0 && events[0].seed%4 == 0 {
		// A quarter of the sequences start freezing every spare, so that warm binds thaw.
		pol.FreezesSpares, pol.ThawedSpares = true, 0
	}
	return &world{freezeAll: pol.FreezesSpares,
		s:   NewState(Snapshot{Policy: pol, Incarnation: "t"}),
		now: t0, rng: rand.New(rand.NewPCG(1, 2)), byID: map[string]*leaseModel{}, prov: map[string]string{},
		ready: map[string]bool{}, teardown: map[string]bool{}, alive: map[string]bool{}, granted: map[string]string{},
		wfIDs: map[string]bool{}, frozen: map[string]bool{},
	}
}

// freeze carries a freeze or thaw out on the instance: it fails where the instance is gone, and
// sometimes for no reason (the backend thaws a freeze that failed half-way).
func (w *world) freeze(f FreezeMember) FreezeResult {
	r := FreezeResult{MemberID: f.MemberID, Thaw: f.Thaw}
	switch x := w.rng.IntN(100); {
	case !w.alive[f.MemberID]:
		r.Err = "instance not found"
	case x < 5:
		r.Err = "boom"
	case x < 8 && !f.Thaw:
		r.Err, r.Unavailable = "no freezer here", true
	default:
		w.frozen[f.MemberID] = !f.Thaw
	}
	return r
}

func (w *world) violate(format string, args ...any) {
	if w.violation == "" {
		w.violation = fmt.Sprintf(format, args...)
	}
}

var errWorkflowGone = errors.New("workflow gone")

func (w *world) Now() time.Time { return w.now }

func (w *world) Do(a Action) error { return w.Send(a)() }

// Send carries an action out in the world at once; the wait lets the clock move on, as a
// workflow's does while it waits.
func (w *world) Send(a Action) func() error {
	err := w.act(a)
	return func() error {
		w.now = w.now.Add(time.Duration(w.rng.IntN(2000)) * time.Millisecond)
		return err
	}
}

// failSometimes is a member workflow that did not start (an id clash, the server refused it).
func (w *world) failSometimes() bool { return w.rng.IntN(100) < 4 }

func (w *world) act(a Action) error {
	err := w.carryOut(a)
	if w.stats != nil {
		kind := strings.Fields(describe(a))[0]
		if sl, ok := a.(SignalLease); ok {
			kind += " " + sl.Signal
		}
		if err != nil {
			kind += " (failed)"
		}
		w.stats[kind]++
	}
	return err
}

func (w *world) carryOut(a Action) error {
	s := w.s
	switch a := a.(type) {
	case StartProvision:
		used := s.capacityUsed()
		if used > s.Policy.MaxClusters {
			w.violate("maxClusters exceeded: provision %s makes %d members counted against maxClusters %d", a.MemberID, used, s.Policy.MaxClusters)
		}
		if _, seen := w.prov[a.MemberID]; seen {
			w.violate("member id %s provisioned twice", a.MemberID)
		}
		if w.failSometimes() {
			w.prov[a.MemberID] = provReported // nothing runs, nothing reports
			return errWorkflowGone
		}
		w.prov[a.MemberID] = provRunning
		w.alive[a.MemberID] = true
	case StartTeardown:
		if w.wfIDs[a.WorkflowID] {
			w.violate("teardown workflow id %s started twice", a.WorkflowID)
		}
		if w.teardown[a.MemberID] {
			w.violate("a second teardown of %s while one runs", a.MemberID)
		}
		if w.failSometimes() {
			return errWorkflowGone
		}
		w.wfIDs[a.WorkflowID] = true
		w.teardown[a.MemberID] = true
	case SignalLease:
		l := w.byID[a.LeaseID]
		if l == nil {
			w.violate("signal %s to %s, a lease that never claimed", a.Signal, a.LeaseID)
			return errWorkflowGone
		}
		switch arg := a.Arg.(type) {
		case Assignment:
			if prev, ok := w.granted[arg.InstanceID]; ok {
				w.violate("member %s granted twice: to %s, then to %s", arg.InstanceID, prev, a.LeaseID)
			}
			if !w.ready[arg.InstanceID] || w.teardown[arg.InstanceID] || !w.alive[arg.InstanceID] {
				w.violate("member %s granted to %s but it is not a Ready instance", arg.InstanceID, a.LeaseID)
			}
			w.assigns++
			if arg.Seq != w.assigns {
				w.violate("assignment seq %d, want %d", arg.Seq, w.assigns)
			}
			w.granted[arg.InstanceID] = a.LeaseID
			if w.frozen[arg.InstanceID] {
				w.violate("member %s granted to %s while its instance is frozen", arg.InstanceID, a.LeaseID)
			}
			l.answers++
			if l.answers > 1 {
				w.violate("lease %s answered twice (assigned %s)", a.LeaseID, arg.InstanceID)
			}
			if l.ended {
				return errWorkflowGone
			}
			if w.rng.IntN(10) == 0 {
				l.inflight = arg.InstanceID
				break
			}
			l.member, l.holds = arg.InstanceID, true
		case ClaimFailure:
			l.answers++
			if l.answers > 1 {
				w.violate("lease %s answered twice (refused %s)", a.LeaseID, arg.Reason)
			}
			if l.ended {
				return errWorkflowGone
			}
			l.ended = true
		case HealthReport:
			if w.granted[arg.InstanceID] != a.LeaseID {
				w.violate("lease %s told about %s, which was not granted to it", a.LeaseID, arg.InstanceID)
			}
			if l.ended {
				return errWorkflowGone
			}
		}
	case FreezeMember:
		if !a.Thaw {
			w.violate("member %s frozen on a claim's path", a.MemberID)
		}
		if r := w.freeze(a); r.Err != "" {
			return errors.New(r.Err)
		}
	case CancelCreation:
		if w.prov[a.MemberID] != provRunning {
			return errWorkflowGone
		}
		if w.rng.IntN(100) < 15 {
			// It finished as the cancellation came, and its report was lost.
			w.prov[a.MemberID] = provSilent
			return errWorkflowGone
		}
		w.prov[a.MemberID] = provCancelled
	}
	return nil
}

// pick is the i-th (modulo) of the items that qualify, in a fixed order.
func pick[T any](items []T, i int) (T, bool) {
	var zero T
	if len(items) == 0 {
		return zero, false
	}
	return items[i%len(items)], true
}

// sortedKeys are the keys of m that qualify, in order.
func sortedKeys[V any](m map[string]V, ok func(string) bool) []string {
	var ids []string
	for id := range m {
		if ok(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (w *world) membersIn(phase MemberPhase) []string {
	var ids []string
	for id, m := range w.s.Members {
		if m.Phase == phase {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (w *world) liveLeases(ok func(*leaseModel) bool) []*leaseModel {
	var ls []*leaseModel
	for _, l := range w.leases {
		if ok(l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// step plays one event, then reconciles as the workflow does after every message.
func (w *world) step(e event) {
	if w.ended {
		return
	}
	w.rng = rand.New(rand.NewPCG(e.seed, 7))
	s := w.s
	fx := w.fx
	if fx == nil {
		fx = w
	}
	switch e.kind {
	case evClaim:
		l := &leaseModel{id: fmt.Sprintf("lease-%d", len(w.leases)+1)}
		l.claim = ClaimRequest{LeaseID: l.id, Priority: e.n % 3}
		if e.n%2 == 0 {
			l.claim.At = w.now
		}
		w.leases = append(w.leases, l)
		w.byID[l.id] = l
		s.Claim(l.claim, w.now)
	case evRetryClaim:
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return !l.ended && l.runs() }), e.pick); ok {
			s.Claim(l.claim, w.now)
		}
	case evCancel:
		// A lease that ends while Pending (from where it stands: the assignment may be on its way).
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return !l.ended && !l.holds && l.runs() }), e.pick); ok {
			l.ended, l.member = true, l.inflight
			s.CancelClaim(l.id, fx)
		}
	case evTerminate:
		// A lease workflow that ends without a word to the pool (terminated by an operator).
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return !l.ended && l.runs() }), e.pick); ok {
			l.ended, l.holds, l.terminated = true, false, true
		}
	case evRelease:
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return l.holds }), e.pick); ok {
			l.ended, l.holds = true, false
			s.Release(ReleaseRequest{LeaseID: l.id, InstanceID: l.member, Reason: "released"}, fx)
		}
	case evRetryRelease:
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return l.ended && l.member != "" }), e.pick); ok {
			s.Release(ReleaseRequest{LeaseID: l.id, InstanceID: l.member, Reason: "released"}, fx)
		}
	case evReady, evFail:
		running := sortedKeys(w.prov, func(id string) bool {
			return w.prov[id] == provRunning || w.prov[id] == provCancelled
		})
		if id, ok := pick(running, e.pick); ok {
			cancelled := w.prov[id] == provCancelled
			w.prov[id] = provReported
			if e.kind == evReady && (!cancelled || e.n%4 == 0) {
				w.ready[id] = true
				s.MemberReady(instance.MemberReport{InstanceID: id, Endpoint: "https://" + id,
					Placement: instance.HostAssignment{HostID: "h", TaskQueue: fmt.Sprintf("q%d", e.n%2)}, Prepared: e.n%3 != 0}, w.now)
			} else {
				delete(w.alive, id)
				s.MemberFailed(instance.MemberReport{InstanceID: id, Reason: "boom"}, w.now)
			}
		}
	case evGone, evQuarantined:
		running := sortedKeys(w.teardown, func(id string) bool { return w.teardown[id] })
		if id, ok := pick(running, e.pick); ok {
			delete(w.teardown, id)
			if e.kind == evGone {
				delete(w.alive, id)
				s.MemberGone(instance.MemberReport{InstanceID: id})
			} else {
				s.MemberQuarantined(instance.MemberReport{InstanceID: id, Reason: "delete keeps failing"}, w.now)
			}
		}
	case evRetryTeardown:
		if id, ok := pick(w.membersIn(MemberQuarantined), e.pick); ok {
			s.RetryTeardown(MemberAction{InstanceID: id, Actor: "op"}, fx)
		}
	case evForget:
		if id, ok := pick(w.membersIn(MemberQuarantined), e.pick); ok {
			delete(w.alive, id) // the operator cleaned it up by hand
			s.ForgetMember(MemberAction{InstanceID: id, Actor: "op"})
		}
	case evHealth:
		// The checks that are due start; they finish in a later event (evHealthDone), while the
		// pool goes on, as the workflow's checks do.
		inFlight := map[string]bool{}
		for _, c := range w.checks {
			inFlight[c.Queue] = true
		}
		w.checks = append(w.checks, s.HealthChecksDue(w.now, inFlight)...)
	case evHealthDone:
		if i := e.pick; len(w.checks) > 0 {
			c := w.checks[i%len(w.checks)]
			w.checks = slices.Delete(w.checks, i%len(w.checks), i%len(w.checks)+1)
			var results []instance.HealthResult
			if w.rng.IntN(10) == 0 {
				results = HealthCheckFailed(c, errWorkflowGone)
			} else {
				for _, id := range c.IDs {
					results = append(results, instance.HealthResult{InstanceID: id, Healthy: w.rng.IntN(3) > 0, Message: "sick"})
				}
			}
			s.HealthChecked(results, fx)
		}
	case evMemberDown:
		// A member's host saw its process die (SignalMemberDown), in whatever phase the pool
		// has it by the time the signal arrives.
		var ids []string
		for _, ph := range []MemberPhase{MemberReady, MemberLeased, MemberCreating, MemberDeleting} {
			ids = append(ids, w.membersIn(ph)...)
		}
		if id, ok := pick(ids, e.pick); ok {
			s.MemberDown(MemberDown{InstanceID: id, Message: "killed", At: w.now}, fx)
		}
	case evWarmClaim:
		// POST /v1/leases: the pool's Update binds a prepared member at once, or the lease takes
		// the slow path and claims by signal.
		l := &leaseModel{id: fmt.Sprintf("lease-%d", len(w.leases)+1)}
		l.claim = ClaimRequest{LeaseID: l.id, Priority: e.n % 3, At: w.now}
		w.leases = append(w.leases, l)
		w.byID[l.id] = l
		asg, why, ok := s.ClaimNow(l.claim, w.now)
		if !ok {
			if why == "" {
				w.violate("warm claim of %s refused without a reason", l.id)
			}
			s.Claim(l.claim, w.now)
			break
		}
		if thaw, frozen := s.ThawForClaim(asg); frozen {
			// Only frozen members were left: the Update thaws the one it took before answering,
			// while the pool goes on (evWarmThawDone). Its sequence number is spent now.
			w.assigns++
			l.thawing = true
			w.thaws = append(w.thaws, warmThaw{lease: l, asg: asg, thaw: thaw})
			break
		}
		w.warmGrant(l, asg, false)
	case evWarmGiveUp:
		// The API stops waiting for a warm bind's Update and starts the lease itself: its
		// workflow claims by signal (and may claim again, be released or terminated).
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return l.thawing && !l.gaveUp }), e.pick); ok {
			l.gaveUp = true
			s.Claim(l.claim, w.now)
		}
	case evWarmThawDone:
		if i := e.pick; len(w.thaws) > 0 {
			t := w.thaws[i%len(w.thaws)]
			w.thaws = slices.Delete(w.thaws, i%len(w.thaws), i%len(w.thaws)+1)
			w.thawDone(t, fx)
		}
	case evRetryWarmClaim:
		// The same Update again, in a run that does not know its id: the first answer again.
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return l.holds }), e.pick); ok {
			asg, _, bound := s.ClaimNow(l.claim, w.now)
			if !bound || asg.InstanceID != l.member || asg.Seq != 0 {
				w.violate("retried warm claim of %s (holding %s) answered %v %+v", l.id, l.member, bound, asg)
			}
		}
	case evWarmBindLost:
		// The lease a warm bind started did not start and could not be told.
		if l, ok := pick(w.liveLeases(func(l *leaseModel) bool { return l.holds && l.warm }), e.pick); ok {
			l.ended, l.holds, l.terminated = true, false, true
			s.WarmBindLost(l.id, l.member, fx)
		}
	case evApply:
		s.Apply(policyFor(e.n))
	case evDelete:
		s.Delete(Deletion{Generation: int64(e.n)})
	case evTime:
		w.now = w.now.Add(e.dt)
	case evFreezes:
		for _, f := range s.FreezesDue() {
			for _, o := range w.freezes {
				if o.MemberID == f.MemberID {
					w.violate("a second freeze or thaw of %s while one is under way", f.MemberID)
				}
			}
			if m := s.Members[f.MemberID]; m == nil || m.Phase != MemberReady {
				w.violate("freeze or thaw of %s, which is not Ready", f.MemberID)
			}
			w.freezes = append(w.freezes, f)
		}
		for w.freezeAll && e.n%2 == 0 && len(w.freezes) > 0 {
			f := w.freezes[0]
			w.freezes = w.freezes[1:]
			s.FreezeDone(w.freeze(f), fx)
		}
	case evFreezeDone:
		if i := e.pick; len(w.freezes) > 0 {
			f := w.freezes[i%len(w.freezes)]
			w.freezes = slices.Delete(w.freezes, i%len(w.freezes), i%len(w.freezes)+1)
			s.FreezeDone(w.freeze(f), fx)
		}
	case evContinueAsNew:
		// The run waits for its Update handlers (warm binds' thaws), freezes and thaws before it
		// continues.
		for len(w.thaws) > 0 {
			t := w.thaws[0]
			w.thaws = w.thaws[1:]
			w.thawDone(t, fx)
		}
		for len(w.freezes) > 0 {
			f := w.freezes[0]
			w.freezes = w.freezes[1:]
			s.FreezeDone(w.freeze(f), fx)
		}
		s.PruneAssigned(w.now)
		raw, err := json.Marshal(s.Snapshot)
		if err != nil {
			w.violate("continue-as-new: %v", err)
			return
		}
		var next Snapshot
		if err := json.Unmarshal(raw, &next); err != nil {
			w.violate("continue-as-new: %v", err)
			return
		}
		w.s = NewState(next)
		w.checks = nil // checks in flight are dropped; the next run checks again
	}
	// Assignments sent in an earlier step reach their leases now, unless this event ended them.
	for _, l := range w.leases {
		if l.inflight != "" && !l.ended {
			l.member, l.holds = l.inflight, true
		}
		l.inflight = ""
	}
	w.s.Reconcile(fx)
	if w.s.Draining && w.s.Drained() {
		if e.n%5 == 0 {
			// It was applied again after the delete: the store keeps its row, the pool lives on.
			w.s.KeptByTheStore()
			return
		}
		// The drained pool forgets its row and ends.
		w.ended = true
	}
}

// runs: the lease's workflow runs (it can claim again, end, be released). A lease whose warm
// bind is thawing has none yet, unless the API stopped waiting and started it.
func (l *leaseModel) runs() bool { return !l.thawing || l.gaveUp }

// thawDone: a warm bind's thaw finished; the Update answers. A bind that stands starts the
// lease with its member (if the API started the lease meanwhile, the pool's start finds it
// running and the assignment reaches it by signal: the same grant). A bind undone answers
// thaw_failed and the API takes the slow path, unless it gave up waiting before (its claim
// came during the thaw) or the lease ended meanwhile.
func (w *world) thawDone(t warmThaw, fx Executor) {
	l := t.lease
	l.thawing = false
	r := w.freeze(t.thaw)
	if r.Err == "" && w.rng.IntN(100) < 30 {
		// The member's host worker is gone: its thaw times out (the instance stays frozen).
		w.frozen[t.thaw.MemberID] = true
		r.Err = "activity ScheduleToClose timeout"
	}
	stood := w.s.ClaimThawed(l.id, t.asg.InstanceID, r.Err, fx)
	if w.stats != nil {
		w.stats[fmt.Sprintf("warm bind thawed (stood %v, gave up %v, ended %v)", stood, l.gaveUp, l.ended)]++
	}
	switch {
	case stood && l.terminated:
		// The pool's start of the lease finds it ended and cannot tell it.
		w.s.WarmBindLost(l.id, t.asg.InstanceID, fx)
	case stood && l.ended:
		w.violate("warm bind of %s stands after the lease ended and told the pool", l.id)
	case stood:
		w.warmGrant(l, t.asg, true)
	case !l.gaveUp && !l.ended:
		w.s.Claim(l.claim, w.now)
	}
}

// thawingFor: a warm bind's Update is thawing member id.
func (w *world) thawingFor(id string) bool {
	for _, t := range w.thaws {
		if t.asg.InstanceID == id {
			return true
		}
	}
	return false
}

// check verifies the invariants after a step; it returns the first one broken.
func (w *world) check() string {
	if w.violation != "" {
		return w.violation
	}
	s := w.s
	st := s.Status(w.now)
	// The counts add up.
	if sum := st.Ready + st.Leased + st.Creating + st.Deleting + st.Quarantined; sum != len(s.Members) || len(st.Members) != len(s.Members) {
		return fmt.Sprintf("counts do not add up: ready %d + leased %d + creating %d + deleting %d + quarantined %d = %d, %d members",
			st.Ready, st.Leased, st.Creating, st.Deleting, st.Quarantined, sum, len(s.Members))
	}
	if st.QueueDepth != len(s.Queue) || len(st.Queue) != len(s.Queue) {
		return fmt.Sprintf("queue depth %d, %d queued", st.QueueDepth, len(s.Queue))
	}
	if s.AssignSeq != w.assigns {
		return fmt.Sprintf("assignSeq %d, but %d assignments were sent", s.AssignSeq, w.assigns)
	}
	queued := map[string]bool{}
	for _, c := range s.Queue {
		if queued[c.LeaseID] {
			return fmt.Sprintf("lease %s queued twice", c.LeaseID)
		}
		queued[c.LeaseID] = true
		if _, ok := s.Assigned[c.LeaseID]; ok {
			return fmt.Sprintf("lease %s both queued and assigned", c.LeaseID)
		}
	}
	leasedTo := map[string]string{}
	for id, m := range s.Members {
		if m.ID != id {
			return fmt.Sprintf("member %s filed under %s", m.ID, id)
		}
		switch m.Phase {
		case MemberCreating:
			if p := w.prov[id]; p != provRunning && p != provCancelled && p != provSilent {
				return fmt.Sprintf("member %s Creating, but its provision is %q", id, p)
			}
		case MemberReady, MemberLeased:
			if !w.ready[id] || !w.alive[id] {
				return fmt.Sprintf("member %s %s, but no instance of it is ready", id, m.Phase)
			}
			if m.Freeze == Running && w.frozen[id] {
				return fmt.Sprintf("member %s %s and running as the pool sees it, but its instance is frozen", id, m.Phase)
			}
			if m.Phase == MemberLeased && m.Freeze != Running && !(m.Freeze == Thawing && w.thawingFor(id)) {
				return fmt.Sprintf("member %s Leased but %s", id, m.Freeze)
			}
		case MemberDeleting:
			if !w.teardown[id] {
				return fmt.Sprintf("member %s Deleting, but no teardown of it runs", id)
			}
		case MemberQuarantined:
		default:
			return fmt.Sprintf("member %s in phase %q", id, m.Phase)
		}
		if m.Phase == MemberLeased {
			if m.LeaseID == "" {
				return fmt.Sprintf("member %s Leased to nobody", id)
			}
			if other, ok := leasedTo[m.LeaseID]; ok {
				return fmt.Sprintf("lease %s holds two members: %s and %s", m.LeaseID, other, id)
			}
			leasedTo[m.LeaseID] = id
			if s.Assigned[m.LeaseID] != id {
				return fmt.Sprintf("member %s Leased to %s, but the pool remembers %q assigned to it", id, m.LeaseID, s.Assigned[m.LeaseID])
			}
			if l := w.byID[m.LeaseID]; l != nil && l.ended && !l.terminated {
				return fmt.Sprintf("member %s still Leased to %s, which ended and told the pool", id, m.LeaseID)
			}
			if w.granted[id] != m.LeaseID && !w.thawingFor(id) {
				return fmt.Sprintf("member %s Leased to %s, but it was granted to %q", id, m.LeaseID, w.granted[id])
			}
		}
	}
	// No instance is lost: whatever exists is a member the pool tracks.
	for id := range w.alive {
		if _, ok := s.Members[id]; !ok && w.prov[id] != provSilent {
			return fmt.Sprintf("instance %s exists but the pool no longer tracks it", id)
		}
	}
	// No claim is lost: a lease that claimed and did not end is answered, or waits in the queue.
	for _, l := range w.leases {
		if l.ended || l.answers > 0 {
			if queued[l.id] && !l.terminated {
				return fmt.Sprintf("lease %s is answered or ended but still queued", l.id)
			}
			continue
		}
		if l.thawing {
			if queued[l.id] {
				return fmt.Sprintf("lease %s queued while its warm bind thaws its member", l.id)
			}
			continue // its Update answers when the thaw is done
		}
		if !queued[l.id] {
			return fmt.Sprintf("claim of %s lost: not answered, not queued", l.id)
		}
		if w.ended {
			return fmt.Sprintf("the pool ended with the claim of %s unanswered", l.id)
		}
	}
	// A lease that holds a member is not told it has none.
	for _, l := range w.leases {
		if l.holds {
			if m, ok := s.Members[l.member]; !ok || m.Phase != MemberLeased || m.LeaseID != l.id {
				return fmt.Sprintf("lease %s holds %s, which the pool no longer leases to it", l.id, l.member)
			}
		}
	}
	return ""
}

// play runs a sequence from a fresh pool; it returns the index of the step after which an
// invariant broke and what broke, or -1.
func play(events []event, stats map[string]int) (int, string) {
	w := newWorld(events)
	w.stats = stats
	if msg := w.check(); msg != "" {
		return -1, "initial state: " + msg
	}
	for i, e := range events {
		w.step(e)
		if msg := w.check(); msg != "" {
			return i, msg
		}
	}
	if stats != nil {
		if w.ended {
			stats["pool drained and ended"]++
		}
		stats["members left Quarantined"] += len(w.membersIn(MemberQuarantined))
	}
	return -1, ""
}

func randomSequence(seed uint64) []event {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	n := 1 + r.IntN(40)
	events := make([]event, n)
	thaws := seed%4 == 0
	for i := range events {
		events[i] = randomEvent(r, thaws)
	}
	// The world freezes every spare when the first event's seed says so (newWorld).
	if thaws {
		events[0].seed &^= 3
	} else if events[0].seed%4 == 0 {
		events[0].seed |= 1
	}
	return events
}

func TestPoolDecisionsHoldTheirInvariants(t *testing.T) {
	propertytest.Run(t, propertySequences, func(seed uint64) propertytest.Sequence[event] {
		return propertytest.Sequence[event]{Events: randomSequence(seed), Play: play, Trace: trace}
	})
}

// trace replays a sequence and writes each step with the actions it led to and the pool after it.
func trace(events []event) string {
	var b strings.Builder
	w := newWorld(events)
	rec := &tracer{w: w}
	for i, e := range events {
		rec.log = nil
		w.stepWith(e, rec)
		fmt.Fprintf(&b, "%3d. %s\n", i+1, e)
		for _, l := range rec.log {
			fmt.Fprintf(&b, "       %s\n", l)
		}
		fmt.Fprintf(&b, "       → %s\n", summary(w.s))
		if msg := w.check(); msg != "" {
			fmt.Fprintf(&b, "       ✗ %s\n", msg)
			break
		}
	}
	return b.String()
}

// tracer is the world's executor, writing down each action and its outcome.
type tracer struct {
	w   *world
	log []string
}

func (t *tracer) Now() time.Time { return t.w.Now() }
func (t *tracer) Do(a Action) error {
	return t.Send(a)()
}
func (t *tracer) Send(a Action) func() error {
	wait := t.w.Send(a)
	i := len(t.log)
	t.log = append(t.log, describe(a))
	return func() error {
		err := wait()
		if err != nil {
			t.log[i] += " → " + err.Error()
		}
		return err
	}
}

// stepWith is step with another executor in front of the world (the tracer).
func (w *world) stepWith(e event, fx Executor) {
	w.fx = fx
	w.step(e)
	w.fx = nil
}

func summary(s *State) string {
	var parts []string
	for _, m := range s.sortedMembers() {
		p := m.ID + ":" + string(m.Phase)
		if m.LeaseID != "" && m.Phase == MemberLeased {
			p += "(" + m.LeaseID + ")"
		}
		parts = append(parts, p)
	}
	var q []string
	for _, c := range s.Queue {
		q = append(q, c.LeaseID)
	}
	return fmt.Sprintf("members [%s] queue [%s] %s", strings.Join(parts, " "), strings.Join(q, " "), describePolicy(s.Policy))
}
