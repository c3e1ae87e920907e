// Package service assembles a kobe process from its parts: the store, the Temporal client (and,
// in dev mode, the embedded Temporal server and Web UI), the worker and the API server.
package service

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	localbackend "github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/access"
	"github.com/kunobi-ninja/kobe/internal/config"
	"github.com/kunobi-ninja/kobe/internal/devserver"
	"github.com/kunobi-ninja/kobe/internal/metrics"
	"github.com/kunobi-ninja/kobe/internal/secretbox"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/poolresource"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/server"
	"github.com/kunobi-ninja/kobe/worker"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Process is a started kobe process. Stop it with Stop.
type Process struct {
	Mode config.Mode
	// APIURL is the base URL of the API (server and dev), MetricsURL that of a worker's metrics.
	APIURL     string
	MetricsURL string
	// TemporalAddress is the Temporal frontend in use; UIURL the embedded Web UI (dev), if any.
	TemporalAddress string
	UIURL           string
	StoreDSN        string
	StateDir        string
	// HostID is this host's identity (workers only), naming its task queue.
	HostID      string
	StartupTime time.Duration
	// SearchAttributes is true once kobe's search attributes are registered on the namespace.
	SearchAttributes bool
	// ProfileURL is where Go's profiles are served (/debug/pprof/), with --pprof-address.
	ProfileURL string
	// AdminTokenFile holds the admin token (dev, or server with --admin-token-file).
	AdminTokenFile string

	secrets  *secretbox.Box
	stateDir string // dev and worker: the state dir in use (a temp dir when ephemeral)
	// backends are this process's worker's backends (nil without a worker).
	backends map[string]backends.RuntimeBackend

	Store    store.Store
	Temporal client.Client

	logger   *zap.Logger
	stops    []func() // run in reverse order by Stop
	httpDone chan error
}

