// Package activities holds every Temporal activity of kobe: the only place where workflows
// touch the outside world (the store, backends, Kubernetes).
package activities

import (
	"os"

	"go.uber.org/zap"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// Activities carries the dependencies activities need. One value is registered per worker;
// its exported methods are the activities.
type Activities struct {
	Store  store.Store
	Logger *zap.Logger
	// Host names the worker's machine; it is reported by diagnostics and, for host-local
	// backends, decides which task queue an instance's activities run on.
	Host string
}

// New returns Activities with Host defaulted to the machine's hostname.
func New(s store.Store, logger *zap.Logger) *Activities {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return &Activities{Store: s, Logger: logger, Host: host}
}
