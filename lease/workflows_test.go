package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/kunobi-ninja/kobe/poolspec"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/lease/leasestart"

	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"

	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/worker"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
)

// leaseEnv runs the Lease workflow alone: its pool is played by the test (signals to the pool
// are recorded, the assignment is signalled in), the backend is the scripted fake, the store real.
type leaseEnv struct {
	env      *testsuite.TestWorkflowEnvironment
	store    store.Store
	fb       *workflowtest.Backend
	toPool   []string
	released []pool.ReleaseRequest
	acts     *worker.Activities
	metrics  *capturedMetrics
}

// setBackend puts b in place of the fake backend.
func (le *leaseEnv) setBackend(b backends.RuntimeBackend) { le.acts.Backends["fake"] = b }

// newLeaseEnv builds the environment; children are registered before any mock (the SDK's rule).
func newLeaseEnv(t *testing.T, children ...func(*leaseEnv)) *leaseEnv {
	le := &leaseEnv{store: workflowtest.MemoryStore(t), fb: &workflowtest.Backend{Created: map[string]bool{"i1": true}},
		metrics: newCapturedMetrics()}
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(le.metrics)
	le.env = workflowtest.NewEnvironment(&suite)
	le.env.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	for _, register := range children {
		register(le)
	}
	acts := worker.NewActivities(le.store, zap.NewNop())
	acts.Backends["fake"] = le.fb
	acts.Secrets = secretbox.Random()
	acts.RegisterActivities(le.env)
	le.acts = acts
	le.env.OnSignalExternalWorkflow(mock.Anything, "pool-p", "", mock.Anything, mock.Anything).Return(
		func(_, _, _, signal string, arg any) error {
			le.toPool = append(le.toPool, signal)
			if r, ok := arg.(pool.ReleaseRequest); ok {
				le.released = append(le.released, r)
			}
			return nil
		})
	return le
}

var input = lease.Input{LeaseID: "lease-1", Pool: "p", Principal: "alice",
	LeaseTerms: poolspec.LeaseTerms{TTL: time.Hour, MaxTTL: 3 * time.Hour, MaxExtensions: 2}}

func (le *leaseEnv) assignAfter(d time.Duration) {
	le.env.RegisterDelayedCallback(func() {
		le.env.SignalWorkflow(pool.SignalAssigned, pool.Assignment{InstanceID: "i1", Backend: "fake",
			Placement: instance.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}, Endpoint: "https://fake"})
	}, d)
}

func (le *leaseEnv) view(t *testing.T) lease.View {
	v, err := le.env.QueryWorkflow(lease.QueryLease)
	require.NoError(t, err)
	var lv lease.View
	require.NoError(t, v.Get(&lv))
	return lv
}

// extend sends the extend Update; the outcome lands in results[name] when the environment
// delivers it ("ok" for success, the reason code of a refusal).
func (le *leaseEnv) extend(results map[string]string, name string, by time.Duration) {
	le.env.UpdateWorkflow(lease.UpdateExtend, name, &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			r, _ := lease.IsExtendRejection(err)
			results[name] = string(r)
		},
		OnAccept: func() {},
		OnComplete: func(_ interface{}, err error) {
			if r, rejected := lease.IsExtendRejection(err); rejected {
				results[name] = string(r) // refused by the handler, once accepted
			} else if err == nil {
				results[name] = "ok"
			} else {
				results[name] = err.Error()
			}
		},
	}, lease.ExtendRequest{By: by})
}

