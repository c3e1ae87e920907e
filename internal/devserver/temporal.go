// Package devserver runs a real Temporal server and its Web UI inside the kobe process, for
// `kobe dev` and for integration tests. It uses only the server's public packages.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kunobi-ninja/kobe/internal/loopback"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TemporalOptions configures the embedded server.
type TemporalOptions struct {
	// DatabaseFile is the SQLite file; empty means in memory (nothing written).
	DatabaseFile string
	// IP to bind; defaults to 127.0.0.1.
	IP string
	// FrontendPort is the gRPC port clients use; 0 picks a free one.
	FrontendPort int
	// Namespaces are registered before the server starts; "default" when empty.
	Namespaces []string
	// SearchAttributes are custom search attributes registered in every namespace.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's logs; nil discards them.
	Logger *zap.Logger
	// DynamicConfigOverrides replace kobe's settings (dynamicConfig) key by key: tests start a
	// Temporal configured as a production one may be (a setting at Temporal's default, or off)
	// to check that kobe doctor names it.
	DynamicConfigOverrides dynamicconfig.StaticClient
}

// Temporal is a running embedded Temporal server.
type Temporal struct {
	server       temporal.Server
	frontendAddr string
	namespaces   []string
	// stopping is set when Stop begins; the server's own shutdown chatter is then logged at debug.
	stopping *atomic.Bool
}

const clusterName = "active"

