package lease

import (
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolspec"
)

// The lease's decisions, without Temporal. A State is what a lease knows: its View (what
// QueryLease answers and the store's row shows), the terms of its Input, the member it holds,
// and what one run keeps (an extension or a sleep under way). Each thing that happens to a
// lease is a method on it that changes the state and says what is to be done; the workflow
// (workflows.go, sleep.go, autosleep.go) carries that out — it waits, runs the activities,
// timers and child workflows — and tells the state their outcome. state_test.go and
// state_property_test.go play the same methods without Temporal.
//
// Unlike the pool's decisions (pool/state.go), these return what to do rather than hand it to
// an executor: none of them depends on the outcome of an action taken within it. The waits
// between them (an extension waiting for the one before, the hold's selector, a sleep waiting
// for the lease to hold its member) are the workflow's.

// State is a lease's state as its decisions see it.
type State struct {
	View View
	// terms are what its pool granted it (Input.LeaseTerms), idleTimeout its holder's.
	terms       poolspec.LeaseTerms
	idleTimeout time.Duration
	// asg is the member the lease was assigned (zero while it waits for one).
	asg pool.Assignment
	// lastSeen is the holder's last heartbeat or request (the idle timeout's); lastActive the
	// newest activity that does not count for the idle timeout (AfterInactivity's).
	lastSeen, lastActive time.Time
	// issueFor is how long a credential issuance may retry.
	issueFor time.Duration

	// What one run keeps; a run continues as new only without them.
	// extending: an extension issues its credential (extensions go one at a time);
	// abandoned: the lease ended under it.
	extending, abandoned bool
	// holding: the lease holds its member, so its sleeps and wakes may run; sleepBusy: a sleep
	// or a wake runs (they go one at a time).
	holding, sleepBusy bool
}

// NewState is the state a run starts from: Pending, Bound from its first event (the pool
// started it on a warm bind), or as the previous run left it (continue-as-new).
func NewState(in Input) *State {
	s := &State{
		View: View{ID: in.LeaseID, Pool: in.Pool, Principal: in.Principal, TTL: in.TTL, Phase: api.LeasePending,
			IdleTimeout: in.IdleTimeout, AfterInactivity: in.AfterInactivity},
		terms: in.LeaseTerms, idleTimeout: in.IdleTimeout, issueFor: 2 * time.Minute,
	}
	switch {
	case in.Resume != nil:
		r := in.Resume
		s.View, s.asg, s.lastSeen, s.lastActive, s.issueFor = r.View, r.Assignment, r.LastSeen, r.LastActive, r.IssueFor
		// A view carried by a run of v0.1.0 has neither: they are the Input's, which never change.
		s.View.Principal, s.View.TTL = in.Principal, in.TTL
	case in.Bound != nil:
		// Bound from the first event, before the workflow's handlers exist: an extension or a
		// release sent the moment the API answered finds it Bound.
		s.asg = *in.Bound
		v := &s.View
		v.Phase = api.LeaseBound // the pool started the workflow with KobePhase Bound
		v.ClaimedAt, v.BoundAt = s.asg.At, s.asg.At
		v.InstanceID, v.Endpoint, v.AssignmentSeq = s.asg.InstanceID, s.asg.Endpoint, s.asg.Seq
		v.ExpiresAt = v.BoundAt.Add(in.TTL)
		s.lastSeen = v.BoundAt
		s.issueFor = 10 * time.Minute
	}
	return s
}

// Resume is what the next run starts from (continue-as-new).
func (s *State) Resume() *Resume {
	return &Resume{View: s.View, Assignment: s.asg, LastSeen: s.lastSeen, LastActive: s.lastActive, IssueFor: s.issueFor}
}

// ended says whether the lease has ended: nothing brings it back.
func (s *State) ended() bool {
	switch s.View.Phase {
	case api.LeaseReleased, api.LeaseExpired, api.LeaseFailed:
		return true
	}
	return false
}

// Fail ends a lease that could not be bound (its claim, its credential) with reason.
func (s *State) Fail(reason api.ReasonCode) {
	if s.ended() {
		return
	}
	s.View.Phase, s.View.Reason = api.LeaseFailed, reason
}