// Start brings up everything mode needs and returns once it all serves. On error, whatever was
// started is stopped again, so a failed start leaves nothing running.
func Start(ctx context.Context, cfg config.Config, mode config.Mode, logger *zap.Logger) (_ *Process, err error) {
	t0 := time.Now()
	if err := cfg.Validate(mode); err != nil {
		return nil, err
	}
	p := &Process{Mode: mode, logger: logger, httpDone: make(chan error, 1)}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()

	// Bind our own port first: "address in use" is the most common start-up error and the
	// cheapest to report before anything heavy starts.
	listenAddr := cfg.APIAddress
	if mode == config.ModeWorker {
		listenAddr = cfg.MetricsAddress
	}
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		flag := "--api-address"
		if mode == config.ModeWorker {
			flag = "--metrics-address"
		}
		return nil, fmt.Errorf("%s %s is already in use or not available: %v", flag, listenAddr, cleanNetErr(err))
	}
	p.stops = append(p.stops, func() { _ = ln.Close() })
	baseURL := "http://" + ln.Addr().String()
	var tlsConfig *tls.Config
	if cfg.TLSCertFile != "" && mode != config.ModeWorker {
		certs, err := newCertificateFiles(cfg.TLSCertFile, cfg.TLSKeyFile, logger.Named("api"))
		if err != nil {
			return nil, err
		}
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
		baseURL = "https://" + ln.Addr().String()
	}
	if cfg.ProfileAddress != "" {
		if err := p.serveProfiles(cfg.ProfileAddress); err != nil {
			return nil, err
		}
	}

	temporalAddr := cfg.Temporal.Address
	namespace := cfg.Temporal.Namespace
	taskQueue := cfg.Temporal.TaskQueue
	storeDSN := cfg.Store

	if mode == config.ModeDev {
		namespace, taskQueue = "default", config.DefaultTaskQueue
		if !cfg.Ephemeral {
			if err := p.lockStateDir(cfg.StateDir); err != nil {
				return nil, err
			}
			p.StateDir = cfg.StateDir
		}
		if err := devserver.CheckPortFree("127.0.0.1", cfg.TemporalPort); err != nil {
			return nil, fmt.Errorf("--temporal-port: %w", err)
		}
		if cfg.UIPort != 0 {
			if err := devserver.CheckPortFree("127.0.0.1", cfg.UIPort); err != nil {
				return nil, fmt.Errorf("--ui-port: %w", err)
			}
		}
		storeDSN = cfg.DevStoreDSN()
	}

	// kobe dev owns its store and migrates it; a server and a worker share a store whose schema
	// an operator upgrades (`kobe migrate up`), before the workers and the API are upgraded: they
	// refuse a schema older or newer than the one they were built for.
	openStore := store.OpenCurrent
	if mode == config.ModeDev {
		openStore = store.Open
	}
	st, err := openStore(ctx, storeDSN)
	if err != nil {
		return nil, err
	}
	p.Store, p.StoreDSN = st, store.RedactDSN(storeDSN)
	p.stops = append(p.stops, func() { _ = st.Close() })
	// Before anything runs a workflow: a store whose workflows this release does not replay is
	// refused while it holds any.
	if err := checkRelease(ctx, cfg, mode, st, storeDSN); err != nil {
		return nil, err
	}

	serverLogger := quiet(logger.Named("temporal"), cfg.LogLevel)
	if mode == config.ModeDev {
		dbFile := ""
		if !cfg.Ephemeral {
			dbFile = filepath.Join(cfg.StateDir, "temporal.db")
		}
		ts, err := devserver.StartTemporal(devserver.TemporalOptions{
			DatabaseFile: dbFile,
			FrontendPort: cfg.TemporalPort,
			Logger:       serverLogger,
		})
		if err != nil {
			return nil, err
		}
		p.stops = append(p.stops, func() { _ = ts.Stop() })
		temporalAddr = ts.FrontendAddress()
	}
	p.TemporalAddress = temporalAddr

	sdkMetrics := metrics.NewSDKCollector()
	// An external Temporal that does not answer within seconds is a configuration error to
	// report at once; our own embedded server has just started and may need longer on a busy
	// machine before it serves its first request.
	dialTimeout := 5 * time.Second
	if mode == config.ModeDev {
		dialTimeout = 2 * time.Minute
	}
	c, err := dialTemporal(ctx, cfg.Temporal, temporalAddr, namespace, string(mode), dialTimeout, serverLogger, sdkMetrics)
	if err != nil {
		return nil, err
	}
	p.Temporal = c
	p.stops = append(p.stops, c.Close)

	if mode != config.ModeWorker {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := server.EnsureSearchAttributes(sctx, c, namespace); err != nil {
			logger.Warn("leases will not be searchable by pool, owner and phase in the Temporal UI", zap.Error(err))
		} else {
			p.SearchAttributes = true
		}
		cancel()
	}

	if mode == config.ModeWorker || (mode == config.ModeDev && !cfg.NoWorker) {
		if err := p.startWorkers(cfg, mode, c, st, taskQueue, logger); err != nil {
			return nil, err
		}
	}
	if mode == config.ModeDev && !cfg.NoDefaultPool {
		// Starting the pool needs no worker: its workflow waits in Temporal until one polls
		// (with --no-worker, the separate kobe worker).
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := pool.Apply(pctx, c, st, DefaultDevPool(defaultPoolVersion()),
			pool.ApplyOptions{TaskQueue: taskQueue, ContinueAsNewAfter: cfg.ContinueAsNewAfter})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("default pool: %w", err)
		}
	}

	if mode == config.ModeDev && cfg.UIPort != 0 {
		ui, err := devserver.StartUI("127.0.0.1", cfg.UIPort, temporalAddr, namespace)
		if err != nil {
			return nil, err
		}
		p.UIURL = ui.URL()
		p.stops = append(p.stops, ui.Stop)
	}

	var policy *access.Policy
	if mode != config.ModeWorker {
		if policy, err = loadPolicy(cfg.Policy); err != nil {
			return nil, err
		}
		// The API opens the sealed lease kubeconfigs with the workers' key: the in-process
		// worker's in dev, else --secret-key-file (or, dev --no-worker, <state-dir>/secret.key).
		if p.secrets == nil {
			keyFile := cfg.SecretKeyFile
			if keyFile == "" && mode == config.ModeDev && !cfg.Ephemeral {
				keyFile = filepath.Join(cfg.StateDir, "secret.key")
			}
			if keyFile != "" {
				if p.secrets, err = loadKeyFile(keyFile, mode); err != nil {
					return nil, fmt.Errorf("--secret-key-file: %v", err)
				}
				if err := checkSealingKey(ctx, st, p.secrets, keyFile, logger); err != nil {
					return nil, fmt.Errorf("--secret-key-file %v", err)
				}
			}
		}
		tokenFile := cfg.AdminTokenFile
		if tokenFile == "" && mode == config.ModeDev {
			dir := p.stateDir
			if dir == "" { // no worker in this process
				dir = cfg.StateDir
			}
			tokenFile = filepath.Join(dir, "admin-token")
		}
		if tokenFile != "" {
			if err := ensureAdminToken(ctx, st, policy, tokenFile); err != nil {
				return nil, err
			}
			p.AdminTokenFile = tokenFile
		}
		if cfg.InsecureNoAuth {
			logger.Warn("--insecure-no-auth: EVERY API REQUEST IS SERVED AS ADMIN, WITHOUT A TOKEN. Demos only; never on a shared network.")
		}
	}

	host, _ := os.Hostname()
	apiServer := &server.Server{
		Policy:           policy,
		InsecureNoAuth:   cfg.InsecureNoAuth,
		Secrets:          p.secrets,
		SearchAttributes: p.SearchAttributes,
		Temporal:         c,
		TemporalAddress:  temporalAddr,
		Namespace:        namespace,
		TaskQueue:        taskQueue,
		Store:            st,
		Logger:           logger.Named("api"),
		Registry:         server.NewRegistry(sdkMetrics, &server.PoolCollector{Temporal: c, Store: st}, &server.CertificateCollector{Store: st}),
		MetricsTokenFile: cfg.MetricsTokenFile,
		Backends:         backends.Names(),
		InstanceName:     fmt.Sprintf("%s-%d", host, os.Getpid()),
		TemporalUI:       cmp.Or(p.UIURL, cfg.TemporalUIURL),

		ContinueAsNewAfter: cfg.ContinueAsNewAfter,
	}
	var handler http.Handler = apiServer.Handler()
	if mode != config.ModeWorker {
		if err := p.startPoolResources(cfg, apiServer, logger); err != nil {
			return nil, err
		}
	}
	if mode == config.ModeWorker {
		handler = server.WorkerHandler(apiServer.Registry, cfg.MetricsTokenFile)
		p.MetricsURL = baseURL
	} else {
		p.APIURL = baseURL
	}
	// The server's own errors (a failed handshake, a handler's panic) go to kobe's log in its
	// format, not to the standard logger's stderr lines.
	errorLog, err := zap.NewStdLogAt(logger.Named("http"), zapcore.WarnLevel)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig, ErrorLog: errorLog}
	go func() {
		if tlsConfig != nil {
			p.httpDone <- srv.ServeTLS(ln, "", "") // the certificate comes from GetCertificate
			return
		}
		p.httpDone <- srv.Serve(ln)
	}()
	p.stops = append(p.stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	p.StartupTime = time.Since(t0)
	return p, nil
}

