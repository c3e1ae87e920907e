package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kunobi-ninja/kobe/poolspec"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/propertytest"
	"github.com/kunobi-ninja/kobe/pool"
)

// The property test: random sequences of what a lease lives through (its pool's answer, the
// issuance of its credential, extensions and their issuance, releases, heartbeats, the API's
// activity signals, sleeps and wakes and their instance workflows, inactivity checks, the
// pool's reports on its member, time passing, continue-as-new), played against the decisions
// in the order the workflow calls them, with a simulated world (the instance, the credential
// issuances, the Updates waiting their turn) that also fails some of the lease's actions. After
// every step the invariants are checked. A sequence that breaks one is shrunk (events dropped
// while it still breaks) and printed.
//
// PROPERTY_SEQUENCES overrides the number of sequences; PROPERTY_SEED the first seed (as the pool's).

// eventKind is one thing that happens to a lease.
type eventKind int

const (
	evAssign eventKind = iota
	evClaimFailed
	evRelease
	evHeartbeat
	evActivity
	evExtend
	evIssued
	evSleep
	evWake
	evScheduleSleep
	evScheduleWake
	evChildDone
	evInactivityCheck
	evUnhealthy
	evSynced
	evCertificates
	evTime
	evContinueAsNew
	evKinds
)

var eventNames = [...]string{"assign", "claim-failed", "release", "heartbeat", "activity", "extend", "extension-issued",
	"sleep", "wake", "schedule-sleep", "schedule-wake", "instance-workflow-done", "inactivity-check", "member-broken",
	"sync-report", "certificates-report", "time", "continue-as-new"}

// event is one step of a sequence; seed decides the outcomes of what it leads to (an issuance
// failing, a wake failing), so that a sequence with events dropped still means much the same.
type event struct {
	kind eventKind
	dt   time.Duration
	seed uint64
}

func (e event) String() string {
	s := eventNames[e.kind]
	switch e.kind {
	case evExtend:
		s += " by " + e.dt.String()
	case evTime:
		s += " +" + e.dt.String()
	}
	return s
}