// A long TTL expires in test time: the instance goes back to the pool for teardown.
func TestLeaseExpiresAtTTL(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(time.Second)
	var boundView lease.View
	le.env.RegisterDelayedCallback(func() { boundView = le.view(t) }, time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseBound, boundView.Phase)
	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.Equal(t, time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	require.Len(t, le.released, 1)
	assert.Equal(t, "i1", le.released[0].InstanceID)
	assert.Equal(t, []string{pool.SignalClaim, pool.SignalRelease}, le.toPool)
	row, err := le.store.GetLease(context.Background(), "lease-1")
	require.NoError(t, err)
	assert.Equal(t, api.LeaseExpired, row.Phase)
	_, err = le.store.GetLeaseCredential(context.Background(), "lease-1")
	assert.ErrorIs(t, err, store.ErrNotFound, "the credential is revoked and forgotten")
}

// Extensions: within budget they move the expiry; the third is over budget; one past the
// ceiling is refused.
func TestLeaseExtendBudgetAndCeiling(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(time.Second)
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { le.extend(results, "past ceiling", 3*time.Hour) }, 10*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "first", 30*time.Minute) }, 11*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "second", 30*time.Minute) }, 12*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "third", time.Minute) }, 13*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "zero", 0) }, 14*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, 15*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))

	assert.Equal(t, string(api.ReasonMaxTTLCeiling), results["past ceiling"])
	assert.Equal(t, "ok", results["first"])
	assert.Equal(t, "ok", results["second"])
	assert.Equal(t, string(api.ReasonExtensionBudgetExhausted), results["third"])
	assert.Equal(t, string(api.ReasonInvalidRequest), results["zero"])
	assert.Equal(t, api.LeaseReleased, final.Phase)
	assert.Equal(t, 2, final.Extensions)
	assert.Equal(t, 2*time.Hour, final.ExpiresAt.Sub(final.BoundAt))
}

// An extension re-arms the TTL timer: the lease outlives its original expiry.
func TestLeaseExtensionDelaysExpiry(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(0)
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() { le.extend(results, "hour", time.Hour) }, 50*time.Minute)
	var at90 lease.View
	le.env.RegisterDelayedCallback(func() { at90 = le.view(t) }, 90*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, "ok", results["hour"])
	assert.Equal(t, api.LeaseBound, at90.Phase, "still bound after the original hour")
	assert.Equal(t, api.LeaseExpired, final.Phase)
}

// A claim the pool cannot serve fails with the pool's reason, and nothing is handed back.
func TestLeaseClaimFailure(t *testing.T) {
	le := newLeaseEnv(t)
	le.env.RegisterDelayedCallback(func() {
		le.env.SignalWorkflow(pool.SignalClaimFailed, pool.ClaimFailure{Reason: string(api.ReasonPoolExhausted)})
	}, 5*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseFailed, final.Phase)
	assert.Equal(t, api.ReasonPoolExhausted, final.Reason)
	assert.Empty(t, le.released)
}

// Released while still queued: the claim is withdrawn from the pool.
func TestLeaseReleasedWhilePending(t *testing.T) {
	le := newLeaseEnv(t)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseReleased, final.Phase)
	assert.Equal(t, []string{pool.SignalClaim, pool.SignalCancelClaim}, le.toPool)
}

// With an idle timeout, heartbeats keep the lease; once they stop, it ends early (Expired,
// idle_timeout) and the instance goes back, long before the TTL.
func TestLeaseIdleTimeout(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(time.Second)
	in := input
	in.IdleTimeout = 5 * time.Minute
	// Heartbeats every 3 minutes for 30 minutes, then silence.
	for at := 3 * time.Minute; at <= 30*time.Minute; at += 3 * time.Minute {
		le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalHeartbeat, nil) }, at)
	}
	var at20 lease.View
	le.env.RegisterDelayedCallback(func() { at20 = le.view(t) }, 20*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, in)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseBound, at20.Phase, "heartbeats keep it")
	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.Equal(t, api.ReasonIdleTimeout, final.Reason)
	assert.Equal(t, 35*time.Minute, le.env.Now().Sub(final.BoundAt).Round(time.Minute), "5 min after the last heartbeat")
	require.Len(t, le.released, 1)
}

// The wait-bound update returns once the lease is Bound (how clients wait without polling).
func TestLeaseWaitBoundUpdate(t *testing.T) {
	le := newLeaseEnv(t)
	le.assignAfter(10 * time.Second)
	var got lease.View
	var gotErr error
	le.env.RegisterDelayedCallback(func() {
		le.env.UpdateWorkflow(lease.UpdateWaitBound, "w1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { gotErr = err },
			OnAccept: func() {},
			OnComplete: func(v interface{}, err error) {
				gotErr = err
				if lv, ok := v.(lease.View); ok {
					got = lv
				}
			},
		})
	}, time.Second)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	require.NoError(t, gotErr)
	assert.Equal(t, api.LeaseBound, got.Phase)
	assert.Equal(t, "i1", got.InstanceID)
}

