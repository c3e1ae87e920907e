package worker

import (
	"os"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/doctor"
	"github.com/kunobi-ninja/kobe/instance"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"
)

// Activities carries what the activities of every domain need on one worker: each domain
// package (instance, pool, lease, doctor) has its own Activities type, built from these fields
// when the worker registers them. Fields set after New and before the worker starts count;
// Backends is shared, so a backend added to it later is seen by every domain.
type Activities struct {
	Store  store.Store
	Logger *zap.Logger
	// Host is the machine's name, reported by diagnostics.
	Host string
	// HostID identifies this kobe host (stable across restarts, see HostID); HostQueue is its
	// own task queue, where activities on its host-bound instances run. SharedQueue is the
	// queue all workers poll.
	HostID      string
	HostQueue   string
	SharedQueue string
	// HostClusterQueue is the queue of this host's named host cluster (--host-cluster-name), "" if unnamed.
	HostClusterQueue string
	// Backends this worker runs, by name.
	Backends map[string]backends.RuntimeBackend
	// Secrets seals kubeconfigs before they are stored.
	Secrets *secretbox.Box
	// Temporal is the client the pools' schedules are made with, and their sleeps sent through.
	Temporal client.Client
}

// NewActivities returns Activities with Host defaulted to the machine's hostname.
func NewActivities(s store.Store, logger *zap.Logger) *Activities {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return &Activities{Store: s, Logger: logger, Host: host, HostID: host, Backends: map[string]backends.RuntimeBackend{}}
}

// Instance returns the instance domain's activities on these dependencies.
func (a *Activities) Instance() *instance.Activities {
	return &instance.Activities{Store: a.Store, Logger: a.Logger, Host: a.Host, HostID: a.HostID,
		HostQueue: a.HostQueue, SharedQueue: a.SharedQueue, HostClusterQueue: a.HostClusterQueue, Backends: a.Backends, Secrets: a.Secrets}
}

// Pool returns the pool domain's activities.
func (a *Activities) Pool() *pool.Activities {
	return &pool.Activities{Store: a.Store, Temporal: a.Temporal}
}

// Lease returns the lease domain's activities.
func (a *Activities) Lease() *lease.Activities {
	return &lease.Activities{Store: a.Store, Logger: a.Logger, Secrets: a.Secrets, Host: a.Host, Backends: a.Backends,
		Temporal: a.Temporal}
}

// Doctor returns the diagnostic activities.
func (a *Activities) Doctor() *doctor.Activities {
	return &doctor.Activities{Store: a.Store, Host: a.Host}
}

// RegisterActivities adds every domain's activities to w. Each domain's methods keep the names they
// were registered under before the domains had packages of their own, so recorded histories
// and activities in flight keep their types.
func (a *Activities) RegisterActivities(w sdkworker.ActivityRegistry) {
	w.RegisterActivity(a.Instance())
	w.RegisterActivity(a.Pool())
	w.RegisterActivity(a.Lease())
	w.RegisterActivity(a.Doctor())
}
