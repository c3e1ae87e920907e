// Package workflowtest holds what the workflow unit tests of several domain packages (doctor,
// instance, lease, pool) share: the SDK's test environment with kobe's limits (NewEnvironment),
// a scripted backend and an in-memory store. The workflows' decision logic is
// tested with them; the real backends are proven by the conformance suite and the e2e tests.
package workflowtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Backend is a scripted backend: Create records the instance, WaitReady answers ReadyErr (or
// Ready), Delete answers DeleteErr (or forgets the instance) and counts the calls.
type Backend struct {
	Mu        sync.Mutex
	ReadyErr  error
	Created   map[string]bool
	Deletes   int
	DeleteErr error
}

func (f *Backend) Name() string                                            { return "fake" }
func (f *Backend) Validate(backends.InstanceSpec) error                    { return nil }
func (f *Backend) HostID() string                                          { return "h1" }
func (f *Backend) RevokeCredentials(context.Context, string, string) error { return nil }
func (f *Backend) Credentials(context.Context, string, backends.CredentialRequest) (backends.Credential, error) {
	return backends.Credential{}, nil
}
func (f *Backend) Create(_ context.Context, s backends.InstanceSpec) (backends.InstanceStatus, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Created[s.ID] = true
	return backends.InstanceStatus{ID: s.ID, Phase: backends.PhaseCreating}, nil
}
func (f *Backend) Status(_ context.Context, id string) (backends.InstanceStatus, error) {
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady}, nil
}
func (f *Backend) WaitReady(_ context.Context, id string, _ func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	if f.ReadyErr != nil {
		return backends.InstanceStatus{ID: id, Phase: backends.PhaseFailed}, f.ReadyErr
	}
	return backends.InstanceStatus{ID: id, Phase: backends.PhaseReady, Endpoint: "https://fake"}, nil
}
func (f *Backend) Delete(_ context.Context, id string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Deletes++
	if f.DeleteErr != nil {
		return f.DeleteErr
	}
	delete(f.Created, id)
	return nil
}

// MemoryStore opens an in-memory SQLite store, closed when the test ends.
func MemoryStore(t testing.TB) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite://:memory:")
	if err != nil {
		t.Fatalf("opening an in-memory store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The SDK's test environment holds a workflow to two wall-clock limits: a workflow task that runs
// over 1 s without yielding is failed as a deadlock, and a wait of over 3 s for an activity's
// result panics as a stuck test. kobe's workflow tests run their activities on real stores,
// under -race, on shared 2-core machines beside other builds; there, now and then, a task or an
// activity takes longer (the cold CI run of 7 December 2026, at a load average of 40:
// TestLeaseSleepsAfterInactivity, "workflow goroutine "root" didn't yield for over 1s"). These
// tests are about what a workflow decides, not how fast the machine is, so both limits are
// raised; a workflow that really never yields still fails, at the limit.
const (
	// DeadlockTimeout is how long a workflow task may run without yielding.
	DeadlockTimeout = time.Minute
	// TestTimeout is how long the environment waits for an activity or a callback.
	TestTimeout = 2 * time.Minute
)

// NewEnvironment is suite.NewTestWorkflowEnvironment with the limits above.
func NewEnvironment(suite *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: DeadlockTimeout})
	env.SetTestTimeout(TestTimeout)
	return env
}
