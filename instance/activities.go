package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/leasecred"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// HostAssignment says which kobe host an instance lives on and where its activities run.
type HostAssignment struct {
	HostID    string `json:"hostId"`
	TaskQueue string `json:"taskQueue"`
}

// BackendRequest names an instance and its backend.
type BackendRequest struct {
	Backend string                `json:"backend"`
	Spec    backends.InstanceSpec `json:"spec"`
}

// Record is what a workflow asks to write into the store.
type Record struct {
	ID       string            `json:"id"`
	Pool     string            `json:"pool"`
	Backend  string            `json:"backend"`
	Host     string            `json:"host"`
	Phase    api.InstancePhase `json:"phase"`
	Endpoint string            `json:"endpoint,omitempty"`
	Message  string            `json:"message,omitempty"`
	// Action is the audit action of the change ("": instance.<phase>).
	Action string `json:"action,omitempty"`
}

// ErrBackendUnavailable is the non-retryable error type of a backend this worker does not run.
const ErrBackendUnavailable = "BackendUnavailable"

// Activities are the instance domain's activities: calls to the backends and the instances'
// store rows. One value is registered per worker; its exported methods are the activities.
type Activities struct {
	Store  store.Store
	Logger *zap.Logger
	// Host is the machine's name, in errors.
	Host string
	// HostID identifies this kobe host; HostQueue is its own task queue (host-bound
	// instances' activities run there); SharedQueue is the queue all workers poll.
	HostID      string
	HostQueue   string
	SharedQueue string
	// HostClusterQueue is the queue of the host cluster this worker's k3s, k0s and vcluster
	// backends run in, when it was named (--host-cluster-name): HostQueue(SharedQueue,
	// HostClusterID(name)). "" for an unnamed host cluster.
	HostClusterQueue string
	// Backends this worker runs, by name.
	Backends map[string]backends.RuntimeBackend
	// Secrets seals the prepared lease credentials of Ready instances; nil: this worker prepares none.
	Secrets *secretbox.Box
}

func (a *Activities) backend(name string) (backends.RuntimeBackend, error) {
	return Backend(a.Backends, a.Host, name)
}

// Backend finds a backend among those a worker on host runs; a backend it does not run is a
// non-retryable ErrBackendUnavailable (retrying on the same worker cannot help).
func Backend(running map[string]backends.RuntimeBackend, host, name string) (backends.RuntimeBackend, error) {
	if b, ok := running[name]; ok {
		return b, nil
	}
	if _, err := backends.Resolve(name); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBackendUnavailable, nil)
	}
	return nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("backend %q is not available on worker %s", name, host), ErrBackendUnavailable, nil)
}

// HostQueue is the task queue of one host's activities: a host-bound instance's activities
// run there, on the workers of the host that holds it.
func HostQueue(sharedQueue, hostID string) string { return sharedQueue + "-host-" + hostID }

// HostClusterID is the host id of the instances of a named host cluster (spec.backend.hostCluster):
// they live in that cluster, not on a worker's machine, and any worker of that cluster serves
// them on the queue HostQueue(shared, HostClusterID(name)).
func HostClusterID(name string) string { return HostClusterPrefix + name }

// HostClusterPrefix starts the host id of a named host cluster (worker host ids never do: they
// are a machine name and a random suffix, see worker.HostID).
const HostClusterPrefix = "hostcluster-"

// SelectHost runs on the shared task queue: whichever worker takes it offers its own host queue,
// so instances spread over the workers that run the backend. Host-independent backends stay
// on the shared queue. Run on a host cluster's queue (a pool that names its host cluster), it
// places the instance in that host cluster: every later activity goes to that queue.
func (a *Activities) SelectHost(ctx context.Context, backendName string) (HostAssignment, error) {
	b, err := a.backend(backendName)
	if err != nil {
		return HostAssignment{}, err
	}
	if q := activity.GetInfo(ctx).TaskQueue; a.HostClusterQueue != "" && q == a.HostClusterQueue {
		return HostAssignment{HostID: strings.TrimPrefix(q, a.SharedQueue+"-host-"), TaskQueue: q}, nil
	}
	if _, ok := b.(backends.HostBound); ok {
		return HostAssignment{HostID: a.HostID, TaskQueue: a.HostQueue}, nil
	}
	return HostAssignment{HostID: a.HostID, TaskQueue: a.SharedQueue}, nil
}

