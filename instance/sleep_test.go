package instance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/testsuite/workflowtest"
	"github.com/kunobi-ninja/kobe/worker"
)

// sleepyBackend is the scripted fake with the Sleeper capability; ResumeErr fails every Resume.
type sleepyBackend struct {
	*workflowtest.Backend
	sleeps, resumes int
	ResumeErr       error
}

func (b *sleepyBackend) Sleep(context.Context, string) error { b.sleeps++; return nil }
func (b *sleepyBackend) Resume(context.Context, string) error {
	b.resumes++
	return b.ResumeErr
}

func sleepEnv(t *testing.T, b backends.RuntimeBackend) (*testsuite.TestWorkflowEnvironment, store.Store) {
	s := workflowtest.MemoryStore(t)
	var suite testsuite.WorkflowTestSuite
	env := workflowtest.NewEnvironment(&suite)
	env.RegisterWorkflowWithOptions(instance.Sleep, workflow.RegisterOptions{Name: instance.SleepWorkflowName})
	env.RegisterWorkflowWithOptions(instance.Wake, workflow.RegisterOptions{Name: instance.WakeWorkflowName})
	acts := worker.NewActivities(s, zap.NewNop())
	acts.Backends["fake"] = b
	acts.RegisterActivities(env)
	return env, s
}

var sleepInput = instance.SleepInput{Backend: "fake", Spec: backends.InstanceSpec{ID: "i1", Pool: "p"}, LeaseID: "lease-1",
	ResumeTimeout: time.Minute}

func lastEvent(t *testing.T, s store.Store) store.Event {
	events, err := s.ListEvents(context.Background(), store.EventFilter{Target: "i1"})
	require.NoError(t, err)
	require.NotEmpty(t, events)
	return events[len(events)-1]
}

func TestSleepRecordsSleepingInstance(t *testing.T) {
	b := &sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}}
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.SleepWorkflowName, sleepInput)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 1, b.sleeps)
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceSleeping, row.Phase)
	assert.Equal(t, instance.ActionInstanceSleep, lastEvent(t, s).Action)
}

func TestWakeRecordsReadyInstance(t *testing.T) {
	b := &sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}}
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	require.NoError(t, env.GetWorkflowError())
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceReady, row.Phase)
	assert.Equal(t, instance.ActionInstanceWake, lastEvent(t, s).Action)
}

// A wake that cannot bring the instance back within its resume timeout breaks it.
func TestWakePastResumeTimeoutBreaksTheInstance(t *testing.T) {
	b := &sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}, ResumeErr: errors.New("port taken")}
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, instance.ErrWakeFailed, ae.Type())
	assert.Greater(t, b.resumes, 1, "retried within the resume timeout")
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceUnhealthy, row.Phase)
	assert.Equal(t, instance.ActionInstanceWakeFailed, lastEvent(t, s).Action)
}

// A backend without the capability: refused, nothing recorded, nothing broken.
func TestSleepUnsupportedChangesNothing(t *testing.T) {
	env, s := sleepEnv(t, &workflowtest.Backend{Created: map[string]bool{"i1": true}})
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &ae)
	assert.Equal(t, instance.ErrCannotSleep, ae.Type())
	_, err := s.GetInstance(context.Background(), "i1")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// certSleepyBackend can sleep and knows its certificates (a backends.CertManager): Expiry is
// what it reports until a rotation, which gives the leaves a year from the CA.
type certSleepyBackend struct {
	sleepyBackend
	Expiry    backends.CertificateExpiry
	rotations int
}

func (b *certSleepyBackend) CertificateExpiry(context.Context, string) (backends.CertificateExpiry, error) {
	return b.Expiry, nil
}
func (b *certSleepyBackend) CertificatesExpireAt(ctx context.Context, id string) (time.Time, error) {
	return b.Expiry.Earliest(), nil
}
func (b *certSleepyBackend) RotateCertificates(context.Context, string) error {
	b.rotations++
	b.Expiry.Serving = time.Now().Add(365 * 24 * time.Hour)
	b.Expiry.Client = b.Expiry.Serving
	return nil
}