// credBackend is the fake backend whose lease credentials can be made to fail, and counts them.
type credBackend struct {
	*workflowtest.Backend
	mu      sync.Mutex
	failing bool
	failN   int // fail this many more issuances (then succeed), besides failing
	issued  int
}

func (b *credBackend) Credentials(ctx context.Context, id string, r backends.CredentialRequest) (backends.Credential, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failing || b.failN > 0 {
		b.failN = max(b.failN-1, 0)
		return backends.Credential{}, errors.New("instance unreachable")
	}
	b.issued++
	return backends.Credential{}, nil
}

func (b *credBackend) set(failing bool, failN int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing, b.failN = failing, failN
}

func (b *credBackend) issuances() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.issued
}

// capturedMetrics records counters by name and tags.
type capturedMetrics struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
}

func newCapturedMetrics() *capturedMetrics {
	return &capturedMetrics{mu: &sync.Mutex{}, tags: map[string]string{}, counts: map[string]int64{}}
}

func (m *capturedMetrics) WithTags(t map[string]string) client.MetricsHandler {
	n := &capturedMetrics{mu: m.mu, tags: map[string]string{}, counts: m.counts}
	maps.Copy(n.tags, m.tags)
	maps.Copy(n.tags, t)
	return n
}

func (m *capturedMetrics) key(name string) string {
	keys := slices.Sorted(maps.Keys(m.tags))
	k := name
	for _, t := range keys {
		k += "," + t + "=" + m.tags[t]
	}
	return k
}

func (m *capturedMetrics) Counter(name string) client.MetricsCounter {
	return capturedCounter{m, m.key(name)}
}
func (m *capturedMetrics) Gauge(string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge("")
}
func (m *capturedMetrics) Timer(string) client.MetricsTimer {
	return client.MetricsNopHandler.Timer("")
}

func (m *capturedMetrics) count(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[key]
}

type capturedCounter struct {
	m   *capturedMetrics
	key string
}

func (c capturedCounter) Inc(n int64) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.counts[c.key] += n
}

// newCredLeaseEnv is newLeaseEnv with a backend whose credentials the test controls, and
// captured metrics; children are registered before any mock.
func newCredLeaseEnv(t *testing.T, children ...func(*leaseEnv)) (*leaseEnv, *credBackend, *capturedMetrics) {
	le := &leaseEnv{store: workflowtest.MemoryStore(t)}
	cb := &credBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}}
	mh := newCapturedMetrics()
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(mh)
	le.env = workflowtest.NewEnvironment(&suite)
	le.env.RegisterWorkflowWithOptions(lease.Lease, workflow.RegisterOptions{Name: lease.WorkflowName})
	le.env.RegisterWorkflowWithOptions(leaseHost, workflow.RegisterOptions{Name: "LeaseHost"})
	for _, register := range children {
		register(le)
	}
	acts := worker.NewActivities(le.store, zap.NewNop())
	acts.Backends["fake"] = cb
	acts.Secrets = secretbox.Random()
	acts.RegisterActivities(le.env)
	le.env.OnSignalExternalWorkflow(mock.Anything, "pool-p", "", mock.Anything, mock.Anything).Return(
		func(_, _, _, signal string, arg any) error {
			le.toPool = append(le.toPool, signal)
			if r, ok := arg.(pool.ReleaseRequest); ok {
				le.released = append(le.released, r)
			}
			return nil
		})
	return le, cb, mh
}

// leaseHost runs a lease as its child, so that the test environment follows the lease from run
// to run when it continues as new (it does so for children only).
func leaseHost(ctx workflow.Context, in lease.Input) (lease.View, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: leasestart.WorkflowID(in.LeaseID)})
	var v lease.View
	err := workflow.ExecuteChildWorkflow(cctx, lease.WorkflowName, in).Get(ctx, &v)
	return v, err
}

// continuedAs returns the input of the next run of a lease that continued as new.
func continuedAs(t *testing.T, err error) lease.Input {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can, "the lease continued as new")
	var next lease.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