// startWorkers builds the backends of this host and starts two workers: one on the shared task
// queue (workflows, host-independent activities) and one on this host's own queue (activities
// on instances that live here).
func (p *Process) startWorkers(cfg config.Config, mode config.Mode, c client.Client, st store.Store, sharedQueue string, logger *zap.Logger) error {
	stateDir := cfg.StateDir
	if mode == config.ModeDev && cfg.Ephemeral {
		dir, err := os.MkdirTemp("", "kobe-ephemeral-")
		if err != nil {
			return err
		}
		stateDir = dir
		// Registered first so that it runs last, after the backends stopped their instances.
		p.stops = append(p.stops, func() { _ = os.RemoveAll(dir) })
	}
	p.stateDir = stateDir
	// The host's identity first: it creates the state directory the dev key file lives in.
	if _, err := worker.HostID(stateDir); err != nil {
		return fmt.Errorf("--state-dir %s: %v", stateDir, err)
	}
	var secrets *secretbox.Box
	var err error
	keyFile := "an in-memory key (--ephemeral)"
	switch {
	case mode == config.ModeDev && cfg.Ephemeral:
		secrets = secretbox.Random()
	case cfg.SecretKeyFile != "":
		if secrets, err = loadKeyFile(cfg.SecretKeyFile, mode); err != nil {
			return fmt.Errorf("--secret-key-file: %v", err)
		}
		keyFile = cfg.SecretKeyFile
	case mode == config.ModeDev:
		keyFile = filepath.Join(stateDir, "secret.key")
		if secrets, err = secretbox.LoadOrCreateKeyFile(keyFile); err != nil {
			return fmt.Errorf("--state-dir: %v", err)
		}
	default:
		logger.Warn("no --secret-key-file: this worker cannot hand out lease credentials")
	}
	if secrets != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := checkSealingKey(ctx, st, secrets, keyFile, logger)
		cancel()
		if err != nil {
			return fmt.Errorf("--secret-key-file %v", err)
		}
	}
	p.secrets = secrets
	h, err := worker.StartHost(worker.HostConfig{Schedules: true, OrphanGrace: cfg.OrphanGrace, Client: c, Store: st, Logger: logger.Named("activities"),
		SharedQueue: sharedQueue, StateDir: stateDir, Secrets: secrets, HostKubeconfig: cfg.HostKubeconfig,
		HostClusterName: cfg.HostClusterName})
	if err != nil {
		return err
	}
	if mode == config.ModeDev && cfg.Ephemeral {
		// Nothing of an ephemeral run may outlive it: its instances are deleted at stop, after
		// the workers stopped (stops run in reverse order).
		p.stops = append(p.stops, func() {
			if err := h.DeleteInstances(); err != nil {
				logger.Warn("deleting the ephemeral run's instances", zap.Error(err))
			}
		})
	}
	p.stops = append(p.stops, h.Stop)
	p.HostID = h.Activities.HostID
	p.backends = h.Activities.Backends
	return nil
}

