package lease

import (
	"errors"
	"github.com/kunobi-ninja/kobe/poolspec"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/pool"
)

// The lease's decisions, one at a time, without Temporal (the sequences: state_property_test.go).

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// boundState is a lease bound at t0 for an hour (ceiling 3 h, 2 extensions), holding its member.
func boundState(change ...func(*Input)) *State {
	in := Input{LeaseID: "l1", Pool: "p",
		LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 3 * time.Hour, MaxExtensions: 2},
		Bound:      &pool.Assignment{InstanceID: "m1", Endpoint: "https://m1", Seq: 4, At: t0, Prepared: true}}
	for _, c := range change {
		c(&in)
	}
	s := NewState(in)
	s.Hold()
	return s
}

func TestNewState(t *testing.T) {
	pending := NewState(Input{LeaseID: "l1", Pool: "p", LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour}, IdleTimeout: time.Minute})
	if v := pending.View; v.Phase != api.LeasePending || v.IdleTimeout != time.Minute || !v.ExpiresAt.IsZero() || !pending.Waiting() {
		t.Errorf("a new lease: %+v", v)
	}
	warm := boundState()
	if v := warm.View; v.Phase != api.LeaseBound || v.InstanceID != "m1" || v.AssignmentSeq != 4 || !v.BoundAt.Equal(t0) ||
		!v.ExpiresAt.Equal(t0.Add(time.Hour)) || warm.NeedsCredential() || warm.issueFor != 10*time.Minute {
		t.Errorf("a warm-bound lease: %+v", v)
	}
	warm.Heartbeat(t0.Add(time.Minute))
	resumed := NewState(Input{LeaseID: "l1", LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour}, Resume: warm.Resume()})
	if resumed.View.InstanceID != "m1" || !resumed.lastSeen.Equal(t0.Add(time.Minute)) || resumed.asg != warm.asg {
		t.Errorf("a resumed lease: %+v", resumed.View)
	}
}

func TestBindAndItsEnds(t *testing.T) {
	s := NewState(Input{LeaseID: "l1", LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour}})
	s.Claimed(t0)
	s.Assigned(pool.Assignment{InstanceID: "m1", Seq: 2})
	if s.Waiting() {
		t.Fatal("an assigned lease still waits")
	}
	if at := s.Bind(t0.Add(time.Second)); !at.Equal(t0.Add(time.Hour+time.Second)) || !s.NeedsCredential() {
		t.Fatalf("bind: expires %v", at)
	}
	if !s.Bound() || s.View.Phase != api.LeaseBound {
		t.Fatal("not Bound once issued")
	}
	s.Release()
	s.Fail(api.ReasonBackendError)
	if s.Bound() || s.View.Phase != api.LeaseReleased || s.View.Reason != "" {
		t.Errorf("an ended lease changed: %s %s", s.View.Phase, s.View.Reason)
	}
	s.Assigned(pool.Assignment{InstanceID: "m2"})
	if s.asg.InstanceID != "m1" {
		t.Error("an ended lease took a late assignment")
	}
	for phase, want := range map[api.LeasePhase]string{api.LeaseFailed: "failed", api.LeaseExpired: "expired", api.LeaseReleased: "released"} {
		if got := (&State{View: View{Phase: phase}}).EndEvent(); got != want {
			t.Errorf("EndEvent(%s) = %s, want %s", phase, got, want)
		}
	}
}