// A failed extension changes nothing: the expiry, the budget and the credential stay as they
// were, and the budget is still there for the next attempts.
func TestLeaseFailedExtendChangesNothing(t *testing.T) {
	le, cb, _ := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() {
		cb.set(true, 0) // the instance stops answering
		le.extend(results, "unreachable", 30*time.Minute)
	}, 10*time.Minute)
	var after lease.View
	le.env.RegisterDelayedCallback(func() { after = le.view(t); cb.set(false, 0) }, 25*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "first", 30*time.Minute) }, 30*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.extend(results, "second", 30*time.Minute) }, 31*time.Minute)
	le.env.RegisterDelayedCallback(func() { le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, 40*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))

	assert.Contains(t, results["unreachable"], "instance unreachable", "the extension fails with the issuance")
	assert.Equal(t, 0, after.Extensions, "a failed extension spends no budget")
	assert.Equal(t, time.Hour, after.ExpiresAt.Sub(after.BoundAt), "a failed extension does not move the expiry")
	assert.Equal(t, "ok", results["first"])
	assert.Equal(t, "ok", results["second"], "the budget is intact after the failure")
	assert.Equal(t, 2, final.Extensions)
	assert.Equal(t, 2*time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	assert.Equal(t, 3, cb.issuances(), "the bind and the two extensions")
}

