// Package workflowtest holds what the workflow unit tests of several domain packages (instance,
// lease) share: a scripted backend and an in-memory store. The workflows' decision logic is
// tested with them; the real backends are proven by the conformance suite and the e2e tests.
package workflowtest

import (
	"context"
	"sync"
	"testing"

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