// Release ends the lease at its holder's request.
func (s *State) Release() {
	if s.ended() {
		return
	}
	s.View.Phase = api.LeaseReleased
}

// Claimed records when the lease asked its pool for a member.
func (s *State) Claimed(at time.Time) { s.View.ClaimedAt = at }

// Assigned takes the pool's assignment of a Pending lease.
func (s *State) Assigned(a pool.Assignment) {
	if s.View.Phase == api.LeasePending {
		s.asg = a
	}
}

// Waiting says the lease waits for its pool's answer.
func (s *State) Waiting() bool { return s.View.Phase == api.LeasePending && s.asg.InstanceID == "" }

// Bind starts binding the assigned member at now: the lease is to expire at now + TTL, and its
// credential is issued for that. Issuing is a few milliseconds of work against a Ready
// instance; when it takes minutes the host is overloaded, not broken (the 50-client bench on 2
// cores: a lease failed with backend_error after 2 minutes while its instance was fine), so it
// may take 10: an overloaded host slows binds down instead of failing them.
func (s *State) Bind(now time.Time) (expiresAt time.Time) {
	v := &s.View
	v.InstanceID, v.Endpoint, v.AssignmentSeq = s.asg.InstanceID, s.asg.Endpoint, s.asg.Seq
	v.BoundAt = now
	v.ExpiresAt = now.Add(s.terms.TTL)
	s.issueFor = 10 * time.Minute
	return v.ExpiresAt
}

// Bound makes the lease Bound once its credential is issued; it says whether it did (a lease
// that has ended stays ended). The workflow then records it, and counts that moment as the
// holder's first sign of life (Heartbeat).
func (s *State) Bound() bool {
	if s.View.Phase != api.LeasePending {
		return false
	}
	s.View.Phase = api.LeaseBound
	return true
}

// NeedsCredential says whether binding or extending the lease issues a credential: one minted
// from the member's prepared signer (a warm bind) is valid until the lease's ceiling, so an
// extension (refused past the ceiling) needs no new one.
func (s *State) NeedsCredential() bool { return !s.asg.Prepared }

// Hold says the lease now holds its member: its sleeps and wakes may run.
func (s *State) Hold() { s.holding = true }

// asleep says the lease's instance is asleep, or a sleep or a wake of it is under way: its
// cluster cannot issue a credential now (a stopped API server refuses the connection, and an
// issuance would retry for issueFor).
func (s *State) asleep() bool { return s.View.Sleeping || s.sleepBusy }

// ExtendRefusal is why an extension by `by` is refused now ("": it is not). The validator asks
// (a refused Update leaves no event), and the handler asks again once the extensions before it
// are done. A sleeping lease's cluster cannot issue the extension's credential: it is refused
// whatever its kind of credential, so that the holder learns it must wake the lease first.
func (s *State) ExtendRefusal(by time.Duration) api.ReasonCode {
	v := &s.View
	switch {
	case v.Phase != api.LeaseBound:
		return api.ReasonNotReady
	case by <= 0:
		return api.ReasonInvalidRequest
	case v.Extensions >= s.terms.MaxExtensions:
		return api.ReasonExtensionBudgetExhausted
	case v.ExpiresAt.Add(by).After(v.BoundAt.Add(s.terms.MaxTTL)):
		return api.ReasonMaxTTLCeiling
	case s.asleep():
		return api.ReasonSleeping
	}
	return ""
}

// Extending says an extension is under way.
func (s *State) Extending() bool { return s.extending }

// BeginExtension starts an extension by `by` unless it is refused: the credential is issued
// until next, and only then is the expiry committed (ExtensionIssued), so that a failed
// issuance changes nothing and spends no extension.
func (s *State) BeginExtension(by time.Duration) (next time.Time, refused api.ReasonCode) {
	if refused := s.ExtendRefusal(by); refused != "" {
		return time.Time{}, refused
	}
	s.extending = true
	return s.View.ExpiresAt.Add(by), ""
}

// ExtensionIssued commits an extension to next whose credential was issued at now; an
// extension is its holder's activity (AfterInactivity).
func (s *State) ExtensionIssued(next, now time.Time) api.ReasonCode {
	if s.View.Phase != api.LeaseBound {
		return api.ReasonNotReady
	}
	s.View.ExpiresAt = next
	s.View.Extensions++
	s.lastActive = now
	return ""
}