func TestExtendRefusal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func(*State)
		by    time.Duration
		want  api.ReasonCode
	}{
		{"accepted", nil, time.Hour, ""},
		{"up to the ceiling", nil, 2 * time.Hour, ""},
		{"past the ceiling", nil, 2*time.Hour + time.Second, api.ReasonMaxTTLCeiling},
		{"not bound", func(s *State) { s.View.Phase = api.LeasePending }, time.Hour, api.ReasonNotReady},
		{"ended", func(s *State) { s.Release() }, time.Hour, api.ReasonNotReady},
		{"nothing to add", nil, 0, api.ReasonInvalidRequest},
		{"budget spent", func(s *State) { s.View.Extensions = 2 }, time.Minute, api.ReasonExtensionBudgetExhausted},
		{"asleep", func(s *State) { s.View.Sleeping = true }, time.Minute, api.ReasonSleeping},
		{"falling asleep", func(s *State) { s.sleepBusy = true }, time.Minute, api.ReasonSleeping},
		{"the budget before the sleep", func(s *State) { s.View.Extensions, s.View.Sleeping = 2, true }, time.Minute,
			api.ReasonExtensionBudgetExhausted},
	} {
		s := boundState()
		if tc.state != nil {
			tc.state(s)
		}
		if got := s.ExtendRefusal(tc.by); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestExtension(t *testing.T) {
	s := boundState()
	next, refused := s.BeginExtension(30 * time.Minute)
	if refused != "" || !s.Extending() || !next.Equal(t0.Add(90*time.Minute)) {
		t.Fatalf("begin: %v %q", next, refused)
	}
	// The issuance failed: nothing changed, no extension spent.
	if got := s.ExtensionFailed(false); got != "" {
		t.Errorf("a failed issuance refused %q: its error is the answer", got)
	}
	if got := s.ExtensionFailed(true); got != api.ReasonSleeping {
		t.Errorf("an issuance the sleeping instance refused: %q", got)
	}
	s.EndExtension()
	if s.View.Extensions != 0 || !s.View.ExpiresAt.Equal(t0.Add(time.Hour)) || s.Extending() {
		t.Fatalf("a failed extension changed the lease: %+v", s.View)
	}
	// Issued: committed, and counted as the holder's activity.
	next, _ = s.BeginExtension(30 * time.Minute)
	if got := s.ExtensionIssued(next, t0.Add(time.Minute)); got != "" || s.View.Extensions != 1 ||
		!s.View.ExpiresAt.Equal(next) || !s.lastActive.Equal(t0.Add(time.Minute)) {
		t.Fatalf("issued: %q %+v", got, s.View)
	}
	s.EndExtension()
	// The lease ended while it issued: abandoned, answered not_ready, nothing committed.
	next, _ = s.BeginExtension(time.Minute)
	s.Release()
	if !s.AbandonExtension() || !s.Abandoned() || s.Settled() {
		t.Fatal("the extension under the end was not abandoned")
	}
	if got := s.ExtensionFailed(false); got != api.ReasonNotReady {
		t.Errorf("abandoned: %q", got)
	}
	if got := s.ExtensionIssued(next, t0); got != api.ReasonNotReady || s.View.Extensions != 1 {
		t.Errorf("an extension issued after the end: %q, %d extensions", got, s.View.Extensions)
	}
	s.EndExtension()
	if !s.Settled() {
		t.Error("not settled once the extension is over")
	}
}

func TestExpire(t *testing.T) {
	for _, tc := range []struct {
		name     string
		idle     time.Duration
		lastSeen time.Duration // after t0
		at       time.Duration
		want     bool
		reason   api.ReasonCode
	}{
		{"before its expiry", 0, 0, 59 * time.Minute, false, ""},
		{"at its expiry", 0, 0, time.Hour, true, ""},
		{"idle", 10 * time.Minute, 0, 10 * time.Minute, true, api.ReasonIdleTimeout},
		{"a heartbeat holds it", 10 * time.Minute, 5 * time.Minute, 14 * time.Minute, false, ""},
		{"expired and idle: expired", 10 * time.Minute, 0, 2 * time.Hour, true, ""},
	} {
		s := boundState(func(in *Input) { in.IdleTimeout = tc.idle })
		s.Heartbeat(t0.Add(tc.lastSeen))
		got := s.Expire(t0.Add(tc.at))
		if got != tc.want || (got && s.View.Phase != api.LeaseExpired) || s.View.Reason != tc.reason {
			t.Errorf("%s: %v %s %q", tc.name, got, s.View.Phase, s.View.Reason)
		}
	}
	s := boundState()
	s.Release()
	if s.Expire(t0.Add(time.Hour)) || s.View.Phase != api.LeaseReleased {
		t.Error("a released lease expired")
	}
	if d := boundState().untilIdle(t0); d != 0 {
		t.Errorf("an idle timer without an idle timeout: %s", d)
	}
}

func TestSleepDecisions(t *testing.T) {
	pending := NewState(Input{LeaseID: "l1"})
	if got := pending.SleepAdmission(); got != api.ReasonNotReady {
		t.Errorf("a Pending lease's sleep admitted: %q", got)
	}
	warm := NewState(Input{LeaseID: "l1",
		LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour}, Bound: &pool.Assignment{InstanceID: "m1", At: t0, Prepared: true}})
	if warm.SleepAdmission() != "" || warm.SleepMayStart() {
		t.Error("a Bound lease not yet holding its member: the sleep is admitted and waits for the hold")
	}
	s := boundState(func(in *Input) { in.AfterInactivity = 20 * time.Minute })
	if run, _ := s.BeginSleep(false, sleepCauseRequest, t0.Add(time.Minute)); run || !s.lastSeen.Equal(t0.Add(time.Minute)) {
		t.Error("waking an awake lease ran, or the holder's request was not activity")
	}
	run, refused := s.BeginSleep(true, sleepCauseSchedule, t0.Add(2*time.Minute))
	if !run || refused != "" || !s.SleepBusy() || s.View.Sleeps != 1 || s.SleepMayStart() || !s.lastSeen.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a scheduled sleep: run=%v %q sleeps=%d", run, refused, s.View.Sleeps)
	}
	c := s.Slept(true, sleepCauseSchedule, t0.Add(3*time.Minute), 0)
	s.EndSleep()
	if !s.View.Sleeping || c.Status != "True" || c.Reason != api.ReasonAsleep || s.Revokes() {
		t.Errorf("asleep: %+v", c)
	}
	run, _ = s.BeginSleep(false, sleepCauseSchedule, t0.Add(10*time.Minute))
	c = s.Slept(false, sleepCauseSchedule, t0.Add(11*time.Minute), 1500*time.Millisecond)
	s.EndSleep()
	if !run || s.View.Sleeping || c.Reason != api.ReasonAwake || c.Message != "the instance woke in 1.5s" ||
		!s.lastActive.Equal(t0.Add(11*time.Minute)) || s.View.Sleeps != 2 {
		t.Errorf("a scheduled wake: %+v, lastActive %v", c, s.lastActive)
	}
	s.Release()
	if run, refused := s.BeginSleep(true, sleepCauseRequest, t0); run || refused != api.ReasonNotReady {
		t.Errorf("an ended lease's sleep: %v %q", run, refused)
	}
}

