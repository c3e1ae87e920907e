package pool

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/stretchr/testify/require"
)

// Table tests of the pool's decisions, without Temporal: a state, one message, the actions it
// leads to (in order) and the state after.

// describe writes an action the way the tests compare and print them.
func describe(a Action) string {
	switch a := a.(type) {
	case StartProvision:
		return "provision " + a.MemberID
	case StartTeardown:
		return fmt.Sprintf("teardown %s (%s) as %s", a.MemberID, a.Reason, a.WorkflowID)
	case SignalLease:
		switch arg := a.Arg.(type) {
		case Assignment:
			q := ""
			if arg.Queued {
				q = ", queued"
			}
			return fmt.Sprintf("signal %s %s %s (seq %d%s)", a.LeaseID, a.Signal, arg.InstanceID, arg.Seq, q)
		case ClaimFailure:
			return fmt.Sprintf("signal %s %s %s", a.LeaseID, a.Signal, arg.Reason)
		case HealthReport:
			return fmt.Sprintf("signal %s %s %s", a.LeaseID, a.Signal, arg.InstanceID)
		case SyncReport:
			state := string(arg.Reason)
			if arg.Synced {
				state = "synced"
			}
			return fmt.Sprintf("signal %s %s %s %s", a.LeaseID, a.Signal, arg.InstanceID, state)
		}
		return fmt.Sprintf("signal %s %s %v", a.LeaseID, a.Signal, a.Arg)
	case CancelCreation:
		return "cancel " + a.MemberID
	case CountRecycle:
		return "count recycle " + a.Reason
	case CountHealthCheck:
		return "count health " + a.Result
	case RecordInstance:
		return fmt.Sprintf("record %s %s", a.Record.ID, a.Record.Phase)
	case FreezeMember:
		if a.Thaw {
			return "thaw " + a.MemberID
		}
		return "freeze " + a.MemberID
	}
	return fmt.Sprintf("%T %v", a, a)
}

// recorder is an Executor that writes down what it is asked to do: "do X" for an action
// awaited at once, "send X" then "wait X" for one awaited later. fail says which actions fail.
// Its clock moves on by a second at each wait, as a workflow's does while it waits.
type recorder struct {
	now  time.Time
	log  []string
	fail func(Action) error
}

func (r *recorder) Now() time.Time { return r.now }

func (r *recorder) Do(a Action) error {
	r.log = append(r.log, "do "+describe(a))
	r.now = r.now.Add(time.Second)
	return r.outcome(a)
}

func (r *recorder) Send(a Action) func() error {
	r.log = append(r.log, "send "+describe(a))
	return func() error {
		r.log = append(r.log, "wait "+describe(a))
		r.now = r.now.Add(time.Second)
		return r.outcome(a)
	}
}

func (r *recorder) outcome(a Action) error {
	if r.fail == nil {
		return nil
	}
	return r.fail(a)
}