// ExtensionFailed is the refusal of an extension whose issuance failed ("": the error itself is
// the answer): the lease ended under it (abandoned), or its instance fell asleep while it issued
// (its backend says so).
func (s *State) ExtensionFailed(instanceSleeping bool) api.ReasonCode {
	switch {
	case s.abandoned:
		return api.ReasonNotReady
	case instanceSleeping:
		return api.ReasonSleeping
	}
	return ""
}

// EndExtension says the extension under way is over, whatever its outcome.
func (s *State) EndExtension() { s.extending = false }

// Expire ends a Bound lease whose time is up at now: its TTL, or its idle timeout without a
// heartbeat (reason idle_timeout). It says whether the lease ended.
func (s *State) Expire(now time.Time) bool {
	if s.View.Phase != api.LeaseBound {
		return false
	}
	expired := !now.Before(s.View.ExpiresAt)
	idle := s.idleTimeout > 0 && !now.Before(s.lastSeen.Add(s.idleTimeout))
	if !expired && !idle {
		return false
	}
	s.View.Phase = api.LeaseExpired
	if !expired {
		s.View.Reason = api.ReasonIdleTimeout
	}
	return true
}

// untilExpiry and untilIdle are how long from now the hold's timers wait (not positive: due,
// or no idle timeout).
func (s *State) untilExpiry(now time.Time) time.Duration { return s.View.ExpiresAt.Sub(now) }

func (s *State) untilIdle(now time.Time) time.Duration {
	if s.idleTimeout <= 0 {
		return 0
	}
	return s.lastSeen.Add(s.idleTimeout).Sub(now)
}

// Heartbeat records the holder's heartbeat (a burst counts as one), or the bind.
func (s *State) Heartbeat(now time.Time) { s.lastSeen = now }

// Active records the API's word that the holder asked kobe about the lease (SignalActivity).
func (s *State) Active(now time.Time) { s.lastActive = now }

// AbandonExtension is the lease's end under an extension that still issues: the extension is
// abandoned (its issuance to be cancelled), so that the lease ends now, not when the issuance
// gives up. It says whether it was.
func (s *State) AbandonExtension() bool {
	if s.extending {
		s.abandoned = true
	}
	return s.abandoned
}

// Abandoned says an extension was abandoned when the lease ended: its issuance's attempt may
// still be running on the instance's host, so the lease's end is recorded before the
// revocation (the store then refuses a credential stored after it, ErrLeaseEnded, and the
// revocation deletes one stored before).
func (s *State) Abandoned() bool { return s.abandoned }

// Settled says no extension, sleep or wake is under way: the lease may end (its revocation is
// the last word) or continue as new.
func (s *State) Settled() bool { return !s.extending && !s.sleepBusy }

// Revokes says whether the lease's end revokes its credential: an instance asleep serves
// nothing, its credential dies with its teardown (a revocation that needs its API would only
// wait for it).
func (s *State) Revokes() bool { return !s.View.Sleeping }

// EndEvent is the lease's end as MetricClaims counts it.
func (s *State) EndEvent() string {
	switch s.View.Phase {
	case api.LeaseFailed:
		return "failed"
	case api.LeaseExpired:
		return "expired"
	}
	return "released"
}