// A Bound lease flooded with heartbeats continues as new again and again, and each run carries
// the lease: it binds and issues once, expires at its TTL, and hands its instance back once.
func TestLeaseHeartbeatFloodContinuesAsNew(t *testing.T) {
	for _, release := range []bool{false, true} {
		t.Run(map[bool]string{false: "expires at its TTL", true: "released"}[release], func(t *testing.T) {
			le, cb, _ := newCredLeaseEnv(t)
			in := input
			in.IdleTimeout = 15 * time.Minute
			in.ContinueAsNewAfter = 1000
			runs := 0
			var resumed []lease.Input
			le.env.SetOnChildWorkflowStartedListener(func(_ *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
				runs++
				var next lease.Input
				require.NoError(t, args.Get(&next))
				if next.Resume != nil {
					resumed = append(resumed, next)
				}
			})
			timers := 0
			le.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
			le.env.RegisterDelayedCallback(func() {
				require.NoError(t, le.env.SignalWorkflowByID("lease-1", pool.SignalAssigned, pool.Assignment{InstanceID: "i1", Backend: "fake",
					Placement: instance.HostAssignment{HostID: "h1", TaskQueue: "kobe-host-h1"}, Endpoint: "https://fake"}))
			}, time.Second)
			// 10,000 heartbeats, one every 300 ms from the first minute (for 50 minutes); each
			// callback schedules the next (the environment cannot hold 10,000 at once).
			beats := 0
			var beat func()
			beat = func() {
				require.NoError(t, le.env.SignalWorkflowByID("lease-1", lease.SignalHeartbeat, nil))
				if beats++; beats < 10000 {
					le.env.RegisterDelayedCallback(beat, 300*time.Millisecond)
				}
			}
			le.env.RegisterDelayedCallback(beat, time.Minute)
			var mid lease.View
			le.env.RegisterDelayedCallback(func() {
				v, err := le.env.QueryWorkflowByID("lease-1", lease.QueryLease)
				require.NoError(t, err)
				require.NoError(t, v.Get(&mid))
			}, 30*time.Minute)
			if release {
				le.env.RegisterDelayedCallback(func() {
					require.NoError(t, le.env.SignalWorkflowByID("lease-1", lease.SignalReleaseLease, nil))
				}, 40*time.Minute)
			}
			le.env.ExecuteWorkflow("LeaseHost", in)
			require.NoError(t, le.env.GetWorkflowError())
			var final lease.View
			require.NoError(t, le.env.GetWorkflowResult(&final))

			t.Logf("%d heartbeats, %d runs, %d timers", beats, runs, timers)
			assert.Less(t, timers, 4*runs+10, "a heartbeat re-arms no timer: timers come with runs, not heartbeats")
			if !release {
				assert.Equal(t, 10000, beats)
			}
			assert.GreaterOrEqual(t, runs, 4, "the lease continued as new several times")
			assert.Equal(t, runs-1, len(resumed))
			for _, r := range resumed {
				assert.Equal(t, "i1", r.Resume.View.InstanceID)
				assert.Equal(t, api.LeaseBound, r.Resume.View.Phase)
				assert.Equal(t, time.Hour, r.Resume.View.ExpiresAt.Sub(r.Resume.View.BoundAt))
			}
			assert.Equal(t, api.LeaseBound, mid.Phase, "queries answer on a later run")
			assert.Equal(t, 1, cb.issuances(), "one credential for the lease, not one per run")
			assert.Equal(t, 1, countOf(le.toPool, pool.SignalClaim), "claimed once")
			require.Len(t, le.released, 1, "the instance goes back once")
			assert.Equal(t, "i1", le.released[0].InstanceID)
			if release {
				assert.Equal(t, api.LeaseReleased, final.Phase)
			} else {
				assert.Equal(t, api.LeaseExpired, final.Phase)
				assert.Empty(t, final.Reason, "the TTL, not the idle timeout")
				assert.Equal(t, time.Hour, final.ExpiresAt.Sub(final.BoundAt))
			}
			row, err := le.store.GetLease(context.Background(), "lease-1")
			require.NoError(t, err)
			assert.Equal(t, final.Phase, row.Phase)
			_, err = le.store.GetLeaseCredential(context.Background(), "lease-1")
			assert.ErrorIs(t, err, store.ErrNotFound, "the credential is revoked")
		})
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}

// A release that is delivered with the wake-up that decides to continue as new ends the lease
// instead of being lost with the run.
func TestLeaseReleaseAroundContinueAsNew(t *testing.T) {
	le, _, _ := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	le.env.RegisterDelayedCallback(func() {
		le.env.SetContinueAsNewSuggested(true)
		le.env.SignalWorkflowSkippingWorkflowTask(lease.SignalReleaseLease, nil)
		le.env.SignalWorkflow(lease.SignalHeartbeat, nil)
	}, 10*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError(), "the lease ends; it does not continue as new")
	var final lease.View
	require.NoError(t, le.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseReleased, final.Phase)
	require.Len(t, le.released, 1)
}

// An extension still issuing its credential when the run decides to continue as new finishes
// first; the next run carries its expiry and budget, answers queries and extends, and issues
// nothing when it starts.
func TestLeaseExtendAroundContinueAsNew(t *testing.T) {
	le, cb, _ := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	results := map[string]string{}
	le.env.RegisterDelayedCallback(func() {
		cb.set(false, 3) // a slow issuance: three failed attempts, then it works
		le.extend(results, "during", 30*time.Minute)
	}, 10*time.Minute)
	le.env.RegisterDelayedCallback(func() {
		le.env.SetContinueAsNewSuggested(true)
		le.env.SignalWorkflow(lease.SignalHeartbeat, nil)
	}, 10*time.Minute+100*time.Millisecond)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	next := continuedAs(t, le.env.GetWorkflowError())
	assert.Equal(t, "ok", results["during"])
	require.NotNil(t, next.Resume)
	assert.Equal(t, 1, next.Resume.View.Extensions)
	assert.Equal(t, 90*time.Minute, next.Resume.View.ExpiresAt.Sub(next.Resume.View.BoundAt))
	assert.Equal(t, 2, cb.issuances(), "the bind and the extension")
	assert.Empty(t, le.released, "nothing handed back")

	// The next run, from that input.
	le2, cb2, _ := newCredLeaseEnv(t)
	le2.env.SetStartTime(le.env.Now())
	results2 := map[string]string{}
	var resumed lease.View
	le2.env.RegisterDelayedCallback(func() { resumed = le2.view(t) }, time.Second)
	le2.env.RegisterDelayedCallback(func() { le2.extend(results2, "second", 30*time.Minute) }, time.Minute)
	le2.env.RegisterDelayedCallback(func() { le2.extend(results2, "third", 30*time.Minute) }, 2*time.Minute)
	le2.env.ExecuteWorkflow(lease.WorkflowName, next)
	require.NoError(t, le2.env.GetWorkflowError())
	var final lease.View
	require.NoError(t, le2.env.GetWorkflowResult(&final))
	assert.Equal(t, api.LeaseBound, resumed.Phase)
	assert.Equal(t, 1, resumed.Extensions)
	assert.Equal(t, "ok", results2["second"])
	assert.Equal(t, string(api.ReasonExtensionBudgetExhausted), results2["third"])
	assert.Equal(t, api.LeaseExpired, final.Phase)
	assert.Equal(t, 2*time.Hour, final.ExpiresAt.Sub(final.BoundAt))
	assert.Equal(t, 1, cb2.issuances(), "the new run issues for its extension only")
	assert.NotContains(t, le2.toPool, pool.SignalClaim, "the new run does not claim again")
	require.Len(t, le2.released, 1)
}

// An instance that fails its health checks shows on its lease as a condition (one per type,
// kept across continue-as-new), with a metric; the lease stays Bound.
func TestLeaseInstanceUnhealthy(t *testing.T) {
	le, _, mh := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	report := func(instance, msg string, at time.Duration) {
		le.env.RegisterDelayedCallback(func() {
			le.env.SignalWorkflow(pool.SignalInstanceUnhealthy, pool.HealthReport{InstanceID: instance,
				Reason: pool.ReasonHealthFailed, Message: msg, Failures: 3, At: le.env.Now()})
		}, at)
	}
	report("other", "not this lease's", 2*time.Minute)
	report("i1", "kube-apiserver: connection refused", 5*time.Minute)
	report("i1", "kube-apiserver: still refused", 7*time.Minute)
	var at6, at8 lease.View
	var reportedAt time.Time
	le.env.RegisterDelayedCallback(func() { at6 = le.view(t); reportedAt = le.env.Now().Add(-time.Minute) }, 6*time.Minute)
	le.env.RegisterDelayedCallback(func() { at8 = le.view(t) }, 8*time.Minute)
	le.env.RegisterDelayedCallback(func() {
		le.env.SetContinueAsNewSuggested(true)
		le.env.SignalWorkflow(lease.SignalHeartbeat, nil)
	}, 9*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	next := continuedAs(t, le.env.GetWorkflowError())

	assert.Equal(t, api.LeaseBound, at6.Phase, "the holder decides what to do")
	require.Len(t, at6.Conditions, 1)
	c := at6.Conditions[0]
	assert.Equal(t, lease.ConditionInstanceHealthy, c.Type)
	assert.Equal(t, "False", c.Status)
	assert.Equal(t, api.ReasonHealthFailed, c.Reason)
	assert.Equal(t, "kube-apiserver: connection refused", c.Message)
	assert.True(t, reportedAt.Equal(c.LastTransitionTime), "%s, %s", reportedAt, c.LastTransitionTime)
	require.Len(t, at8.Conditions, 1, "a later report replaces the condition")
	assert.Equal(t, "kube-apiserver: still refused", at8.Conditions[0].Message)
	assert.True(t, reportedAt.Equal(at8.Conditions[0].LastTransitionTime), "the status did not change")
	assert.Equal(t, int64(1), mh.count(lease.MetricLeaseInstanceUnhealthy+",profile=p"))
	require.NotNil(t, next.Resume)
	assert.Equal(t, at8.Conditions, next.Resume.View.Conditions, "the condition is carried into the next run")
	assert.Empty(t, le.released)
}

// What the instance could not sync onto its host shows on its lease as the condition Synced
// (False with the newest error's reason, True once every object synced again), and every change
// of a condition, its reason included, is in the audit log once; the lease stays Bound.
func TestLeaseInstanceSyncErrors(t *testing.T) {
	le, _, _ := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	report := func(r pool.SyncReport, at time.Duration) {
		le.env.RegisterDelayedCallback(func() {
			r.At = le.env.Now()
			le.env.SignalWorkflow(pool.SignalInstanceSync, r)
		}, at)
	}
	report(pool.SyncReport{InstanceID: "other", Reason: api.ReasonSyncConflict, Message: "not this lease's"}, 2*time.Minute)
	report(pool.SyncReport{InstanceID: "i1", Reason: api.ReasonSyncDenied, Message: "Pod default/p: forbidden", Objects: 1}, 3*time.Minute)
	report(pool.SyncReport{InstanceID: "i1", Reason: api.ReasonHostQuotaExceeded, Message: "Pod default/q: exceeded quota", Objects: 2}, 5*time.Minute)
	report(pool.SyncReport{InstanceID: "i1", Synced: true}, 7*time.Minute)
	le.env.RegisterDelayedCallback(func() {
		le.env.SignalWorkflow(pool.SignalInstanceUnhealthy, pool.HealthReport{InstanceID: "i1", Reason: pool.ReasonHealthFailed,
			Message: "kube-apiserver: connection refused", Failures: 3, At: le.env.Now()})
	}, 8*time.Minute)
	var at4, at6, at9 lease.View
	le.env.RegisterDelayedCallback(func() { at4 = le.view(t) }, 4*time.Minute)
	le.env.RegisterDelayedCallback(func() { at6 = le.view(t) }, 6*time.Minute)
	le.env.RegisterDelayedCallback(func() { at9 = le.view(t); le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, 9*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())

	require.Len(t, at4.Conditions, 1)
	c := at4.Conditions[0]
	assert.Equal(t, lease.ConditionSynced, c.Type)
	assert.Equal(t, "False", c.Status)
	assert.Equal(t, api.ReasonSyncDenied, c.Reason)
	assert.Equal(t, "Pod default/p: forbidden", c.Message)
	assert.Equal(t, api.LeaseBound, at4.Phase)
	require.Len(t, at6.Conditions, 1)
	assert.Equal(t, api.ReasonHostQuotaExceeded, at6.Conditions[0].Reason)
	assert.Equal(t, "Pod default/q: exceeded quota (and 1 more objects)", at6.Conditions[0].Message)
	assert.True(t, c.LastTransitionTime.Equal(at6.Conditions[0].LastTransitionTime), "still False: the transition time stays")
	require.Len(t, at9.Conditions, 2)
	assert.Equal(t, "True", at9.Conditions[0].Status, "synced again")
	assert.Empty(t, at9.Conditions[0].Reason)
	assert.Equal(t, lease.ConditionInstanceHealthy, at9.Conditions[1].Type)

	events, err := le.store.ListEvents(context.Background(), store.EventFilter{Action: lease.ActionLeaseCondition, Target: "lease-1"})
	require.NoError(t, err)
	var got []string
	for _, e := range events {
		var d map[string]string
		require.NoError(t, json.Unmarshal(e.Detail, &d))
		assert.Equal(t, "i1", d["instance"])
		got = append(got, d["type"]+"="+d["status"]+" "+d["reason"])
	}
	assert.ElementsMatch(t, []string{"Synced=False sync_denied", "Synced=False host_quota_exceeded", "Synced=True ",
		"InstanceHealthy=False health_failed"}, got, "one event a change")
}

// A pool's warning that the lease's instance's certificates expire soon and cannot be re-issued
// in place shows as the condition CertificatesValid False, audited; the lease stays Bound.
func TestLeaseCertificatesExpiring(t *testing.T) {
	le, _, _ := newCredLeaseEnv(t)
	le.assignAfter(time.Second)
	expires := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	le.env.RegisterDelayedCallback(func() {
		le.env.SignalWorkflow(pool.SignalInstanceCertificates, pool.CertificateReport{InstanceID: "other", ExpiresAt: expires, Message: "not ours", At: le.env.Now()})
		le.env.SignalWorkflow(pool.SignalInstanceCertificates, pool.CertificateReport{InstanceID: "i1", ExpiresAt: expires,
			Message: "the certificates of instance i1 expire at 2027-01-01T00:00:00Z", At: le.env.Now()})
	}, 2*time.Minute)
	var at3 lease.View
	le.env.RegisterDelayedCallback(func() { at3 = le.view(t); le.env.SignalWorkflow(lease.SignalReleaseLease, nil) }, 3*time.Minute)
	le.env.ExecuteWorkflow(lease.WorkflowName, input)
	require.NoError(t, le.env.GetWorkflowError())
	assert.Equal(t, api.LeaseBound, at3.Phase)
	require.Len(t, at3.Conditions, 1)
	c := at3.Conditions[0]
	assert.Equal(t, lease.ConditionCertificatesValid, c.Type)
	assert.Equal(t, "False", c.Status)
	assert.Equal(t, api.ReasonCertificatesExpiring, c.Reason)
	assert.Contains(t, c.Message, "2027-01-01T00:00:00Z")
	events, err := le.store.ListEvents(context.Background(), store.EventFilter{Action: lease.ActionLeaseCondition, Target: "lease-1"})
	require.NoError(t, err)
	require.Len(t, events, 1, "audited once")
}