// sequence is a lease's terms (setup) and what happens to it.
type sequence struct {
	setup  uint64
	events []event
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// inputFor is the lease a sequence plays: short terms and small budgets, so that the limits are
// reached; a third of them are warm-bound.
func inputFor(setup uint64) Input {
	n := int(setup % (1 << 20))
	ttls := []time.Duration{10 * time.Minute, 30 * time.Minute, time.Hour}
	in := Input{LeaseID: "l1", Pool: "p", Principal: "alice", LeaseTerms: poolspec.LeaseTerms{TTL: ttls[n%3], MaxExtensions: (n / 3) % 4}}
	in.MaxTTL = in.TTL + []time.Duration{0, 30 * time.Minute, 2 * time.Hour}[(n/12)%3]
	in.IdleTimeout = []time.Duration{0, 15 * time.Minute}[(n/36)%2]
	in.AfterInactivity = []time.Duration{0, 20 * time.Minute}[(n/72)%2]
	if (n/144)%3 == 0 {
		in.Bound = &pool.Assignment{InstanceID: "m1", Endpoint: "https://m1", Seq: 1, At: epoch, Prepared: true}
	}
	return in
}

func describeInput(in Input) string {
	s := fmt.Sprintf("{ttl=%s maxTtl=%s maxExtensions=%d idle=%s afterInactivity=%s", in.TTL, in.MaxTTL, in.MaxExtensions,
		in.IdleTimeout, in.AfterInactivity)
	if in.Bound != nil {
		s += " warm"
	}
	return s + "}"
}

func randomEvent(r *rand.Rand) event {
	weights := [evKinds]int{evAssign: 10, evClaimFailed: 1, evRelease: 3, evHeartbeat: 6, evActivity: 4, evExtend: 14,
		evIssued: 10, evSleep: 6, evWake: 6, evScheduleSleep: 2, evScheduleWake: 2, evChildDone: 10, evInactivityCheck: 5,
		evUnhealthy: 3, evSynced: 3, evCertificates: 2, evTime: 14, evContinueAsNew: 3}
	kind := eventKind(propertytest.Weighted(r, weights[:]))
	var dt time.Duration
	switch kind {
	case evExtend:
		// Mostly valid extensions, so that the budget and the ceiling are reached.
		dts := []time.Duration{-time.Minute, 0, 5 * time.Minute, 10 * time.Minute, 10 * time.Minute, 30 * time.Minute, 30 * time.Minute, time.Hour}
		dt = dts[r.IntN(len(dts))]
	case evTime:
		dt = []time.Duration{time.Second, time.Minute, 5 * time.Minute, 11 * time.Minute, 20 * time.Minute, 45 * time.Minute}[r.IntN(6)]
	}
	return event{kind: kind, dt: dt, seed: r.Uint64()}
}

func randomSequence(seed uint64) sequence {
	r := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	events := make([]event, 1+r.IntN(40))
	for i := range events {
		events[i] = randomEvent(r)
	}
	return sequence{setup: r.Uint64(), events: events}
}

// instance states in the world.
const (
	instAwake  = "awake"
	instAsleep = "asleep"
	instBroken = "broken" // it did not wake
)

// sleepRequest is a sleep or wake Update accepted by its validator, waiting for its turn or
// carried out by the instance's workflow.
type sleepRequest struct {
	asleep bool
	cause  string
}

// issuance is an extension's credential being issued.
type issuance struct {
	by   time.Duration
	next time.Time
}

// world plays a lease's decisions the way its workflow does, and keeps what is needed to judge
// them: its own account of the instance, of the extensions committed, of the holder's activity.
type world struct {
	in  Input
	s   *State
	now time.Time
	log []string // what the step did, for the trace

	holding bool // the hold runs (the lease was bound)
	done    bool // the workflow returned
	ending  bool // the lease ended and waits for a sleep or wake to finish before it revokes
	// blocked: the hold waits for the sleep its inactivity check started (it takes no signal
	// and checks no timer meanwhile); deferred are the signals delivered in the meantime.
	blocked  bool
	deferred []event

	instance     string
	waitingExt   []time.Duration
	issuing      *issuance
	waitingSleep []sleepRequest
	child        *sleepRequest // the instance's sleep or wake workflow under way
	childAuto    bool          // the child is the inactivity check's
	notBefore    time.Time     // the inactivity check's hold-back after a failure

	// The world's own account, for the invariants.
	phases    []api.LeasePhase
	boundAt   time.Time
	extended  time.Duration // the sum of committed extensions
	commits   int
	sleeps    int // instance workflows started
	lastSeen  time.Time
	revoked   bool
	violation string
	// stats counts what the sequences went through (nil: not counted).
	stats map[string]int
}

func newWorld(setup uint64) *world {
	w := &world{in: inputFor(setup), now: epoch, instance: instAwake}
	w.s = NewState(w.in)
	w.phases = []api.LeasePhase{w.s.View.Phase}
	if w.in.Bound == nil {
		w.s.Claimed(w.now)
		if setup%37 == 0 {
			// The claim signal could not be sent: the pool's workflow is gone.
			w.s.Fail(api.ReasonNotFound)
			w.done = true
		}
		return w
	}
	w.boundAt, w.lastSeen = w.s.View.BoundAt, w.s.View.BoundAt
	if setup%11 == 0 {
		// EnsureLeaseBound failed: the lease fails, revokes and gives its member back.
		w.s.Fail(api.ReasonBackendError)
		w.done, w.revoked = true, true
		return w
	}
	w.s.Hold()
	w.holding = true
	return w
}

func (w *world) violate(format string, args ...any) {
	if w.violation == "" {
		w.violation = fmt.Sprintf(format, args...)
	}
}

func (w *world) note(format string, args ...any) { w.log = append(w.log, fmt.Sprintf(format, args...)) }

func (w *world) count(what string) {
	if w.stats != nil {
		w.stats[what]++
	}
}

// held says the hold loop runs and takes signals.
func (w *world) held() bool {
	return w.holding && !w.done && !w.ending && !w.blocked && w.s.View.Phase == api.LeaseBound
}

func (w *world) step(e event) {
	if w.blocked && isSignal(e.kind) {
		w.deferred = append(w.deferred, e)
		w.note("delivered while the hold waits for its inactivity sleep")
		w.count("signals delivered during an inactivity sleep")
		return
	}
	switch e.kind {
	case evAssign, evClaimFailed:
		w.answer(e)
	case evRelease:
		w.release()
	case evHeartbeat:
		if w.held() {
			w.s.Heartbeat(w.now)
			w.lastSeen = w.now
		}
	case evActivity:
		if w.held() && w.in.AfterInactivity > 0 {
			w.s.Active(w.now)
		}
	case evExtend:
		w.extend(e.dt)
	case evIssued:
		w.issued(e.seed)
	case evSleep, evWake, evScheduleSleep, evScheduleWake:
		w.askSleep(e.kind)
	case evChildDone:
		w.childDone(e.seed)
	case evInactivityCheck:
		w.inactivityCheck(e.seed)
	case evUnhealthy, evSynced, evCertificates:
		w.report(e)
	case evTime:
		w.advance(w.now.Add(e.dt))
	case evContinueAsNew:
		w.continueAsNew()
	}
	w.hold()
}

func isSignal(k eventKind) bool {
	switch k {
	case evAssign, evClaimFailed, evRelease, evHeartbeat, evActivity, evUnhealthy, evSynced, evCertificates:
		return true
	}
	return false
}

// answer is the pool's assignment or refusal reaching the lease.
func (w *world) answer(e event) {
	if w.done || !w.s.Waiting() {
		return // a late answer: given back, or dropped
	}
	if e.kind == evClaimFailed {
		w.s.Fail(api.ReasonPoolExhausted)
		w.done = true
		return
	}
	w.s.Assigned(pool.Assignment{InstanceID: "m1", Endpoint: "https://m1", Seq: 1, At: w.now,
		Queued: e.seed%2 == 0, Prepared: e.seed%5 == 0})
	expiresAt := w.s.Bind(w.now)
	w.boundAt = w.now
	if w.s.NeedsCredential() {
		w.issue("bind", expiresAt)
		if e.seed%7 == 0 {
			// The credential failed: the lease fails and gives its member back.
			w.note("credential failure")
			w.s.Fail(api.ReasonBackendError)
			w.done = true
			return
		}
	}
	if !w.s.Bound() {
		w.violate("an assigned lease whose credential was issued did not become Bound")
	}
	w.s.Heartbeat(w.now)
	w.lastSeen = w.now
	w.s.Hold()
	w.holding = true
}

// issue is a credential the lease asks of its instance.
func (w *world) issue(why string, until time.Time) {
	w.note("issue a credential (%s) until +%s", why, until.Sub(epoch))
	if w.s.View.Sleeping || w.s.SleepBusy() || w.instance == instAsleep || w.child != nil {
		w.violate("a credential (%s) issued while the lease sleeps or a sleep or wake runs", why)
	}
}

func (w *world) release() {
	switch {
	case w.done || w.ending:
	case w.s.Waiting():
		w.s.Release()
		w.done = true
	case w.held():
		w.s.Release()
		w.end()
	}
}

// extend is an extend Update: refused by its validator, or waiting for its turn.
func (w *world) extend(by time.Duration) {
	if w.done {
		return
	}
	if refused := w.s.ExtendRefusal(by); refused != "" {
		w.note("refused: %s", refused)
		w.count("extensions refused " + string(refused))
		return
	}
	w.waitingExt = append(w.waitingExt, by)
	w.pumpExtensions()
}

// pumpExtensions starts the waiting extensions, one at a time, as the workflow's handlers do
// once no extension issues.
func (w *world) pumpExtensions() {
	for !w.s.Extending() && len(w.waitingExt) > 0 {
		by := w.waitingExt[0]
		w.waitingExt = w.waitingExt[1:]
		next, refused := w.s.BeginExtension(by)
		if refused != "" {
			w.note("extension by %s refused: %s", by, refused)
			w.count("extensions refused after waiting " + string(refused))
			continue
		}
		if w.s.NeedsCredential() {
			w.issue("extension", next)
			w.issuing = &issuance{by: by, next: next}
			return
		}
		w.commit(by, next)
	}
}

func (w *world) commit(by time.Duration, next time.Time) {
	if refused := w.s.ExtensionIssued(next, w.now); refused != "" {
		w.note("extension by %s issued, then refused: %s", by, refused)
	} else {
		w.extended += by
		w.commits++
		w.note("extended by %s", by)
	}
	w.s.EndExtension()
}

// issued is the outcome of the extension's issuance: the instance asleep refuses it, some fail.
func (w *world) issued(seed uint64) {
	x := w.issuing
	if x == nil {
		return
	}
	w.issuing = nil
	switch {
	case w.instance == instAsleep:
		if refused := w.s.ExtensionFailed(true); refused != api.ReasonSleeping {
			w.violate("an extension refused by a sleeping instance answered %q", refused)
		}
		w.s.EndExtension()
	case w.instance == instBroken || seed%4 == 0:
		w.note("credential failure")
		if refused := w.s.ExtensionFailed(false); refused != "" {
			w.violate("a failed issuance answered %q instead of its error", refused)
		}
		w.s.EndExtension()
	default:
		w.commit(x.by, x.next)
	}
	w.pumpExtensions()
}

// askSleep is a sleep or wake Update, the holder's or a schedule's.
func (w *world) askSleep(k eventKind) {
	if w.done {
		return
	}
	if refused := w.s.SleepAdmission(); refused != "" {
		w.note("refused: %s", refused)
		return
	}
	cause := sleepCauseRequest
	if k == evScheduleSleep || k == evScheduleWake {
		cause = sleepCauseSchedule
	}
	w.waitingSleep = append(w.waitingSleep, sleepRequest{asleep: k == evSleep || k == evScheduleSleep, cause: cause})
	w.pumpSleeps()
}

// pumpSleeps decides on the waiting sleeps and wakes, one at a time.
func (w *world) pumpSleeps() {
	for len(w.waitingSleep) > 0 && w.s.SleepMayStart() {
		req := w.waitingSleep[0]
		w.waitingSleep = w.waitingSleep[1:]
		if !w.startSleep(req) {
			continue
		}
		return
	}
}

// startSleep asks the state whether a sleep or wake runs, and starts its instance workflow.
func (w *world) startSleep(req sleepRequest) bool {
	run, refused := w.s.BeginSleep(req.asleep, req.cause, w.now)
	if req.cause == sleepCauseRequest {
		w.lastSeen = w.now
	}
	if !run {
		w.note("sleep=%v: nothing to do %s", req.asleep, refused)
		return false
	}
	w.sleeps++
	w.child = &req
	w.note("instance workflow %d started (sleep=%v, %s)", w.s.View.Sleeps, req.asleep, req.cause)
	return true
}

// childDone is the instance's sleep or wake workflow ending: a sleep the backend cannot do or
// that fails changes nothing; a wake that fails leaves the member broken.
func (w *world) childDone(seed uint64) {
	req := w.child
	if req == nil {
		return
	}
	w.child = nil
	switch {
	case req.asleep && seed%8 == 0:
		w.note("the backend cannot sleep it")
	case req.asleep && seed%8 == 1:
		w.note("the sleep failed")
	case req.asleep:
		w.s.Slept(true, req.cause, w.now, 0)
		w.instance = instAsleep
	case seed%5 == 0:
		w.note("member broken: the wake failed")
		w.s.WakeFailed(errors.New("resume timed out"), seed%2 == 0, w.now)
		w.instance = instBroken
	default:
		w.s.Slept(false, req.cause, w.now, time.Second)
		w.instance = instAwake
	}
	w.s.EndSleep()
	if w.childAuto {
		w.childAuto, w.blocked = false, false
		deferred := w.deferred
		w.deferred = nil
		for _, e := range deferred {
			w.step(e)
		}
	}
	if w.ending {
		w.finish()
	}
	w.pumpSleeps()
}

// inactivityCheck is the lease's inactivity timer firing (time moves to it) and its check.
func (w *world) inactivityCheck(seed uint64) {
	if !w.held() || w.in.AfterInactivity <= 0 || w.s.View.Sleeping {
		return
	}
	w.advance(w.s.InactivityCheckAt(w.now, w.notBefore))
	if !w.held() || !w.s.MayCheckInactivity() || !w.s.Inactive(w.now) {
		return
	}
	if seed%4 == 0 {
		w.note("the backend's record of activity could not be read")
		w.notBefore = w.now.Add(w.in.AfterInactivity)
		return
	}
	if seed%3 == 0 {
		w.s.Used(w.now.Add(-time.Duration(seed%30) * time.Minute))
	}
	if !w.s.Inactive(w.now) {
		return
	}
	if w.startSleep(sleepRequest{asleep: true, cause: sleepCauseInactivity}) {
		w.childAuto, w.blocked = true, true
	}
}

// report is one of the pool's reports on the lease's member, or on another.
func (w *world) report(e event) {
	if !w.held() {
		return
	}
	id := []string{"", "m1", "m2"}[e.seed%3]
	var at time.Time
	if e.seed%2 == 0 {
		at = w.now
	}
	var cond api.LeaseCondition
	var ours bool
	switch e.kind {
	case evUnhealthy:
		cond, ours = w.s.UnhealthyCondition(pool.HealthReport{InstanceID: id, Failures: 3, At: at}, w.now)
	case evSynced:
		cond, ours = w.s.SyncCondition(pool.SyncReport{InstanceID: id, Synced: e.seed%4 < 2, Reason: api.ReasonSyncDenied,
			Message: "denied", Objects: int(e.seed % 3), At: at}, w.now)
	case evCertificates:
		cond, ours = w.s.CertificatesCondition(pool.CertificateReport{InstanceID: id, Message: "soon", At: at}, w.now)
	}
	if ours != (id != "m2") {
		w.violate("a report about instance %q taken as ours=%v", id, ours)
	}
	if ours {
		_, audit := w.s.SetCondition(cond)
		w.note("condition %s=%s %s (audited: %v)", cond.Type, cond.Status, cond.Reason, audit)
	}
}

// deadline is when the world expects the held lease to end: its expiry, or its idle timeout.
func (w *world) deadline() time.Time {
	d := w.boundAt.Add(w.in.TTL + w.extended)
	if w.in.IdleTimeout > 0 && w.lastSeen.Add(w.in.IdleTimeout).Before(d) {
		d = w.lastSeen.Add(w.in.IdleTimeout)
	}
	return d
}

// advance moves time on to `to`; a held lease whose deadline comes first ends then.
func (w *world) advance(to time.Time) {
	if w.held() {
		if d := w.deadline(); !d.After(to) && d.After(w.now) {
			w.now = d
			w.hold()
		}
	}
	if to.After(w.now) {
		w.now = to
	}
}

// hold is the hold loop's check, after anything happened.
func (w *world) hold() {
	if !w.held() {
		return
	}
	due := !w.now.Before(w.deadline())
	if w.s.Expire(w.now) {
		if !due {
			w.violate("the lease expired at +%s, before its deadline +%s", w.now.Sub(epoch), w.deadline().Sub(epoch))
		}
		w.end()
		return
	}
	if due {
		w.violate("the lease is still Bound at +%s, past its deadline +%s", w.now.Sub(epoch), w.deadline().Sub(epoch))
	}
}

// end is the end of a held lease: an extension still issuing is abandoned, a sleep or wake
// under way finishes first, then the credential is revoked and the member given back.
func (w *world) end() {
	w.ending = true
	if w.issuing != nil && w.s.AbandonExtension() {
		w.issuing = nil
		if refused := w.s.ExtensionFailed(false); refused != api.ReasonNotReady {
			w.violate("an abandoned extension answered %q", refused)
		}
		w.s.EndExtension()
		w.note("the extension under way abandoned")
		w.count("extensions abandoned")
		w.pumpExtensions()
	}
	w.pumpSleeps()
	if w.s.Settled() {
		w.finish()
	}
}

func (w *world) finish() {
	if !w.s.Settled() {
		return
	}
	w.ending, w.done = false, true
	w.revoked = w.s.Revokes()
	if !w.revoked && w.instance != instAsleep {
		w.violate("the lease ended without revoking the credential of its awake instance")
	}
	w.note("ended %s (%s), revoked=%v", w.s.View.Phase, w.s.EndEvent(), w.revoked)
}

// continueAsNew carries a held lease, with nothing under way, into the next run through its
// JSON input, as the workflow does.
func (w *world) continueAsNew() {
	if !w.held() || !w.s.Settled() || len(w.waitingExt) > 0 || len(w.waitingSleep) > 0 {
		return
	}
	next := w.in
	next.Resume = w.s.Resume()
	b, err := json.Marshal(next)
	if err != nil {
		w.violate("continue-as-new: %v", err)
		return
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		w.violate("continue-as-new: %v", err)
		return
	}
	before, _ := json.Marshal(w.s.Resume())
	w.s = NewState(in)
	w.s.Hold()
	if after, _ := json.Marshal(w.s.Resume()); string(before) != string(after) {
		w.violate("continue-as-new changed the lease: %s → %s", before, after)
	}
	w.note("continued as new")
	w.count("continued as new")
}

func terminal(p api.LeasePhase) bool {
	return p == api.LeaseReleased || p == api.LeaseExpired || p == api.LeaseFailed
}

// check is the invariants; it returns the first broken, or "".
func (w *world) check() string {
	v := w.s.View
	if last := w.phases[len(w.phases)-1]; v.Phase != last {
		if terminal(last) {
			w.violate("the lease went %s after it ended %s", v.Phase, last)
		}
		w.phases = append(w.phases, v.Phase)
	}
	if w.violation != "" {
		return w.violation
	}
	switch {
	case !v.BoundAt.IsZero() && v.ExpiresAt.After(v.BoundAt.Add(w.in.MaxTTL)):
		return fmt.Sprintf("it expires at +%s, past bind + maxTtl (+%s)", v.ExpiresAt.Sub(epoch), v.BoundAt.Add(w.in.MaxTTL).Sub(epoch))
	case v.Extensions > w.in.MaxExtensions:
		return fmt.Sprintf("%d extensions, over its budget of %d", v.Extensions, w.in.MaxExtensions)
	case v.Extensions != w.commits:
		return fmt.Sprintf("%d extensions counted, %d committed", v.Extensions, w.commits)
	case !w.boundAt.IsZero() && !v.ExpiresAt.Equal(w.boundAt.Add(w.in.TTL+w.extended)):
		return fmt.Sprintf("it expires at +%s, not bind + TTL + the committed extensions (+%s)", v.ExpiresAt.Sub(epoch),
			w.boundAt.Add(w.in.TTL+w.extended).Sub(epoch))
	case w.child == nil && v.Sleeping != (w.instance == instAsleep):
		return fmt.Sprintf("it says Sleeping=%v while its instance is %s", v.Sleeping, w.instance)
	case v.Sleeps != w.sleeps:
		return fmt.Sprintf("%d sleeps counted, %d instance workflows started", v.Sleeps, w.sleeps)
	case w.done && !terminal(v.Phase):
		return fmt.Sprintf("the workflow returned with the lease %s", v.Phase)
	case v.Phase == api.LeaseBound && v.InstanceID == "":
		return "Bound without a member"
	}
	types := map[string]bool{}
	for _, c := range v.Conditions {
		if types[c.Type] {
			return "two conditions " + c.Type
		}
		types[c.Type] = true
		if c.Type == ConditionSleeping && (c.Status == "True") != v.Sleeping {
			return fmt.Sprintf("condition Sleeping=%s while Sleeping=%v", c.Status, v.Sleeping)
		}
	}
	if v.Sleeping && !types[ConditionSleeping] {
		return "asleep without the condition Sleeping"
	}
	return ""
}

// play runs a sequence from a fresh lease; it returns the index of the step after which an
// invariant broke and what broke, or -1.
func play(seq sequence, stats map[string]int) (int, string) {
	w := newWorld(seq.setup)
	w.stats = stats
	if msg := w.check(); msg != "" {
		return -1, "initial state: " + msg
	}
	for i, e := range seq.events {
		w.step(e)
		if msg := w.check(); msg != "" {
			return i, msg
		}
	}
	if stats != nil {
		stats["at the end "+string(w.s.View.Phase)+" "+string(w.s.View.Reason)]++
		stats["extensions committed"] += w.commits
		stats["instance workflows"] += w.sleeps
		if w.instance == instBroken {
			stats["members broken"]++
		}
	}
	return -1, ""
}

func TestLeaseDecisionsHoldTheirInvariants(t *testing.T) {
	propertytest.Run(t, propertySequences, func(seed uint64) propertytest.Sequence[event] {
		seq := randomSequence(seed)
		return propertytest.Sequence[event]{
			Events: seq.events,
			Play: func(events []event, stats map[string]int) (int, string) {
				return play(sequence{setup: seq.setup, events: events}, stats)
			},
			Trace: func(events []event) string { return trace(sequence{setup: seq.setup, events: events}) },
		}
	})
}

// trace replays a sequence and writes each step with what it led to and the lease after it.
func trace(seq sequence) string {
	var b strings.Builder
	w := newWorld(seq.setup)
	fmt.Fprintf(&b, "     lease %s\n       → %s\n", describeInput(w.in), summary(w))
	for i, e := range seq.events {
		w.log = nil
		w.step(e)
		fmt.Fprintf(&b, "%3d. %s\n", i+1, e)
		for _, l := range w.log {
			fmt.Fprintf(&b, "       %s\n", l)
		}
		fmt.Fprintf(&b, "       → %s\n", summary(w))
		if msg := w.check(); msg != "" {
			fmt.Fprintf(&b, "       ✗ %s\n", msg)
			break
		}
	}
	return b.String()
}

// summary is the lease as a step left it (times from the start).
func summary(w *world) string {
	v := w.s.View
	s := fmt.Sprintf("+%s %s", w.now.Sub(epoch), v.Phase)
	if v.Reason != "" {
		s += "(" + string(v.Reason) + ")"
	}
	if !v.BoundAt.IsZero() {
		s += fmt.Sprintf(" bound +%s expires +%s extensions %d", v.BoundAt.Sub(epoch), v.ExpiresAt.Sub(epoch), v.Extensions)
	}
	if v.Sleeping {
		s += " sleeping"
	}
	if w.s.Extending() {
		s += " extending"
	}
	if w.s.SleepBusy() {
		s += " sleep/wake running"
	}
	for _, c := range v.Conditions {
		s += fmt.Sprintf(" %s=%s", c.Type, c.Status)
	}
	return s + " instance " + w.instance
}