func expiredInSleep(caValid time.Duration) *certSleepyBackend {
	past := time.Now().Add(-time.Hour)
	return &certSleepyBackend{sleepyBackend: sleepyBackend{Backend: &workflowtest.Backend{Created: map[string]bool{"i1": true}}},
		Expiry: backends.CertificateExpiry{CA: time.Now().Add(caValid), Serving: past, Client: past}}
}

// A member whose certificates expired in its sleep gets new ones before the wake hands it back
// (cause wake); one whose certificates are valid for longer than the minimum is not touched.
func TestWakeReissuesExpiredCertificates(t *testing.T) {
	b := expiredInSleep(10 * 365 * 24 * time.Hour)
	env, s := sleepEnv(t, b)
	in := sleepInput
	in.CertificatesMinRemaining = time.Hour
	env.ExecuteWorkflow(instance.WakeWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 1, b.rotations)
	events, err := s.ListEvents(context.Background(), store.EventFilter{Action: instance.ActionCertificatesReissued})
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Contains(t, string(events[0].Detail), `"cause":"wake"`)
	assert.Equal(t, instance.ActionInstanceWake, lastEvent(t, s).Action)

	env, _ = sleepEnv(t, b) // valid for a year now
	env.ExecuteWorkflow(instance.WakeWorkflowName, in)
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 1, b.rotations, "valid certificates are not re-issued")
}

// Certificates that expired in the sleep and cannot be re-issued (the CA itself expired): the
// wake fails, naming them, and the instance is broken.
func TestWakeWithExpiredCertificatesThatCannotBeReissuedFails(t *testing.T) {
	b := expiredInSleep(-time.Minute)
	env, s := sleepEnv(t, b)
	env.ExecuteWorkflow(instance.WakeWorkflowName, sleepInput)
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, instance.ErrWakeFailed, ae.Type())
	assert.True(t, instance.CertificatesExpiredInSleep(err))
	assert.Contains(t, err.Error(), "cannot re-issue them in place")
	assert.Zero(t, b.rotations)
	row, err := s.GetInstance(context.Background(), "i1")
	require.NoError(t, err)
	assert.Equal(t, api.InstanceUnhealthy, row.Phase)
	assert.Equal(t, instance.ActionInstanceWakeFailed, lastEvent(t, s).Action)
	assert.False(t, instance.CertificatesExpiredInSleep(errors.New("port taken")))
}

func TestWakeCertificatesDecision(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := now.Add(10 * 365 * 24 * time.Hour)
	state := func(leaves time.Time, ca time.Time, can bool) instance.CertificateState {
		return instance.CertificateState{Expiry: backends.CertificateExpiry{CA: ca, Serving: leaves, Client: leaves.Add(time.Hour)}, CanReissue: can}
	}
	for _, c := range []struct {
		name string
		st   instance.CertificateState
		want instance.WakeCertificateAction
	}{
		{"unknown expiry", instance.CertificateState{}, instance.WakeCertificatesKeep},
		{"valid past the minimum", state(now.Add(48*time.Hour), ca, true), instance.WakeCertificatesKeep},
		{"within the minimum", state(now.Add(time.Hour), ca, true), instance.WakeCertificatesReissue},
		{"expired", state(now.Add(-time.Hour), ca, true), instance.WakeCertificatesReissue},
		{"expired, cannot re-issue", state(now.Add(-time.Hour), ca, false), instance.WakeCertificatesExpired},
		{"expired with its CA", state(now.Add(-time.Hour), now.Add(-time.Minute), true), instance.WakeCertificatesExpired},
		{"within the minimum, cannot re-issue: the holder is warned, not broken", state(now.Add(time.Hour), ca, false), instance.WakeCertificatesKeep},
	} {
		assert.Equal(t, c.want, instance.WakeCertificates(c.st, now, 24*time.Hour), c.name)
	}
}