// StartTemporal creates the schema if the database is new, registers the namespaces and starts
// all four services (frontend, history, matching, worker) with static membership.
//
// Static membership matters: with the default ringpop membership, a server restarted quickly on
// the same SQLite file waits ~60 s for stale membership rows to expire before it serves workflows.
func StartTemporal(opts TemporalOptions) (*Temporal, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if len(opts.Namespaces) == 0 {
		opts.Namespaces = []string{"default"}
	}
	stopping := new(atomic.Bool)
	var logger log.Logger = log.NewNoopLogger()
	if opts.Logger != nil {
		logger = log.NewZapLogger(opts.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return &shutdownCore{Core: c, stopping: stopping}
		})))
	}
	starting := new(atomic.Bool)
	starting.Store(true)
	defer starting.Store(false)
	logger = startupLogger{Logger: logger, starting: starting}

	frontendPort := opts.FrontendPort
	if frontendPort == 0 {
		p, err := FreePort(opts.IP)
		if err != nil {
			return nil, err
		}
		frontendPort = p
	}
	if err := CheckPortFree(opts.IP, frontendPort); err != nil {
		return nil, fmt.Errorf("temporal port: %w", err)
	}
	// history, matching, worker and the frontend's HTTP API, all picked fresh each start: with
	// static membership nothing remembers the previous addresses.
	ports, err := servicePorts(opts.IP, 4)
	if err != nil {
		return nil, err
	}
	svcPorts := map[primitives.ServiceName]int{
		primitives.FrontendService: frontendPort,
		primitives.HistoryService:  ports[0],
		primitives.MatchingService: ports[1],
		primitives.WorkerService:   ports[2],
	}
	// The frontend's HTTP API (and Nexus) needs a port of its own; without one the server warns at every start.
	httpPort := ports[3]

	sqlCfg := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{},
	}
	if opts.DatabaseFile == "" {
		// The plugin keeps one shared connection per DSN for the whole process, so an in-memory
		// database lives as long as the process; the name keeps two embedded servers apart.
		sqlCfg.DatabaseName = fmt.Sprintf("kobe-temporal-%d-%d", os.Getpid(), time.Now().UnixNano())
		sqlCfg.ConnectAttributes["mode"] = "memory"
		sqlCfg.ConnectAttributes["cache"] = "shared"
	} else {
		if err := os.MkdirAll(filepath.Dir(opts.DatabaseFile), 0o700); err != nil {
			return nil, err
		}
		sqlCfg.DatabaseName = opts.DatabaseFile
		sqlCfg.ConnectAttributes["mode"] = "rwc"
		// No leading underscore: the plugin turns unknown keys into pragmas itself.
		sqlCfg.ConnectAttributes["journal_mode"] = "wal"
		sqlCfg.ConnectAttributes["synchronous"] = "1" // NORMAL: durable at checkpoints, fast commits
		sqlCfg.ConnectAttributes["busy_timeout"] = "10000"
		// One connection: every statement of history, matching and visibility queues in Go's
		// pool instead of racing in SQLite. With several, Temporal's plugin begins each
		// transaction deferred (as a reader; `_txlock=immediate` cannot be passed, the plugin
		// turns unknown attributes into PRAGMAs), and a reader that must become the writer
		// after another connection committed fails at once with SQLITE_BUSY_SNAPSHOT (517) or
		// SQLITE_BUSY (5) — the busy timeout does not apply — which the server logs as an error
		// and retries with backoff. SQLite runs one writer at a time anyway; this is also the
		// plugin's own default and what the in-memory (--ephemeral) server uses.
		sqlCfg.MaxConns = 1
		sqlCfg.MaxIdleConns = 1
		if _, err := os.Stat(opts.DatabaseFile); errors.Is(err, os.ErrNotExist) {
			if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
				return nil, fmt.Errorf("temporal: creating schema in %s: %w", opts.DatabaseFile, err)
			}
		}
	}

	var nsConfigs []*sqliteschema.NamespaceConfig
	for _, ns := range opts.Namespaces {
		c, err := sqliteschema.NewNamespaceConfig(clusterName, ns, false, opts.SearchAttributes)
		if err != nil {
			return nil, fmt.Errorf("temporal: namespace %s: %w", ns, err)
		}
		nsConfigs = append(nsConfigs, c)
	}
	if err := sqliteschema.CreateNamespaces(sqlCfg, nsConfigs...); err != nil {
		return nil, fmt.Errorf("temporal: registering namespaces: %w", err)
	}

	frontendAddr := net.JoinHostPort(opts.IP, strconv.Itoa(frontendPort))
	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: opts.IP},
			// No Metrics: the server's own Prometheus endpoint would listen on a port picked
			// afresh at each start, that nobody is told of, and its listener (upstream's
			// default reporter) cannot be stopped — every server a test process started left
			// one behind. kobe's /metrics carries the SDK's client and worker metrics.
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontendAddr},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            map[string]config.Service{},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: frontendAddr},
	}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for svc, port := range svcPorts {
		rpc := config.RPC{GRPCPort: port, BindOnIP: opts.IP}
		if svc == primitives.FrontendService {
			rpc.HTTPPort = httpPort
		}
		cfg.Services[string(svc)] = config.Service{RPC: rpc}
		hosts[svc] = static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(port)))
	}

	dyn := dynamicConfig()
	for k, v := range opts.DynamicConfigOverrides {
		dyn[k] = v
	}

	srv, err := buildAndStart(
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, err
	}
	return &Temporal{server: srv, frontendAddr: frontendAddr, namespaces: opts.Namespaces, stopping: stopping}, nil
}

// buildAndStart builds and starts the server; a Fatal the server logs meanwhile (startupLogger)
// is returned as the error, and what was started of the server is stopped.
func buildAndStart(opts ...temporal.ServerOption) (srv temporal.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(startupFailure)
			if !ok {
				panic(r)
			}
			if srv != nil {
				_ = srv.Stop()
			}
			srv, err = nil, fmt.Errorf("temporal: start: %s", f)
		}
	}()
	srv, err = temporal.NewServer(opts...)
	if err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("temporal: start: %w", err)
	}
	return srv, nil
}

// startupLogger makes the server's Fatal, while the server is being built and started, stop the
// start where it is called: it panics with a startupFailure that buildAndStart returns as an
// error. The server calls Fatal where it cannot go on — a service's port taken ("Failed to start
// gRPC listener") — and leaves stopping to the logger: a no-op logger (nil Logger, the tests'
// zap.NewNop()) let it go on with no listener into a nil-pointer panic, and a real one exited the
// process without StartTemporal's caller hearing why. Once started, Fatal is the logger's.
type startupLogger struct {
	log.Logger
	starting *atomic.Bool
}