// SetCondition puts c in the view in place of a condition of the same type (keeping its
// transition time when the status is unchanged). statusChanged says its status changed; audit
// says its status or its reason did, a change that RecordLeaseCondition audits.
func (s *State) SetCondition(c api.LeaseCondition) (statusChanged, audit bool) {
	audit = true
	for _, old := range s.View.Conditions {
		if old.Type == c.Type && old.Status == c.Status && old.Reason == c.Reason {
			audit = false
		}
	}
	return setCondition(&s.View, c), audit
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

// about says whether a report of the pool is about this lease's instance (a report naming none
// is), and when it was made (now, for a report without a time).
func (s *State) about(instanceID string, at, now time.Time) (time.Time, bool) {
	if instanceID != "" && instanceID != s.View.InstanceID {
		return at, false
	}
	if at.IsZero() {
		at = now
	}
	return at, true
}

// UnhealthyCondition is what the pool's report that the lease's instance failed its health
// checks means for the lease (false: the report is about another instance). The lease stays
// Bound: its holder decides whether to give it back.
func (s *State) UnhealthyCondition(r pool.HealthReport, now time.Time) (api.LeaseCondition, bool) {
	at, ours := s.about(r.InstanceID, r.At, now)
	if !ours {
		return api.LeaseCondition{}, false
	}
	reason := r.Reason
	if reason == "" {
		reason = pool.ReasonHealthFailed
	}
	msg := r.Message
	if msg == "" {
		msg = fmt.Sprintf("instance %s failed %d health checks in a row", s.View.InstanceID, r.Failures)
	}
	return api.LeaseCondition{Type: ConditionInstanceHealthy, Status: "False", Reason: api.ReasonCode(reason),
		Message: msg, LastTransitionTime: at}, true
}

// SyncCondition is what the lease's instance could not sync onto its host (condition Synced:
// False with the newest error's reason, True once every object synced again).
func (s *State) SyncCondition(r pool.SyncReport, now time.Time) (api.LeaseCondition, bool) {
	at, ours := s.about(r.InstanceID, r.At, now)
	if !ours {
		return api.LeaseCondition{}, false
	}
	cond := api.LeaseCondition{Type: ConditionSynced, Status: "True", Message: "every object synced onto the host", LastTransitionTime: at}
	if !r.Synced {
		cond.Status, cond.Reason = "False", r.Reason
		cond.Message = r.Message
		if r.Objects > 1 {
			cond.Message = fmt.Sprintf("%s (and %d more objects)", r.Message, r.Objects-1)
		}
	}
	return cond, true
}

// CertificatesCondition: the lease's instance's certificates expire soon and cannot be re-issued
// in place (condition CertificatesValid: False): the holder should move to another cluster
// before then.
func (s *State) CertificatesCondition(r pool.CertificateReport, now time.Time) (api.LeaseCondition, bool) {
	at, ours := s.about(r.InstanceID, r.At, now)
	if !ours {
		return api.LeaseCondition{}, false
	}
	return api.LeaseCondition{Type: ConditionCertificatesValid, Status: "False", Reason: api.ReasonCertificatesExpiring,
		Message: r.Message, LastTransitionTime: at}, true
}

// SleepAdmission is the validator of the sleep and wake Updates: only a Bound lease sleeps or
// wakes. A warm-bound lease is Bound from its first event, a moment before it holds its member
// (while it makes sure of its credential): its holder, just answered Bound, may already ask;
// the Update then waits for the hold (SleepMayStart).
func (s *State) SleepAdmission() api.ReasonCode {
	if s.View.Phase != api.LeaseBound {
		return api.ReasonNotReady
	}
	return ""
}

// SleepMayStart says a sleep or wake may be decided on now: none is under way, and the lease
// holds its member (or is no longer Bound, and will be refused).
func (s *State) SleepMayStart() bool {
	return !s.sleepBusy && (s.holding || s.View.Phase != api.LeaseBound)
}

// BeginSleep decides on a sleep (asleep) or a wake asked at now for cause (sleepCauseRequest,
// sleepCauseSchedule, sleepCauseInactivity): run says the instance's workflow is to run, number
// Sleeps; sleeping a sleeping lease and waking an awake one change nothing. The decision is on
// the state as it is now: the lease may have ended, or another request done it.
func (s *State) BeginSleep(asleep bool, cause string, now time.Time) (run bool, refused api.ReasonCode) {
	if cause == sleepCauseRequest {
		// A request through kobe's API for the lease is activity (idle timeout).
		s.lastSeen = now
	}
	if !s.holding || s.View.Phase != api.LeaseBound {
		return false, api.ReasonNotReady
	}
	if s.View.Sleeping == asleep {
		return false, ""
	}
	s.sleepBusy = true
	s.View.Sleeps++
	return true, ""
}

// Slept records that the instance's workflow put it to sleep (asleep) or woke it (in wokeIn) at
// now; it returns the condition Sleeping it set, to be audited.
func (s *State) Slept(asleep bool, cause string, now time.Time, wokeIn time.Duration) api.LeaseCondition {
	s.View.Sleeping = asleep
	if !asleep && cause == sleepCauseSchedule && now.After(s.lastActive) {
		// Not the holder's activity (lastSeen stays), but a woken lease is not slept again at once.
		s.lastActive = now
	}
	c := api.LeaseCondition{Type: ConditionSleeping, Status: "False", Reason: api.ReasonAwake, LastTransitionTime: now,
		Message: fmt.Sprintf("the instance woke in %s", wokeIn.Round(time.Millisecond))}
	if asleep {
		reason, why := api.ReasonAsleep, ""
		switch cause {
		case sleepCauseInactivity:
			reason, why = api.ReasonInactive, fmt.Sprintf(" after %s without activity", s.terms.AfterInactivity)
		case sleepCauseSchedule:
			why = " on its pool's sleep schedule"
		}
		c = api.LeaseCondition{Type: ConditionSleeping, Status: "True", Reason: reason, LastTransitionTime: now,
			Message: "the instance is asleep" + why + ": its kubeconfig's requests are refused until it wakes (kobe lease wake " + s.View.ID + ")"}
	}
	setCondition(&s.View, c)
	return c
}

// WakeFailed records that the instance did not come back from its sleep (err): it is broken.
// The lease stays Bound (its holder decides whether to give it back), no longer asleep.
// Certificates that expired in its sleep and could not be re-issued have their own reason. It
// returns the reason and the conditions it set, to be audited in order.
func (s *State) WakeFailed(err error, certificatesExpired bool, now time.Time) (api.ReasonCode, []api.LeaseCondition) {
	s.View.Sleeping = false
	reason := api.ReasonWakeFailed
	if certificatesExpired {
		reason = api.ReasonCertificatesExpiring
	}
	msg := fmt.Sprintf("the instance did not wake: %v", err)
	conds := []api.LeaseCondition{
		{Type: ConditionSleeping, Status: "False", Reason: reason, Message: msg, LastTransitionTime: now},
		{Type: ConditionInstanceHealthy, Status: "False", Reason: reason, Message: msg, LastTransitionTime: now},
	}
	for _, c := range conds {
		setCondition(&s.View, c)
	}
	return reason, conds
}

// Wake is the wake req asked for, bounded by the lease's terms: the pool's resume timeout and
// certificate minimum it was admitted under. A field the request sets wins (the wakes recorded
// in v0.1.0's histories carried the pool's policy, read by their sender); a lease admitted by
// v0.1.0 has neither term, and its instance's wake uses the defaults.
func (s *State) Wake(req WakeRequest) WakeRequest {
	if req.ResumeTimeout <= 0 {
		req.ResumeTimeout = s.terms.ResumeTimeout
	}
	if req.CertificatesMinRemaining <= 0 {
		req.CertificatesMinRemaining = s.terms.CertificatesMinRemaining
	}
	return req
}

// EndSleep says the sleep or wake under way is over, whatever its outcome.
func (s *State) EndSleep() { s.sleepBusy = false }

// SleepBusy says a sleep or a wake is under way.
func (s *State) SleepBusy() bool { return s.sleepBusy }

// MayCheckInactivity says a due inactivity check may run now: no extension issues and no sleep
// or wake runs.
func (s *State) MayCheckInactivity() bool { return !s.extending && !s.sleepBusy }

// InactivityCheckAt is when the lease's next inactivity check is due, seen at now: once the
// activity it knows of is AfterInactivity old, and not before notBefore (a check that failed
// holds the next one back).
func (s *State) InactivityCheckAt(now, notBefore time.Time) time.Time {
	inactive, at := inactiveFor(now, s.terms.AfterInactivity, s.lastSeen, s.lastActive)
	if inactive {
		at = now
	}
	if at.Before(notBefore) {
		at = notBefore
	}
	return at
}

// Inactive says nothing was seen of the lease for AfterInactivity at now.
func (s *State) Inactive(now time.Time) bool {
	inactive, _ := inactiveFor(now, s.terms.AfterInactivity, s.lastSeen, s.lastActive)
	return inactive
}

// Used records the newest use of the lease's cluster its backend observed.
func (s *State) Used(last time.Time) {
	if last.After(s.lastActive) {
		s.lastActive = last
	}
}
