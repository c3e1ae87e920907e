package testsuite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/activities"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/worker"
	"go.uber.org/zap"
)

// Temporal is a real embedded Temporal server (in memory) and a client connected to it.
type Temporal struct {
	Address string
	Client  client.Client
	server  *devserver.Temporal
}

// StartTemporal starts an embedded Temporal server for the test, with namespace "default",
// and stops it when the test ends.
func StartTemporal(t testing.TB) *Temporal {
	t.Helper()
	srv, err := devserver.StartTemporal(devserver.TemporalOptions{})
	if err != nil {
		t.Fatalf("start embedded temporal: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.FrontendAddress(), Namespace: "default"})
	if err != nil {
		t.Fatalf("dial embedded temporal: %v", err)
	}
	t.Cleanup(c.Close)
	return &Temporal{Address: srv.FrontendAddress(), Client: c, server: srv}
}

// NewStore opens a fresh store for the test: "sqlite" (a file in a temp dir) or "postgres"
// (a new database on the test server, see PostgresDSN).
func NewStore(t testing.TB, driver string) store.Store {
	t.Helper()
	var dsn string
	switch driver {
	case "sqlite":
		dsn = "sqlite://" + filepath.Join(t.TempDir(), "kobe.db")
	case "postgres":
		dsn = PostgresDSN(t)
	default:
		t.Fatalf("unknown store driver %q", driver)
	}
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s store: %v", driver, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// StartWorker runs kobe's real worker (every workflow and activity) on taskQueue until the test ends.
func StartWorker(t testing.TB, c client.Client, taskQueue string, s store.Store) *activities.Activities {
	t.Helper()
	acts := activities.New(s, zap.NewNop())
	w := worker.New(c, taskQueue, acts)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return acts
}