// defaultPoolVersion is the newest Kubernetes version the local backend finds built (the same
// tools directory its instances use), or the version `make tools` builds.
func defaultPoolVersion() string {
	if vs := (localbackend.Tools{Dir: localbackend.DefaultToolsDir()}).KubernetesVersions(); len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return "v1.37.2"
}

// Stop stops every part in the reverse order of starting. It is safe to call more than once.
func (p *Process) Stop() {
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
	p.stops = nil
}

// HTTPDone reports when the HTTP server stops serving (with its error).
func (p *Process) HTTPDone() <-chan error { return p.httpDone }

// lockStateDir takes an exclusive lock so that two `kobe dev` never share one state directory.
func (p *Process) lockStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--state-dir %s: %v", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "kobe.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("--state-dir %s: %v", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(f.Name())
		_ = f.Close()
		return fmt.Errorf("--state-dir %s is in use by another kobe (pid %s); stop it or pick another --state-dir",
			dir, strings.TrimSpace(string(owner)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	p.stops = append(p.stops, func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
	return nil
}

// quiet raises a component logger to warn unless the user asked for debug logs: the Temporal
// server and SDK are chatty at info level.
func quiet(l *zap.Logger, level string) *zap.Logger {
	if strings.EqualFold(level, "debug") {
		return l
	}
	return l.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
}

// shortGRPCError keeps the useful tail of gRPC's long connection errors on one line.
func shortGRPCError(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if i := strings.Index(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	return strings.Trim(msg, `"`)
}

func cleanNetErr(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// serveProfiles serves net/http/pprof's handlers on a listener of their own (never on the API's
// mux: they are unauthenticated and a CPU profile costs the process while it runs). It is how
// the bench's figures are explained: `go tool pprof http://<addr>/debug/pprof/profile?seconds=20`
// during a burst.
func (p *Process) serveProfiles(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-address %s is already in use or not available: %v", addr, cleanNetErr(err))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	p.stops = append(p.stops, func() { _ = srv.Close() })
	p.ProfileURL = "http://" + ln.Addr().String()
	return nil
}

// DefaultDevPool is the pool `kobe dev` starts unless --no-default-pool: two warm local clusters.
func DefaultDevPool(kubernetesVersion string) *poolspec.ClusterPool {
	size := 2
	return &poolspec.ClusterPool{
		APIVersion: poolspec.APIVersion,
		Kind:       poolspec.Kind,
		Metadata:   poolspec.Metadata{Name: "dev"},
		Spec: poolspec.Spec{
			Size:    &size,
			TTL:     "1h",
			Backend: poolspec.Backend{Type: "local"},
			Cluster: poolspec.Cluster{Version: kubernetesVersion},
		},
	}
}

// startPoolResources runs the ClusterPool controller (package poolresource) beside the API when
// --resources-kubeconfig or --resources-in-cluster says where the resources are: it changes
// pools through this process's API server, and stands for election with the other kobe
// servers pointed at the same resources. It stops (and gives up its lease) with the process.
func (p *Process) startPoolResources(cfg config.Config, apiServer *server.Server, logger *zap.Logger) error {
	var restConfig *rest.Config
	var err error
	switch {
	case cfg.ResourcesKubeconfig != "":
		restConfig, err = clientcmd.BuildConfigFromFlags("", cfg.ResourcesKubeconfig)
	case cfg.ResourcesInCluster:
		restConfig, err = rest.InClusterConfig()
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("the ClusterPool controller's Kubernetes config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := poolresource.Run(ctx, poolresource.Options{Config: restConfig, Server: apiServer, LeaseNamespace: cfg.ResourcesLeaseNamespace,
			Identity: apiServer.InstanceName, Logger: logger.Named("clusterpools")})
		if err != nil {
			logger.Error("the ClusterPool controller stopped", zap.Error(err))
		}
	}()
	p.stops = append(p.stops, func() {
		cancel()
		<-done
	})
	return nil
}

// loadKeyFile reads the sealing key ring of path. Only kobe dev creates one (in its own state
// dir, or at --secret-key-file); a server and a worker need the file `kobe secrets init` made.
func loadKeyFile(path string, mode config.Mode) (*secretbox.Box, error) {
	if mode == config.ModeDev {
		return secretbox.LoadOrCreateKeyFile(path)
	}
	return secretbox.LoadKeyFile(path)
}