func TestWakeFailed(t *testing.T) {
	for _, expired := range []bool{false, true} {
		s := boundState()
		s.View.Sleeping = true
		reason, conds := s.WakeFailed(errors.New("resume timed out"), expired, t0)
		want := api.ReasonWakeFailed
		if expired {
			want = api.ReasonCertificatesExpiring
		}
		if reason != want || s.View.Sleeping || len(conds) != 2 || len(s.View.Conditions) != 2 {
			t.Fatalf("wake failed (certificates expired: %v): %q %+v", expired, reason, conds)
		}
		for _, c := range s.View.Conditions {
			if c.Status != "False" || c.Reason != want || c.Message != "the instance did not wake: resume timed out" {
				t.Errorf("condition %+v", c)
			}
		}
	}
}

func TestSetConditionAuditsChanges(t *testing.T) {
	s := boundState()
	c := api.LeaseCondition{Type: ConditionSynced, Status: "False", Reason: api.ReasonSyncDenied, LastTransitionTime: t0}
	for i, step := range []struct {
		status         string
		reason         api.ReasonCode
		changed, audit bool
	}{
		{"False", api.ReasonSyncDenied, true, true},
		{"False", api.ReasonSyncDenied, false, false},
		{"False", api.ReasonHostQuotaExceeded, false, true},
		{"True", "", true, true},
	} {
		c.Status, c.Reason, c.LastTransitionTime = step.status, step.reason, t0.Add(time.Duration(i)*time.Minute)
		changed, audit := s.SetCondition(c)
		if changed != step.changed || audit != step.audit {
			t.Errorf("step %d: changed=%v audit=%v", i, changed, audit)
		}
	}
	if len(s.View.Conditions) != 1 || !s.View.Conditions[0].LastTransitionTime.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("conditions %+v", s.View.Conditions)
	}
	// A status unchanged keeps its transition time.
	s.SetCondition(api.LeaseCondition{Type: ConditionSynced, Status: "True", LastTransitionTime: t0.Add(time.Hour)})
	if !s.View.Conditions[0].LastTransitionTime.Equal(t0.Add(3 * time.Minute)) {
		t.Error("the transition time moved without a transition")
	}
}

