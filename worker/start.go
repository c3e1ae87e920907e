package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
)

// HostConfig is what the workers of one kobe host need.
type HostConfig struct {
	Client client.Client
	Store  store.Store
	Logger *zap.Logger
	// SharedQueue is the task queue every worker polls (workflows, host-independent activities).
	SharedQueue string
	// StateDir keeps the host's identity (host-id) and its host-local backends' instances.
	StateDir string
	// Secrets seals lease kubeconfigs; nil: this host cannot hand out lease credentials.
	Secrets *secretbox.Box
	// HostKubeconfig is the host cluster of the k3s, k0s and vcluster backends (--host-kubeconfig).
	HostKubeconfig string
	// HostClusterName names that host cluster (--host-cluster-name): the host also polls its
	// queue, where the members of pools naming it are placed. "": unnamed.
	HostClusterName string
	// Schedules makes sure the schedules of kobe's periodic workflows exist, and triggers one
	// run of each once the workers run: the certificate sweep and the orphan reaper (kobe dev
	// and kobe worker; tests start them themselves).
	Schedules bool
	// OrphanGrace is the orphan reaper's grace (--orphan-grace), set on its schedule.
	OrphanGrace time.Duration
}

// Host is a started kobe host: every backend compiled in, built for this host, and two
// workers, one on the shared task queue and one on this host's own queue (activities on the
// instances that live here). `kobe dev`, `kobe worker` and the test harness all start it here.
type Host struct {
	Activities *Activities
	workers    []sdkworker.Worker
	logger     *zap.Logger
}

// memberDown tells a member's pool that its backend saw it stop serving on its own, so that no
// warm bind hands it out while the next health check is still to come. Best effort: if the
// signal does not reach the pool, that health check finds the member.
func (h *Host) memberDown(id, message string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		inst, err := h.Activities.Store.GetInstance(ctx, id)
		if err != nil || inst.Pool == "" {
			h.logger.Warn("an instance stopped serving; its pool is not known", zap.String("instance", id),
				zap.String("message", message), zap.Error(err))
			return
		}
		err = h.Activities.Temporal.SignalWorkflow(ctx, pool.WorkflowID(inst.Pool), "", pool.SignalMemberDown,
			pool.MemberDown{InstanceID: id, Message: message, At: time.Now().UTC()})
		if err != nil {
			h.logger.Warn("an instance stopped serving; its pool was not told", zap.String("instance", id),
				zap.String("pool", inst.Pool), zap.String("message", message), zap.Error(err))
			return
		}
		h.logger.Info("an instance stopped serving; its pool was told", zap.String("instance", id),
			zap.String("pool", inst.Pool), zap.String("message", message))
	}()
}

// StartHost builds the host's backends and starts its workers. On error nothing is left running.
func StartHost(cfg HostConfig) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	hostID, err := HostID(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %v", cfg.StateDir, err)
	}
	acts := NewActivities(cfg.Store, cfg.Logger)
	acts.HostID, acts.SharedQueue, acts.HostQueue = hostID, cfg.SharedQueue, instance.HostQueue(cfg.SharedQueue, hostID)
	acts.Secrets, acts.Temporal = cfg.Secrets, cfg.Client
	queues := []string{cfg.SharedQueue, acts.HostQueue}
	if cfg.HostClusterName != "" {
		acts.HostClusterQueue = instance.HostQueue(cfg.SharedQueue, instance.HostClusterID(cfg.HostClusterName))
		queues = append(queues, acts.HostClusterQueue)
	}
	for _, name := range backends.Names() {
		f, _ := backends.Lookup(name)
		b, err := f.New(backends.Environment{StateDir: cfg.StateDir, HostID: hostID, HostKubeconfig: cfg.HostKubeconfig})
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", name, err)
		}
		acts.Backends[name] = b
	}
	h := &Host{Activities: acts, logger: cfg.Logger}
	for _, b := range acts.Backends {
		if n, ok := b.(backends.DownNotifier); ok {
			n.NotifyDown(h.memberDown)
		}
	}
	for _, queue := range queues {
		w := New(cfg.Client, queue, acts)
		if err := w.Start(); err != nil {
			h.Stop()
			return nil, fmt.Errorf("starting the worker on task queue %s: %w", queue, err)
		}
		h.workers = append(h.workers, w)
	}
	if cfg.Schedules {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pool.EnsureCertificateSchedule(ctx, cfg.Client, cfg.SharedQueue); err != nil {
			// Not fatal: the schedule is made by the next worker that starts, and the pools
			// keep serving; their certificates are checked late.
			cfg.Logger.Warn("the certificate schedule is not set up", zap.Error(err))
		}
		if err := lease.EnsureOrphanSchedule(ctx, cfg.Client, cfg.SharedQueue, cfg.OrphanGrace); err != nil {
			// Not fatal either: leases are served; orphans wait for the next worker's start
			// (or the schedule made earlier) to be reaped.
			cfg.Logger.Warn("the orphan reaper's schedule is not set up", zap.Error(err))
		}
	}
	return h, nil
}

// Stop stops the workers (each waits up to StopTimeout for its tasks); the instances stay.
func (h *Host) Stop() {
	for _, b := range h.Activities.Backends {
		if n, ok := b.(backends.DownNotifier); ok {
			n.NotifyDown(nil)
		}
	}
	for i := len(h.workers) - 1; i >= 0; i-- {
		h.workers[i].Stop()
	}
	h.workers = nil
}

// DeleteInstances deletes every instance of the backends that can list theirs (the local
// backend), after refusing new creates and waiting for those in flight, so that nothing of an
// ephemeral run or a test outlives it. Call it after Stop.
func (h *Host) DeleteInstances() error {
	var errs []error
	for name, b := range h.Activities.Backends {
		if s, ok := b.(interface{ StopCreating() }); ok {
			s.StopCreating() // a Create in flight finishes recording its instance first
		}
		lister, ok := b.(interface{ InstanceIDs() []string })
		if !ok {
			continue
		}
		for _, id := range lister.InstanceIDs() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := b.Delete(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("%s instance %s: %w", name, id, err))
			}
			cancel()
		}
	}
	return errors.Join(errs...)
}
