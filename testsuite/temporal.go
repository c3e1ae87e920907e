package testsuite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/kunobi-ninja/kobe/backends/capi"  // the backends a kobe binary has
	_ "github.com/kunobi-ninja/kobe/backends/local" // (as cmd/kobe)
	_ "github.com/kunobi-ninja/kobe/backends/vcluster"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/logging"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/worker"
	"go.temporal.io/sdk/client"
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
	// Warnings and errors only: the SDK's debug lines would bury the test's own output.
	quiet := zap.NewExample(zap.IncreaseLevel(zap.WarnLevel))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.FrontendAddress(), Namespace: "default",
		Logger: logging.NewSDKLogger(quiet)})
	if err != nil {
		t.Fatalf("dial embedded temporal: %v", err)
	}
	t.Cleanup(c.Close)
	if err := server.EnsureSearchAttributes(ctx, c, "default"); err != nil {
		t.Fatalf("search attributes: %v", err)
	}
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
func StartWorker(t testing.TB, c client.Client, taskQueue string, s store.Store) *worker.Activities {
	t.Helper()
	acts := worker.NewActivities(s, zap.NewNop())
	w := worker.New(c, taskQueue, acts)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return acts
}

// StartHostWorker runs kobe's workers as `kobe worker` does: every backend compiled in (the
// local backend keeps its instances under stateDir), a worker on the shared queue and one on
// this host's own queue. It returns the activities (with HostID and HostQueue set).
func StartHostWorker(t testing.TB, c client.Client, sharedQueue string, s store.Store, stateDir string) *worker.Activities {
	t.Helper()
	h, err := worker.StartHost(worker.HostConfig{Client: c, Store: s, SharedQueue: sharedQueue, StateDir: stateDir, Secrets: secretbox.Random()})
	if err != nil {
		t.Fatal(err)
	}
	// The workers stop first, then whatever the test's pools still hold is deleted, not left
	// running on the machine.
	t.Cleanup(func() {
		if err := h.DeleteInstances(); err != nil {
			t.Logf("deleting the host's instances: %v", err)
		}
	})
	t.Cleanup(h.Stop)
	return h.Activities
}
