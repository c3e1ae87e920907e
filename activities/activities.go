// Package activities holds every Temporal activity of kobe: the only place where workflows
// touch the outside world (the store, backends, Kubernetes).
package activities

import (
	"os"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
)

// Activities carries the dependencies activities need. One value is registered per worker;
// its exported methods are the activities.
type Activities struct {
	Store  store.Store
	Logger *zap.Logger
	// Host is the machine's name, reported by diagnostics.
	Host string
	// HostID identifies this kobe host (stable across restarts, see worker.HostID); HostQueue
	// is its own task queue, where activities on its host-bound instances run. SharedQueue is
	// the queue all workers poll.
	HostID      string
	HostQueue   string
	SharedQueue string
	// Backends this worker runs, by name.
	Backends map[string]backends.RuntimeBackend
	// Secrets seals kubeconfigs before they are stored.
	Secrets *secretbox.Box
}

// New returns Activities with Host defaulted to the machine's hostname.
func New(s store.Store, logger *zap.Logger) *Activities {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return &Activities{Store: s, Logger: logger, Host: host, HostID: host, Backends: map[string]backends.RuntimeBackend{}}
}