// startupFailure is a Fatal message of the server's and its tags, as text.
type startupFailure string

func (l startupLogger) Fatal(msg string, tags ...tag.Tag) {
	if !l.starting.Load() {
		l.Logger.Fatal(msg, tags...)
		return
	}
	l.Logger.Error(msg, tags...)
	text := msg
	for _, t := range tags {
		text += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
	}
	panic(startupFailure(text))
}

// With keeps the wrapper on the loggers the server derives (one per service, with its tags).
func (l startupLogger) With(tags ...tag.Tag) log.Logger {
	return startupLogger{Logger: log.With(l.Logger, tags...), starting: l.starting}
}

// FrontendAddress is the host:port of the gRPC frontend.
func (t *Temporal) FrontendAddress() string { return t.frontendAddr }

// Stop stops all services. It is safe to call once.
func (t *Temporal) Stop() error {
	t.stopping.Store(true)
	return t.server.Stop()
}

// shutdownNoise are the messages the server logs about itself while its services stop one
// after the other: its internal system workers' long polls cut by the frontend's graceful stop,
// and its internal clients redialling a frontend, history or matching service that is already
// gone. They say nothing about kobe's workers (stopped before the server) and nothing is lost.
var shutdownNoise = []string{"network dial error", "Failed to poll for task"}

// shutdownCore logs shutdownNoise at debug level once the server is stopping; before that
// (a dial error while serving is worth a warning) and for every other message it changes nothing.
type shutdownCore struct {
	zapcore.Core
	stopping *atomic.Bool
}

func (c *shutdownCore) With(fields []zapcore.Field) zapcore.Core {
	return &shutdownCore{Core: c.Core.With(fields), stopping: c.stopping}
}

func (c *shutdownCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < zapcore.ErrorLevel && c.stopping.Load() {
		for _, m := range shutdownNoise {
			if strings.HasPrefix(e.Message, m) {
				e.Level = zapcore.DebugLevel
				break
			}
		}
	}
	return c.Core.Check(e, ce)
}

// CheckPortFree returns a clear error when ip:port is already taken.
func CheckPortFree(ip string, port int) error {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is already in use (is another kobe or Temporal running?)", addr)
	}
	return l.Close()
}

// FreePort returns a free TCP port on ip, for a listener to bind a moment later: on 127.0.0.1,
// one outside the kernel's ephemeral range (internal/loopback says why).
func FreePort(ip string) (int, error) {
	ps, err := freePorts(ip, 1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// servicePorts picks the ports of the server's own services (a seam for tests).
var servicePorts = freePorts

func freePorts(ip string, n int) ([]int, error) {
	if ip == "127.0.0.1" {
		return loopback.Take(n, nil)
	}
	// Another address: the kernel's picks. All listeners are held until every port is chosen so
	// that the kernel does not hand out one twice.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitReady blocks until the frontend accepts connections or ctx ends.
func WaitReady(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal frontend %s did not come up: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// dynamicConfig is the embedded server's dynamic configuration (docs/architecture.md lists
// each setting by its key; TestDynamicConfigIsDocumented keeps the two in step).
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// Search attributes registered just now must be usable at once.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		// Eager start lets an in-process worker take a new workflow's first task without a poll round trip.
		dynamicconfig.EnableEagerWorkflowStart.Key():              true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key(): true,
		// A dev box holds thousands, not millions, of workflows: a smaller history cache keeps RSS low.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 4096,
		// A stopping worker's ShutdownWorker call ends its outstanding long polls at once, so the
		// worker's Stop returns in milliseconds instead of waiting out a poll (up to a minute).
		dynamicconfig.EnableCancelWorkerPollsOnShutdown.Key(): true,
		// One partition per task queue: with the default four, a task can land on a partition
		// whose poller is elsewhere and wait to be forwarded; one kobe dev has a handful of
		// pollers, not thousands.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// A burst of warm binds is a burst of Updates to one pool's workflow: the default of 10
		// in flight per workflow refuses the eleventh of 50 clients (it then takes the slow path).
		dynamicconfig.WorkflowExecutionMaxInFlightUpdates.Key(): 500,
	}
}