// BackendCreate asks the backend to create the instance (idempotent by id).
func (a *Activities) BackendCreate(ctx context.Context, req BackendRequest) (backends.InstanceStatus, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	if err := b.Validate(req.Spec); err != nil {
		return backends.InstanceStatus{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
	}
	defer keepHeartbeating(ctx, "creating")()
	st, err := b.Create(ctx, req.Spec)
	if backends.IsInvalidSpec(err) {
		// Judged against the backend's environment (e.g. a ClusterClass that does not exist):
		// the same spec fails the same way on every retry.
		return st, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidSpec", nil)
	}
	return st, err
}

// keepHeartbeating records a heartbeat now and every 2 s until the returned function is called
// (even while the backend reports no progress). With a heartbeat timeout on the activity, a
// worker killed in the middle of a long backend call is noticed within that timeout rather than
// at the end of the start-to-close timeout, and the call is retried on the host's next worker
// (the backend calls are idempotent by instance id).
func keepHeartbeating(ctx context.Context, details string) (stop func()) {
	activity.RecordHeartbeat(ctx, details)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// BackendWaitReady waits for the instance, heartbeating its progress so that a dead worker is
// noticed within the heartbeat timeout and the wait resumes on the host's next worker.
func (a *Activities) BackendWaitReady(ctx context.Context, req BackendRequest) (backends.InstanceStatus, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return backends.InstanceStatus{}, err
	}
	defer keepHeartbeating(ctx, "waiting")()
	st, err := b.WaitReady(ctx, req.Spec.ID, nil)
	if errors.Is(err, backends.ErrNotFound) {
		return st, temporal.NewNonRetryableApplicationError(err.Error(), "InstanceNotFound", err)
	}
	if err != nil && (st.Phase == backends.PhaseFailed || st.Phase == backends.PhaseUnhealthy) {
		// The instance will not recover by waiting longer: let the workflow clean up.
		return st, temporal.NewNonRetryableApplicationError(err.Error(), "InstanceFailed", err)
	}
	if err == nil && st.Phase == backends.PhaseReady {
		a.recordCreatedCertificates(ctx, b, req.Spec)
	}
	return st, err
}

// BackendDelete deletes the instance and verifies it is gone (idempotent).
func (a *Activities) BackendDelete(ctx context.Context, req BackendRequest) error {
	b, err := a.backend(req.Backend)
	if err != nil {
		return err
	}
	defer keepHeartbeating(ctx, "deleting")()
	return b.Delete(ctx, req.Spec.ID)
}

// ErrCannotFreeze is the non-retryable error type of BackendFreeze and BackendThaw when the
// backend has no Freezer capability, or its host cannot freeze (backends.ErrUnavailableHere).
const ErrCannotFreeze = "CannotFreeze"

// BackendFreeze stops a Ready instance's processes in place (backends.Freezer): a spare member
// then uses no CPU until BackendThaw. Freezing a frozen instance succeeds.
func (a *Activities) BackendFreeze(ctx context.Context, req BackendRequest) error {
	f, err := a.freezer(req.Backend)
	if err != nil {
		return err
	}
	return freezerError(f.Freeze(ctx, req.Spec.ID))
}

// BackendThaw resumes a frozen instance's processes (backends.Freezer); it answers again at once.
// Thawing an instance that is not frozen succeeds.
func (a *Activities) BackendThaw(ctx context.Context, req BackendRequest) error {
	f, err := a.freezer(req.Backend)
	if err != nil {
		return err
	}
	return freezerError(f.Thaw(ctx, req.Spec.ID))
}

func (a *Activities) freezer(name string) (backends.Freezer, error) {
	b, err := a.backend(name)
	if err != nil {
		return nil, err
	}
	f, ok := b.(backends.Freezer)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("backend %q cannot freeze instances", name), ErrCannotFreeze, nil)
	}
	return f, nil
}