func TestPoolReports(t *testing.T) {
	s := boundState()
	if _, ours := s.UnhealthyCondition(pool.HealthReport{InstanceID: "m2"}, t0); ours {
		t.Error("a report about another instance taken")
	}
	c, ours := s.UnhealthyCondition(pool.HealthReport{Failures: 3}, t0)
	if !ours || c.Reason != pool.ReasonHealthFailed || c.Message != "instance m1 failed 3 health checks in a row" || !c.LastTransitionTime.Equal(t0) {
		t.Errorf("unhealthy: %+v", c)
	}
	c, _ = s.SyncCondition(pool.SyncReport{InstanceID: "m1", Reason: api.ReasonSyncDenied, Message: "denied", Objects: 3, At: t0.Add(-time.Minute)}, t0)
	if c.Status != "False" || c.Message != "denied (and 2 more objects)" || !c.LastTransitionTime.Equal(t0.Add(-time.Minute)) {
		t.Errorf("sync: %+v", c)
	}
	if c, _ = s.SyncCondition(pool.SyncReport{Synced: true}, t0); c.Status != "True" || c.Reason != "" {
		t.Errorf("synced: %+v", c)
	}
	if c, _ = s.CertificatesCondition(pool.CertificateReport{Message: "soon"}, t0); c.Reason != api.ReasonCertificatesExpiring {
		t.Errorf("certificates: %+v", c)
	}
}

func TestInactivityCheckAt(t *testing.T) {
	s := boundState(func(in *Input) { in.AfterInactivity = 20 * time.Minute })
	if at := s.InactivityCheckAt(t0.Add(time.Minute), time.Time{}); !at.Equal(t0.Add(20 * time.Minute)) {
		t.Errorf("first check at %v", at)
	}
	s.Active(t0.Add(5 * time.Minute))
	if at := s.InactivityCheckAt(t0.Add(6*time.Minute), time.Time{}); !at.Equal(t0.Add(25 * time.Minute)) {
		t.Errorf("check after activity at %v", at)
	}
	if at := s.InactivityCheckAt(t0.Add(30*time.Minute), t0.Add(40*time.Minute)); !at.Equal(t0.Add(40 * time.Minute)) {
		t.Errorf("a check held back: %v", at)
	}
	if !s.Inactive(t0.Add(25*time.Minute)) || s.Inactive(t0.Add(24*time.Minute)) {
		t.Error("inactive at the wrong time")
	}
	s.Used(t0.Add(3 * time.Minute)) // older than what kobe saw: changes nothing
	s.Used(t0.Add(24 * time.Minute))
	if s.Inactive(t0.Add(25 * time.Minute)) {
		t.Error("the cluster's use did not count")
	}
	if !s.MayCheckInactivity() {
		t.Error("an idle lease may not check")
	}
}

// A wake is bounded by the lease's terms (its pool's, granted at admission) unless the request
// sets a bound itself (a wake recorded in a v0.1.0 history, sent with the pool's policy); a
// lease admitted by v0.1.0 has no such terms, and its wake keeps the instance's defaults.
func TestAWakeIsBoundedByTheLeasesTerms(t *testing.T) {
	terms := poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 2 * time.Hour, ResumeTimeout: 3 * time.Minute,
		CertificatesMinRemaining: 45 * 24 * time.Hour}
	held := NewState(Input{LeaseID: "l1", LeaseTerms: terms})
	for _, tc := range []struct {
		name      string
		state     *State
		req, want WakeRequest
	}{
		{"a bare wake takes the terms", held, WakeRequest{Cause: "schedule"},
			WakeRequest{ResumeTimeout: 3 * time.Minute, CertificatesMinRemaining: 45 * 24 * time.Hour, Cause: "schedule"}},
		{"bounds the request sets win", held, WakeRequest{ResumeTimeout: time.Minute, CertificatesMinRemaining: time.Hour},
			WakeRequest{ResumeTimeout: time.Minute, CertificatesMinRemaining: time.Hour}},
		{"one bound set, the other from the terms", held, WakeRequest{ResumeTimeout: time.Minute},
			WakeRequest{ResumeTimeout: time.Minute, CertificatesMinRemaining: 45 * 24 * time.Hour}},
		{"a lease without wake terms keeps the defaults (zero)", NewState(Input{LeaseID: "l0",
			LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour}}), WakeRequest{}, WakeRequest{}},
	} {
		if got := tc.state.Wake(tc.req); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// The terms survive continue-as-new (they are the Input's, which the next run gets again).
	warm := boundState(func(in *Input) { in.LeaseTerms = terms })
	next := NewState(Input{LeaseID: "l1", LeaseTerms: terms, Resume: warm.Resume()})
	if got := next.Wake(WakeRequest{}); got.ResumeTimeout != 3*time.Minute {
		t.Errorf("a resumed lease's wake: %+v", got)
	}
}