// withoutCounts drops the metric counts, which most tests do not care about.
func withoutCounts(log []string) []string {
	out := []string{}
	for _, l := range log {
		if !strings.Contains(l, " count ") {
			out = append(out, l)
		}
	}
	return out
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testPolicy() poolspec.Policy {
	return poolspec.Policy{Name: "p", Backend: "local", KubernetesVersion: "v1.37.2", WarmTarget: 1, MaxClusters: 3,
		MaxConcurrentProvisions: 2, ScaleDownAfter: 5 * time.Minute, QueueTimeout: 5 * time.Minute,
		CreatingTimeout: 10 * time.Minute, BackoffBase: 5 * time.Second, BackoffMultiplier: 2, BackoffMax: 30 * time.Second,
		MaxRecycling: 1, MaxSurge: 1}
}

// member makes a member of the state in a phase, made at t0 minus age.
func member(id string, phase MemberPhase, age time.Duration) *Member {
	return &Member{ID: id, Phase: phase, Since: t0.Add(-age), Placement: instance.HostAssignment{HostID: "h", TaskQueue: "q"}}
}

func stateWith(pol poolspec.Policy, ms ...*Member) *State {
	s := NewState(Snapshot{Policy: pol, Incarnation: "t"})
	for _, m := range ms {
		s.Members[m.ID] = m
	}
	return s
}

var errGone = errors.New("workflow not found")

func TestDecisions(t *testing.T) {
	failSignals := func(a Action) error {
		if _, ok := a.(SignalLease); ok {
			return errGone
		}
		return nil
	}
	failChildren := func(a Action) error {
		switch a.(type) {
		case StartProvision, StartTeardown:
			return errGone
		}
		return nil
	}
	cases := []struct {
		name    string
		policy  func(*poolspec.Policy)
		members []*Member
		fail    func(Action) error
		event   func(s *State, fx *recorder)
		want    []string
		check   func(t *testing.T, s *State)
	}{{
		name:    "a claim is served by the Ready member at once, and the warm target refilled",
		members: []*Member{member("m1", MemberReady, time.Minute)},
		event: func(s *State, fx *recorder) {
			s.Claim(ClaimRequest{LeaseID: "lease-a"}, fx.Now())
			s.Reconcile(fx)
		},
		want: []string{"send signal lease-a assigned m1 (seq 1)", "wait signal lease-a assigned m1 (seq 1)", "do provision p-t-1"},
		check: func(t *testing.T, s *State) {
			require.Equal(t, MemberLeased, s.Members["m1"].Phase)
			require.Equal(t, "lease-a", s.Members["m1"].LeaseID)
			require.Equal(t, "m1", s.Assigned["lease-a"])
			require.Equal(t, MemberCreating, s.Members["p-t-1"].Phase)
			require.Equal(t, t0.Add(time.Second), s.Members["p-t-1"].Since, "a member is stamped when its provision starts")
		},
	}, {
		name:    "a retried claim of a served lease is not served again",
		members: []*Member{member("m1", MemberReady, time.Minute), member("m2", MemberReady, time.Minute)},
		event: func(s *State, fx *recorder) {
			s.Assigned["lease-a"] = "m0"
			s.Claim(ClaimRequest{LeaseID: "lease-a"}, fx.Now())
			s.Reconcile(fx)
		},
		want:  []string{},
		check: func(t *testing.T, s *State) { require.Empty(t, s.Queue) },
	}, {
		name:    "a burst of claims is signalled together and awaited together; the oldest Ready goes first",
		members: []*Member{member("m1", MemberReady, time.Minute), member("m2", MemberReady, 2*time.Minute)},
		policy:  func(p *poolspec.Policy) { p.WarmTarget = 0 },
		event: func(s *State, fx *recorder) {
			s.Claim(ClaimRequest{LeaseID: "lease-a", At: t0}, fx.Now())
			s.Claim(ClaimRequest{LeaseID: "lease-b", At: t0}, fx.Now())
			s.Reconcile(fx)
		},
		want: []string{"send signal lease-a assigned m2 (seq 1)", "send signal lease-b assigned m1 (seq 2)",
			"wait signal lease-a assigned m2 (seq 1)", "wait signal lease-b assigned m1 (seq 2)"},
	}, {
		name:    "higher priority is served first",
		members: []*Member{member("m1", MemberReady, time.Minute)},
		policy:  func(p *poolspec.Policy) { p.WarmTarget, p.MaxClusters = 0, 1 },
		event: func(s *State, fx *recorder) {
			s.Claim(ClaimRequest{LeaseID: "lease-low", At: t0.Add(-time.Minute)}, fx.Now())
			s.Claim(ClaimRequest{LeaseID: "lease-high", Priority: 5, At: t0}, fx.Now())
			s.Reconcile(fx)
		},
		want:  []string{"send signal lease-high assigned m1 (seq 1)", "wait signal lease-high assigned m1 (seq 1)"},
		check: func(t *testing.T, s *State) { require.Equal(t, "lease-low", s.Queue[0].LeaseID) },
	}, {
		name:    "an assignment whose lease is gone tears the member down",
		members: []*Member{member("m1", MemberReady, time.Minute)},
		policy:  func(p *poolspec.Policy) { p.WarmTarget = 0 },
		fail:    failSignals,
		event: func(s *State, fx *recorder) {
			s.Claim(ClaimRequest{LeaseID: "lease-a"}, fx.Now())
			s.Reconcile(fx)
		},
		want: []string{"send signal lease-a assigned m1 (seq 1)", "wait signal lease-a assigned m1 (seq 1)",
			"do teardown m1 (lease_gone) as teardown-m1"},
		check: func(t *testing.T, s *State) { require.Equal(t, MemberDeleting, s.Members["m1"].Phase) },
	}, {
		name:    "a claim cancelled after its assignment tears the member down",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-a", Since: t0}},
		policy:  func(p *poolspec.Policy) { p.WarmTarget = 0 },
		event:   func(s *State, fx *recorder) { s.CancelClaim("lease-a", fx) },
		want:    []string{"do teardown m1 (lease_gone) as teardown-m1"},
	}, {
		name:    "a release tears the member down; a retried release does nothing",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-a", Since: t0}},
		event: func(s *State, fx *recorder) {
			s.Release(ReleaseRequest{LeaseID: "lease-a", InstanceID: "m1"}, fx)
			s.Release(ReleaseRequest{LeaseID: "lease-a", InstanceID: "m1"}, fx)
			s.Release(ReleaseRequest{LeaseID: "lease-b", InstanceID: "m2"}, fx)
		},
		want: []string{"do teardown m1 (lease_released) as teardown-m1"},
	}, {
		name: "maxClusters bounds what is made for the waiting claims",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-x", Since: t0},
			member("m2", MemberCreating, 0)},
		policy: func(p *poolspec.Policy) { p.WarmTarget, p.MaxConcurrentProvisions = 0, 5 },
		event: func(s *State, fx *recorder) {
			for _, l := range []string{"lease-a", "lease-b", "lease-c"} {
				s.Claim(ClaimRequest{LeaseID: l}, fx.Now())
			}
			s.Reconcile(fx)
		},
		want:  []string{"do provision p-t-1"},
		check: func(t *testing.T, s *State) { require.Len(t, s.Queue, 3) },
	}, {
		name:    "a claim waiting past queueTimeout is refused with pool_exhausted",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-x", Since: t0}},
		policy:  func(p *poolspec.Policy) { p.WarmTarget, p.MaxClusters = 0, 1 },
		event: func(s *State, fx *recorder) {
			s.Claim(ClaimRequest{LeaseID: "lease-old", At: t0.Add(-5 * time.Minute)}, fx.Now())
			s.Claim(ClaimRequest{LeaseID: "lease-new", At: t0}, fx.Now())
			s.Reconcile(fx)
		},
		want: []string{"send signal lease-old claim-failed pool_exhausted", "wait signal lease-old claim-failed pool_exhausted"},
		check: func(t *testing.T, s *State) {
			require.Equal(t, []ClaimRequest{{LeaseID: "lease-new", At: t0}}, s.Queue)
			require.Equal(t, t0.Add(5*time.Minute), s.NextWake(t0))
		},
	}, {
		name:   "a Provision that does not start drops the member and backs off",
		policy: func(p *poolspec.Policy) { p.MaxConcurrentProvisions = 1 },
		fail:   failChildren,
		event:  func(s *State, fx *recorder) { s.Reconcile(fx) },
		want:   []string{"do provision p-t-1"},
		check: func(t *testing.T, s *State) {
			require.Empty(t, s.Members)
			require.Equal(t, 1, s.ConsecutiveFailures)
			require.Equal(t, t0.Add(time.Second+5*time.Second), s.NextAttemptAt, "backoff counts from the failure")
			require.Equal(t, api.PoolBackoff, s.Status(t0.Add(2*time.Second)).Phase)
		},
	}, {
		name:    "a Teardown that does not start quarantines the member",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-a", Since: t0}},
		fail:    failChildren,
		event:   func(s *State, fx *recorder) { s.Release(ReleaseRequest{LeaseID: "lease-a", InstanceID: "m1"}, fx) },
		want:    []string{"do teardown m1 (lease_released) as teardown-m1"},
		check: func(t *testing.T, s *State) {
			require.Equal(t, MemberQuarantined, s.Members["m1"].Phase)
			require.Equal(t, 1, s.Status(t0).Quarantined)
		},
	}, {
		name:    "a quarantined member's retried teardown is a workflow of its own",
		members: []*Member{{ID: "m1", Phase: MemberQuarantined, Since: t0, TeardownAttempts: 1}},
		event:   func(s *State, fx *recorder) { s.RetryTeardown(MemberAction{InstanceID: "m1"}, fx) },
		want:    []string{"do teardown m1 (manual) as teardown-m1-2"},
	}, {
		name:    "a wedged creation is cancelled; if its Provision is gone it is torn down",
		members: []*Member{member("m1", MemberCreating, 11*time.Minute+time.Second), member("m2", MemberCreating, 12*time.Minute)},
		policy:  func(p *poolspec.Policy) { p.WarmTarget = 2 },
		fail: func(a Action) error {
			if c, ok := a.(CancelCreation); ok && c.MemberID == "m1" {
				return errGone
			}
			return nil
		},
		event: func(s *State, fx *recorder) { s.Reconcile(fx) },
		want: []string{"do cancel m2", "do cancel m1", "do teardown m1 (creating_timeout) as teardown-m1",
			"do provision p-t-1"},
		check: func(t *testing.T, s *State) {
			require.True(t, s.Members["m2"].CancelRequested)
			require.Equal(t, MemberDeleting, s.Members["m1"].Phase)
		},
	}, {
		name:    "the wedge deadline is read again after each cancellation",
		members: []*Member{member("m1", MemberCreating, 11*time.Minute), member("m2", MemberCreating, 11*time.Minute-time.Second/2)},
		policy:  func(p *poolspec.Policy) { p.WarmTarget = 0 },
		event:   func(s *State, fx *recorder) { s.Reconcile(fx) },
		want:    []string{"do cancel m1", "do cancel m2"},
	}, {
		name: "a delete refuses the waiting claims and tears down the Ready members; Leased ones stay",
		members: []*Member{member("m1", MemberReady, time.Minute),
			{ID: "m2", Phase: MemberLeased, LeaseID: "lease-x", Since: t0}},
		event: func(s *State, fx *recorder) {
			s.Claim(ClaimRequest{LeaseID: "lease-a"}, fx.Now())
			s.Delete(Deletion{Generation: 7})
			s.Reconcile(fx)
		},
		want: []string{"send signal lease-a claim-failed pool_deleted", "wait signal lease-a claim-failed pool_deleted",
			"do teardown m1 (pool_deleted) as teardown-m1"},
		check: func(t *testing.T, s *State) {
			require.False(t, s.Drained())
			require.Equal(t, api.PoolDraining, s.Status(t0).Phase)
			require.Equal(t, int64(7), s.DeleteGeneration)
		},
	}, {
		name:    "a drained pool with only quarantined members is done",
		members: []*Member{{ID: "m1", Phase: MemberQuarantined, Since: t0}},
		event:   func(s *State, fx *recorder) { s.Delete(Deletion{}); s.Reconcile(fx) },
		want:    []string{},
		check:   func(t *testing.T, s *State) { require.True(t, s.Drained()) },
	}, {
		name:    "applying a deleted pool again keeps it",
		members: []*Member{member("m1", MemberReady, time.Minute)},
		event: func(s *State, fx *recorder) {
			s.Delete(Deletion{Generation: 3})
			s.Apply(s.Policy)
			s.Reconcile(fx)
		},
		want:  []string{},
		check: func(t *testing.T, s *State) { require.False(t, s.Draining) },
	}, {
		name:    "a new template rolls the outdated Ready member once its replacement is Ready",
		members: []*Member{member("m1", MemberReady, time.Hour)},
		policy:  func(p *poolspec.Policy) { p.MinReadyDuringUpgrade, p.ScaleDownAfter = 1, 24*time.Hour },
		event: func(s *State, fx *recorder) {
			pol := s.Policy
			pol.KubernetesVersion = "v1.38.0"
			s.Apply(pol)
			s.Reconcile(fx)
			s.MemberReady(instance.MemberReport{InstanceID: "p-t-1"}, fx.Now())
			s.Reconcile(fx)
		},
		want: []string{"do provision p-t-1", "do teardown m1 (spec_drift) as teardown-m1"},
		check: func(t *testing.T, s *State) {
			require.Equal(t, int64(1), s.Generation)
			require.Equal(t, MemberReady, s.Members["p-t-1"].Phase)
		},
	}, {
		name:    "a change of size alone outdates nothing",
		members: []*Member{member("m1", MemberReady, time.Hour)},
		event: func(s *State, fx *recorder) {
			pol := s.Policy
			pol.MaxClusters = 9
			s.Apply(pol)
			s.Reconcile(fx)
		},
		want:  []string{},
		check: func(t *testing.T, s *State) { require.Zero(t, s.Generation) },
	}, {
		name:    "Ready members above the warm target go after scaleDownAfter, oldest first",
		members: []*Member{member("m1", MemberReady, 6*time.Minute), member("m2", MemberReady, 7*time.Minute), member("m3", MemberReady, time.Minute)},
		event:   func(s *State, fx *recorder) { s.Reconcile(fx) },
		want:    []string{"do teardown m2 (scale_down) as teardown-m2", "do teardown m1 (scale_down) as teardown-m1"},
	}, {
		name:    "a Ready member that fails its health checks is recorded, recycled and replaced",
		members: []*Member{member("m1", MemberReady, time.Minute)},
		policy:  func(p *poolspec.Policy) { p.HealthFailureThreshold = 2 },
		event: func(s *State, fx *recorder) {
			bad := []instance.HealthResult{{InstanceID: "m1", Message: "apiserver down"}}
			s.HealthChecked(bad, fx)
			require.Equal(t, 1, s.Status(fx.Now()).Unhealthy)
			s.HealthChecked(bad, fx)
			s.Reconcile(fx)
		},
		want: []string{"send record m1 Unhealthy", "do teardown m1 (health_failed) as teardown-m1", "do provision p-t-1"},
	}, {
		name:    "a Leased member that fails its health checks is reported to its lease and no longer checked",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-a", Since: t0}},
		policy:  func(p *poolspec.Policy) { p.HealthFailureThreshold = 1; p.WarmTarget = 0 },
		event: func(s *State, fx *recorder) {
			s.HealthChecked(HealthCheckFailed(CheckHealth{Queue: "q", IDs: []string{"m1"}}, errGone), fx)
			require.Empty(t, s.HealthChecksDue(fx.Now(), nil))
		},
		want:  []string{"send record m1 Unhealthy", "do signal lease-a instance-unhealthy m1"},
		check: func(t *testing.T, s *State) { require.True(t, s.Members["m1"].Broken) },
	}, {
		name:    "a Leased member's sync errors are reported to its lease when they change, a Ready member's not",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-a", Since: t0}, member("m2", MemberReady, time.Minute)},
		event: func(s *State, fx *recorder) {
			check := func(st *instance.SyncState) {
				s.HealthChecked([]instance.HealthResult{{InstanceID: "m1", Healthy: true, Sync: st}, {InstanceID: "m2", Healthy: true, Sync: st}}, fx)
			}
			denied := &instance.SyncState{Reason: api.ReasonSyncDenied, Message: "Pod default/p: forbidden", Objects: 1}
			check(denied)
			check(denied) // unchanged: nothing to say
			check(&instance.SyncState{Reason: api.ReasonHostQuotaExceeded, Message: "Pod default/q: exceeded quota", Objects: 2})
			check(nil) // unknown: nothing changes
			check(&instance.SyncState{})
		},
		want: []string{"do signal lease-a instance-sync m1 sync_denied", "do signal lease-a instance-sync m1 host_quota_exceeded",
			"do signal lease-a instance-sync m1 synced"},
		check: func(t *testing.T, s *State) { require.Empty(t, s.Members["m1"].SyncReason) },
	}, {
		name:    "health checks are grouped by host queue, skipping a queue still in flight",
		members: []*Member{member("m1", MemberReady, time.Minute), member("m2", MemberReady, 2*time.Minute), {ID: "m3", Phase: MemberReady, Placement: instance.HostAssignment{TaskQueue: "other"}}},
		event: func(s *State, fx *recorder) {
			due := s.HealthChecksDue(fx.Now(), map[string]bool{"other": true})
			require.Len(t, due, 1)
			require.Equal(t, []string{"m2", "m1"}, due[0].IDs)
			require.Empty(t, s.HealthChecksDue(fx.Now(), nil), "not due again before the interval")
			require.Len(t, s.HealthChecksDue(fx.Now().Add(poolspec.DefaultHealthCheckInterval), nil), 2)
		},
		want: []string{},
	}, {
		name:    "continue-as-new keeps the assignments of live leases and the recent ones",
		members: []*Member{{ID: "m1", Phase: MemberLeased, LeaseID: "lease-live", Since: t0}},
		event: func(s *State, fx *recorder) {
			s.Assigned = map[string]string{"lease-live": "m1", "lease-recent": "m2", "lease-old": "m3", "lease-untimed": "m4"}
			s.AssignedAt = map[string]time.Time{"lease-live": t0.Add(-time.Hour), "lease-recent": t0.Add(-time.Minute), "lease-old": t0.Add(-time.Hour)}
			s.PruneAssigned(fx.Now())
		},
		want: []string{},
		check: func(t *testing.T, s *State) {
			require.Equal(t, map[string]string{"lease-live": "m1", "lease-recent": "m2"}, s.Assigned)
			require.Len(t, s.AssignedAt, 2)
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := testPolicy()
			if c.policy != nil {
				c.policy(&pol)
			}
			s := stateWith(pol, c.members...)
			fx := &recorder{now: t0, fail: c.fail}
			c.event(s, fx)
			require.Equal(t, c.want, withoutCounts(fx.log))
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}

// The decisions stay free of Temporal: what they do outside their state goes through an
// Executor, so that they can be tested (and reasoned about) as plain code.
func TestDecisionsDoNotImportTemporal(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "state.go", nil, parser.ImportsOnly)
	require.NoError(t, err)
	for _, imp := range f.Imports {
		require.NotContains(t, imp.Path.Value, "go.temporal.io", "state.go imports %s", imp.Path.Value)
	}
}

func prepared(m *Member) *Member { m.Prepared = true; return m }

func TestClaimNow(t *testing.T) {
	claim := ClaimRequest{LeaseID: "lease-a"}
	cases := []struct {
		name    string
		members []*Member
		setup   func(s *State)
		bound   string // the member bound, "" for none
		why     string
	}{
		{name: "the oldest prepared Ready member is bound",
			members: []*Member{prepared(member("m1", MemberReady, time.Minute)), prepared(member("m2", MemberReady, 2*time.Minute))},
			bound:   "m2"},
		{name: "a member without a prepared credential is left to the slow path",
			members: []*Member{member("m1", MemberReady, 2*time.Minute), prepared(member("m2", MemberReady, time.Minute))},
			bound:   "m2"},
		{name: "no prepared member: not bound",
			members: []*Member{member("m1", MemberReady, time.Minute), prepared(member("m2", MemberCreating, time.Minute))},
			why:     NotBoundNoMember},
		{name: "a member that failed a health check is not bound",
			members: []*Member{func() *Member { m := prepared(member("m1", MemberReady, time.Minute)); m.HealthFailures = 1; return m }()},
			why:     NotBoundNoMember},
		{name: "a queued claim is not overtaken",
			members: []*Member{prepared(member("m1", MemberReady, time.Minute))},
			setup:   func(s *State) { s.Queue = []ClaimRequest{{LeaseID: "lease-q"}} },
			why:     NotBoundQueue},
		{name: "a draining pool binds nothing",
			members: []*Member{prepared(member("m1", MemberReady, time.Minute))},
			setup:   func(s *State) { s.Draining = true },
			why:     NotBoundDraining},
		{name: "a claim served before, member gone since: not bound again",
			members: []*Member{prepared(member("m1", MemberReady, time.Minute))},
			setup:   func(s *State) { s.Assigned["lease-a"] = "m0" },
			why:     NotBoundWasServed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := stateWith(testPolicy(), c.members...)
			if c.setup != nil {
				c.setup(s)
			}
			before := s.AssignSeq
			asg, why, ok := s.ClaimNow(claim, t0)
			if c.bound == "" {
				require.False(t, ok)
				require.Equal(t, c.why, why)
				require.Equal(t, before, s.AssignSeq, "nothing changed")
				return
			}
			require.True(t, ok)
			require.Equal(t, c.bound, asg.InstanceID)
			require.True(t, asg.Prepared)
			require.Equal(t, t0, asg.At)
			require.Equal(t, before+1, asg.Seq)
			m := s.Members[c.bound]
			require.Equal(t, MemberLeased, m.Phase)
			require.Equal(t, "lease-a", m.LeaseID)
			require.Equal(t, c.bound, s.Assigned["lease-a"])
			// The same claim again (an Update retried in a run that does not know its id).
			again, _, ok := s.ClaimNow(claim, t0.Add(time.Minute))
			require.True(t, ok)
			require.Equal(t, c.bound, again.InstanceID)
			require.Zero(t, again.Seq, "a retry is not a new bind")
			require.Equal(t, before+1, s.AssignSeq)
		})
	}
}