// freezerError makes the errors that a retry cannot cure non-retryable.
func freezerError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backends.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), "InstanceNotFound", err)
	case errors.Is(err, backends.ErrUnavailableHere):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrCannotFreeze, err)
	}
	return err
}

// BackendSleep stops the instance's compute and keeps its state (backends.Sleeper); sleeping a
// sleeping instance succeeds. A backend without the capability, or an instance whose state would
// not survive (backends.ErrSleepRefused), is a non-retryable ErrCannotSleep.
func (a *Activities) BackendSleep(ctx context.Context, req BackendRequest) error {
	s, err := a.sleeper(req.Backend)
	if err != nil {
		return err
	}
	defer keepHeartbeating(ctx, "sleeping")()
	err = s.Sleep(ctx, req.Spec.ID)
	if errors.Is(err, backends.ErrSleepRefused) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrCannotSleep, err)
	}
	return freezerError(err)
}

// BackendResume starts a sleeping instance again (backends.Sleeper); the caller waits for it
// with BackendWaitReady. Resuming an awake instance succeeds.
func (a *Activities) BackendResume(ctx context.Context, req BackendRequest) error {
	s, err := a.sleeper(req.Backend)
	if err != nil {
		return err
	}
	defer keepHeartbeating(ctx, "resuming")()
	return freezerError(s.Resume(ctx, req.Spec.ID))
}

func (a *Activities) sleeper(name string) (backends.Sleeper, error) {
	b, err := a.backend(name)
	if err != nil {
		return nil, err
	}
	s, ok := b.(backends.Sleeper)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("backend %q cannot put instances to sleep", name), ErrCannotSleep, nil)
	}
	return s, nil
}

// RecordInstance upserts the instance's row and appends an audit event for the transition, in
// one transaction: a row is never changed without its event.
func (a *Activities) RecordInstance(ctx context.Context, r Record) error {
	data, _ := json.Marshal(map[string]string{"message": r.Message})
	return a.Store.InTx(ctx, func(tx store.Store) error {
		if err := tx.UpsertInstance(ctx, store.Instance{
			ID: r.ID, Pool: r.Pool, Backend: r.Backend, Host: r.Host, Phase: r.Phase, Endpoint: r.Endpoint, Data: data,
		}); err != nil {
			return err
		}
		action := r.Action
		if action == "" {
			action = "instance." + string(r.Phase)
		}
		_, err := tx.AppendEvent(ctx, store.Event{Actor: "kobe", Action: action, Target: r.ID, Pool: r.Pool,
			Result: "ok", Detail: data})
		return err
	})
}

// ForgetInstance removes the row of an instance that was deleted and verified gone, and records
// it, in one transaction (a retry after a success finds no row and writes no second event).
func (a *Activities) ForgetInstance(ctx context.Context, id string) error {
	return a.Store.InTx(ctx, func(tx store.Store) error {
		err := tx.DeleteInstance(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = tx.AppendEvent(ctx, store.Event{Actor: "kobe", Action: "instance.deleted", Target: id, Result: "ok"})
		return err
	})
}

// PrepareLeaseCredentials readies the credential of a Ready instance's future lease (see
// backends.LeasePreparer) and stores it sealed, so that binding the lease mints its
// kubeconfig without calling the instance. It answers false, doing nothing, when the backend
// cannot prepare or this worker has no secret key: the lease then gets its credential from the
// backend when it binds, as before.
func (a *Activities) PrepareLeaseCredentials(ctx context.Context, req BackendRequest) (bool, error) {
	b, err := a.backend(req.Backend)
	if err != nil {
		return false, err
	}
	p, ok := b.(backends.LeasePreparer)
	if !ok || a.Secrets == nil {
		return false, nil
	}
	prepared, err := p.PrepareLeaseCredentials(ctx, req.Spec.ID)
	if err != nil {
		return false, err
	}
	sealed, err := leasecred.SealPrepared(a.Secrets, req.Spec.ID, prepared)
	if err != nil {
		return false, err
	}
	return true, a.Store.PutPreparedCredential(ctx, req.Spec.ID, sealed)
}
