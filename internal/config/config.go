// Package config is the one configuration struct shared by `kobe dev`, `kobe server` and
// `kobe worker`: registered as flags, overridable by KOBE_* environment variables, and
// validated before anything starts so that a bad setting fails with one clear line.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/spf13/pflag"
)

// Mode says which process the configuration is for; each mode uses a subset of the fields.
type Mode string

const (
	ModeDev    Mode = "dev"
	ModeServer Mode = "server"
	ModeWorker Mode = "worker"
)

// DefaultTaskQueue is the Temporal task queue shared by all kobe workers for host-independent work.
const DefaultTaskQueue = "kobe"

// DefaultOrphanGrace is the orphan reaper's default grace: twice the API's longest wait
// between admitting a lease and starting it (MinOrphanGrace), so that a slow start is never
// taken for an orphan, even with the API's and the worker's clocks a little apart.
const DefaultOrphanGrace = 2 * time.Minute

// MinOrphanGrace is the shortest grace accepted: the API may take up to about 55 s between a
// lease's admission and its start (a warm bind's Update, 10 s, then up to 4 start attempts of
// 10 s and their pauses, 5 s: server.startLeaseSurely).
const MinOrphanGrace = time.Minute

// Config holds every setting of a kobe process.
type Config struct {
	// StateDir holds the embedded Temporal database, kobe's SQLite store and instance data (dev only).
	StateDir string
	// Ephemeral keeps everything in memory (dev only).
	Ephemeral bool
	// NoDefaultPool stops `kobe dev` from starting its default "dev" pool.
	NoDefaultPool bool
	// NoWorker makes `kobe dev` run the embedded Temporal, the API and the store but no worker:
	// a separate `kobe worker` against its Temporal port and store file does the work (dev only).
	NoWorker bool
	// HostKubeconfig is the kubeconfig of the host cluster the k3s, k0s and vcluster backends
	// put their instances in (dev and worker); empty: the in-cluster config, if any.
	HostKubeconfig string
	// HostClusterName names that host cluster (dev and worker): a pool whose
	// spec.backend.hostCluster is this name has its members placed by the workers that have it.
	HostClusterName string
	// OrphanGrace (dev and worker) is how long a lease may stay Pending without a workflow
	// before the orphan reaper fails it (reason orphaned): the workers set it on the reaper's
	// schedule. At least MinOrphanGrace.
	OrphanGrace time.Duration
	// SecretKeyFile holds the base64 AES-256 key that seals lease kubeconfigs in the store.
	// The API server and every worker must share it. Dev mode keeps one in --state-dir.
	SecretKeyFile string

	APIAddress     string // server and dev
	MetricsAddress string // worker: /metrics and /healthz of a worker-only process
	// TLSCertFile and TLSKeyFile (server and dev) make the API serve HTTPS with this PEM
	// certificate (chain) and key, re-read when either file changes.
	TLSCertFile, TLSKeyFile string
	// InsecureHTTP (server and dev) allows plain HTTP on an --api-address that is not
	// loopback: tokens and kubeconfigs then cross the network in clear unless a proxy in front
	// terminates TLS.
	InsecureHTTP bool
	// MetricsTokenFile (every mode) holds a bearer token /metrics then requires; empty: /metrics
	// is open, as /healthz.
	MetricsTokenFile string
	// ProfileAddress (every mode), when set, serves Go's profiles (net/http/pprof) there, on a
	// listener of its own so that they are never reachable through the API's address.
	ProfileAddress string

	TemporalPort int // dev: gRPC port of the embedded Temporal frontend
	UIPort       int // dev: Temporal Web UI port; 0 disables it
	// TemporalUIURL (server) is the Temporal Web UI's address the portal links leases'
	// workflows to; dev mode links to its own UI.
	TemporalUIURL string

	Temporal TemporalConfig

	// Store is the DSN of kobe's own store: postgres://… or sqlite:///path (sqlite://:memory: for tests).
	Store string

	LogFormat string
	LogLevel  string

	// Policy is the access policy file (roles → rules); empty = the built-in default policy.
	Policy string
	// InsecureNoAuth serves every API request as an admin, without a token (demos only).
	InsecureNoAuth bool
	// ResourcesKubeconfig and ResourcesInCluster (dev and server) point the ClusterPool
	// controller (package poolresource) at the Kubernetes API server that holds kobe's
	// resources; neither: no controller runs. ResourcesLeaseNamespace holds its leader
	// election's Lease.
	ResourcesKubeconfig     string
	ResourcesInCluster      bool
	ResourcesLeaseNamespace string
	// ContinueAsNewAfter (dev and server; a hidden flag, for tests) is the history length past
	// which the pools and leases the API starts continue as new; 0 = the workflows' defaults.
	// The soak sets it low so that it crosses many continues-as-new.
	ContinueAsNewAfter int
	// AdminTokenFile holds an admin token: created (0600) with a new token if missing,
	// registered in the store if the store does not know it. Dev: <state-dir>/admin-token.
	AdminTokenFile string
}

// TemporalConfig locates an external Temporal service.
type TemporalConfig struct {
	Address   string
	Namespace string
	TaskQueue string
	// mTLS. CertFile and KeyFile go together; CAFile alone enables server-verified TLS.
	TLSCertFile   string
	TLSKeyFile    string
	TLSCAFile     string
	TLSServerName string
	// APIKeyFile holds an API key (Temporal Cloud) sent as a bearer token on every call; the
	// file is re-read when it changes, so a rotated key needs no restart. It may be combined
	// with mTLS; on its own it turns TLS on (with the system's CA bundle unless TLSCAFile).
	APIKeyFile string
}

// TLSEnabled reports whether any TLS setting was given.
func (t TemporalConfig) TLSEnabled() bool {
	return t.TLSCertFile != "" || t.TLSKeyFile != "" || t.TLSCAFile != "" || t.TLSServerName != ""
}

// ReadAPIKeyFile reads a Temporal API key from path: the file's content without surrounding
// whitespace (a Secret written by an editor often ends with a newline). An empty file is an
// error: sending no key would fail later with a less clear "unauthorized".
func ReadAPIKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--temporal-api-key-file: %v", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("--temporal-api-key-file %s: the file is empty", path)
	}
	if strings.ContainsAny(key, "\r\n") {
		return "", fmt.Errorf("--temporal-api-key-file %s: holds more than one line; it must hold the API key only", path)
	}
	return key, nil
}

// Default returns the defaults documented in --help.
func Default() Config {
	return Config{
		StateDir:       DefaultStateDir(),
		APIAddress:     "127.0.0.1:8080",
		MetricsAddress: "127.0.0.1:9090",
		TemporalPort:   7233,
		UIPort:         8233,
		Temporal: TemporalConfig{
			Address:   "127.0.0.1:7233",
			Namespace: "default",
			TaskQueue: DefaultTaskQueue,
		},
		LogFormat:   "console",
		LogLevel:    "info",
		OrphanGrace: DefaultOrphanGrace,

		ResourcesLeaseNamespace: "default",
	}
}

// DefaultStateDir follows the XDG base directory spec: $XDG_STATE_HOME/kobe or ~/.local/state/kobe.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kobe")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "kobe-state")
	}
	return filepath.Join(home, ".local", "state", "kobe")
}

// AddFlags registers the flags that matter in mode, bound to c's fields (c should hold Default()).
func (c *Config) AddFlags(fs *pflag.FlagSet, mode Mode) {
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: console or json")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.ProfileAddress, "pprof-address", c.ProfileAddress, "serve Go's runtime profiles (/debug/pprof/) at this address, e.g. 127.0.0.1:6060; empty = off. Unauthenticated: keep it on loopback")
	fs.StringVar(&c.MetricsTokenFile, "metrics-token-file", c.MetricsTokenFile, "file holding a bearer token that /metrics then requires (Prometheus: authorization.credentials_file); re-read at every scrape; empty = /metrics is open")
	if mode == ModeServer || mode == ModeDev {
		fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "serve the API over HTTPS with this PEM certificate (chain); re-read when it changes, no restart")
		fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "the PEM private key of --tls-cert-file")
		fs.BoolVar(&c.InsecureHTTP, "insecure-http", c.InsecureHTTP, "serve plain HTTP on an --api-address that is not loopback (behind a proxy that terminates TLS); without TLS flags a non-loopback address is refused")
	}
	switch mode {
	case ModeDev:
		fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "directory for the embedded Temporal database, the store and cluster data")
		fs.BoolVar(&c.Ephemeral, "ephemeral", c.Ephemeral, "keep everything in memory; nothing is written to disk")
		fs.StringVar(&c.APIAddress, "api-address", c.APIAddress, "address of the kobe API server")
		fs.IntVar(&c.TemporalPort, "temporal-port", c.TemporalPort, "gRPC port of the embedded Temporal server (loopback)")
		fs.IntVar(&c.UIPort, "ui-port", c.UIPort, "port of the Temporal Web UI (loopback); 0 disables the UI")
		fs.StringVar(&c.Store, "store", c.Store, "kobe store DSN (default: SQLite file in --state-dir, in memory with --ephemeral)")
		fs.BoolVar(&c.NoDefaultPool, "no-default-pool", c.NoDefaultPool, `do not start the default "dev" pool (two warm local clusters)`)
		c.addAccessFlags(fs, "admin token file (default <state-dir>/admin-token)")
		fs.BoolVar(&c.NoWorker, "no-worker", c.NoWorker, `run no worker in this process: a separate "kobe worker" against --temporal-port and the same store does the work`)
		c.addHostFlags(fs)
	case ModeServer, ModeWorker:
		if mode == ModeServer {
			fs.StringVar(&c.APIAddress, "api-address", c.APIAddress, "address of the kobe API server")
			c.addAccessFlags(fs, "admin token file: created with a new admin token if missing, registered if the store lacks it")
			fs.StringVar(&c.TemporalUIURL, "temporal-ui-url", c.TemporalUIURL, "address of the Temporal Web UI the portal (/ui) links each lease's workflow to (e.g. https://temporal.example.com); empty = no links")
		} else {
			fs.StringVar(&c.MetricsAddress, "metrics-address", c.MetricsAddress, "address serving /metrics and /healthz of this worker")
			fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "directory for this host's identity and its local clusters' data")
			c.addHostFlags(fs)
		}
		fs.StringVar(&c.Store, "store", c.Store, "kobe store DSN: postgres://user@host/db or sqlite:///path/kobe.db (required)")
		fs.StringVar(&c.SecretKeyFile, "secret-key-file", c.SecretKeyFile, "file with the base64 keys sealing lease kubeconfigs, one per line, the last sealing (shared by server and workers; made by \"kobe secrets init\"; kobe dev creates its own)")
		fs.StringVar(&c.Temporal.Address, "temporal-address", c.Temporal.Address, "host:port of the Temporal frontend")
		fs.StringVar(&c.Temporal.Namespace, "temporal-namespace", c.Temporal.Namespace, "Temporal namespace")
		fs.StringVar(&c.Temporal.TaskQueue, "task-queue", c.Temporal.TaskQueue, "Temporal task queue of kobe workers")
		fs.StringVar(&c.Temporal.TLSCertFile, "temporal-tls-cert", "", "client certificate for mTLS to Temporal (PEM)")
		fs.StringVar(&c.Temporal.TLSKeyFile, "temporal-tls-key", "", "client private key for mTLS to Temporal (PEM)")
		fs.StringVar(&c.Temporal.TLSCAFile, "temporal-tls-ca", "", "CA bundle that signs the Temporal server certificate (PEM)")
		fs.StringVar(&c.Temporal.TLSServerName, "temporal-tls-server-name", "", "server name to verify in the Temporal certificate")
		fs.StringVar(&c.Temporal.APIKeyFile, "temporal-api-key-file", "", "file holding a Temporal API key (Temporal Cloud), sent as a bearer token; re-read when it changes; turns TLS on")
	}
}

// addHostFlags registers what the backends of a worker's host need, and what its workers
// set on the schedules they make.
func (c *Config) addHostFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.OrphanGrace, "orphan-grace", c.OrphanGrace,
		"how long a lease may stay Pending with no workflow (its API stopped between admitting and starting it) before it is failed with reason orphaned, freeing its quota and alias; at least "+MinOrphanGrace.String())
	fs.StringVar(&c.HostKubeconfig, "host-kubeconfig", c.HostKubeconfig,
		"kubeconfig of the host cluster the k3s, k0s and vcluster backends create instances in (default: the in-cluster config)")
	fs.StringVar(&c.HostClusterName, "host-cluster-name", c.HostClusterName,
		"name of that host cluster: pools with spec.backend.hostCluster of this name are placed by the workers that have it (a DNS label; default: unnamed, any pool without a hostCluster)")
}

func (c *Config) addAccessFlags(fs *pflag.FlagSet, adminTokenHelp string) {
	fs.IntVar(&c.ContinueAsNewAfter, "continue-as-new-after", c.ContinueAsNewAfter, "history length past which new pools and leases continue as new (tests; 0 = the workflows' defaults)")
	_ = fs.MarkHidden("continue-as-new-after")
	fs.StringVar(&c.Policy, "policy", c.Policy, "access policy file (YAML: roles, permissions, pools, quotas); default: built-in roles admin, ci, dev, auditor")
	fs.BoolVar(&c.InsecureNoAuth, "insecure-no-auth", c.InsecureNoAuth, "serve every API request as an admin without a token (demos only; never on a shared network)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", c.AdminTokenFile, adminTokenHelp)
	fs.StringVar(&c.ResourcesKubeconfig, "resources-kubeconfig", c.ResourcesKubeconfig,
		"kubeconfig of the Kubernetes API server holding kobe's ClusterPool resources: their controller runs (leader-elected) in this process (docs/gitops.md; default: off)")
	fs.BoolVar(&c.ResourcesInCluster, "resources-in-cluster", c.ResourcesInCluster,
		"run the ClusterPool controller against the Kubernetes API server kobe runs in (its in-cluster config)")
	fs.StringVar(&c.ResourcesLeaseNamespace, "resources-lease-namespace", c.ResourcesLeaseNamespace,
		"namespace of the Lease the ClusterPool controllers elect their leader with")
}

// DevStoreDSN is the store `kobe dev` uses: --store, else kobe.db in --state-dir, else (with
// --ephemeral) an in-memory database.
func (c *Config) DevStoreDSN() string {
	switch {
	case c.Store != "":
		return c.Store
	case c.Ephemeral:
		return "sqlite://:memory:"
	default:
		return "sqlite://" + filepath.Join(c.StateDir, "kobe.db")
	}
}

// EnvName is the environment variable that sets a flag: --temporal-address → KOBE_TEMPORAL_ADDRESS.
func EnvName(flag string) string {
	return "KOBE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets every flag not given on the command line from its KOBE_* variable.
// Flags win over the environment so that a one-off override on the command line works.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		v, ok := lookup(EnvName(f.Name))
		if !ok || v == "" {
			// An empty variable counts as unset, as shells and compose files often leave them.
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", EnvName(f.Name), v, err))
		}
	})
	return errors.Join(errs...)
}

// Validate checks the settings used by mode and returns an error naming the first bad one.
func (c *Config) Validate(mode Mode) error {
	if c.LogFormat != "console" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format %q: must be console or json", c.LogFormat)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: must be one of debug, info, warn, error", c.LogLevel)
	}
	if c.ProfileAddress != "" {
		if err := validateHostPort("--pprof-address", c.ProfileAddress); err != nil {
			return err
		}
	}
	if c.HostClusterName != "" && (!hostClusterName.MatchString(c.HostClusterName) || len(c.HostClusterName) > 63) {
		return fmt.Errorf("--host-cluster-name %q: must be a DNS label (lowercase letters, digits, '-')", c.HostClusterName)
	}
	if c.ResourcesKubeconfig != "" && c.ResourcesInCluster {
		return errors.New("--resources-kubeconfig and --resources-in-cluster: give one of them")
	}
	if c.ResourcesKubeconfig != "" {
		if _, err := os.Stat(c.ResourcesKubeconfig); err != nil {
			return fmt.Errorf("--resources-kubeconfig: %v", err)
		}
	}
	if c.HostKubeconfig != "" && mode != ModeServer {
		if _, err := os.Stat(c.HostKubeconfig); err != nil {
			return fmt.Errorf("--host-kubeconfig: %v", err)
		}
	}
	if c.ContinueAsNewAfter < 0 {
		return fmt.Errorf("--continue-as-new-after %d: must be 0 (the workflows' defaults) or a positive history length", c.ContinueAsNewAfter)
	}
	if mode == ModeServer || mode == ModeDev {
		if err := c.validateTransport(); err != nil {
			return err
		}
	}
	if c.MetricsTokenFile != "" {
		if _, err := os.Stat(c.MetricsTokenFile); err != nil {
			return fmt.Errorf("--metrics-token-file: %v", err)
		}
	}
	if mode != ModeServer && c.OrphanGrace < MinOrphanGrace {
		return fmt.Errorf("--orphan-grace %s: must be at least %s (the API's longest wait between admitting a lease and starting it is about 55 s)", c.OrphanGrace, MinOrphanGrace)
	}
	switch mode {
	case ModeDev:
		if !c.Ephemeral && c.StateDir == "" {
			return errors.New("--state-dir must not be empty (or use --ephemeral)")
		}
		if err := validateHostPort("--api-address", c.APIAddress); err != nil {
			return err
		}
		if err := validatePort("--temporal-port", c.TemporalPort, false); err != nil {
			return err
		}
		if err := validatePort("--ui-port", c.UIPort, true); err != nil {
			return err
		}
		if c.UIPort != 0 && c.UIPort == c.TemporalPort {
			return fmt.Errorf("--ui-port and --temporal-port are both %d", c.UIPort)
		}
		if c.Store != "" {
			if _, err := store.ParseDSN(c.Store); err != nil {
				return err
			}
		}
		if c.NoWorker && c.DevStoreDSN() == "sqlite://:memory:" {
			// The worker runs in another process: it could not open this process's memory.
			return errors.New("--no-worker: a separate worker cannot share an in-memory store; drop --ephemeral or give --store")
		}
	case ModeServer, ModeWorker:
		if c.NoWorker {
			return fmt.Errorf("--no-worker: only kobe dev runs an embedded worker to turn off, not kobe %s", mode)
		}
		if mode == ModeServer {
			if err := validateHostPort("--api-address", c.APIAddress); err != nil {
				return err
			}
		} else {
			if err := validateHostPort("--metrics-address", c.MetricsAddress); err != nil {
				return err
			}
			if c.StateDir == "" {
				return errors.New("--state-dir must not be empty")
			}
		}
		if c.Store == "" {
			return fmt.Errorf("--store is required for kobe %s (postgres://user@host:5432/kobe or sqlite:///path/kobe.db; env %s)", mode, EnvName("store"))
		}
		if _, err := store.ParseDSN(c.Store); err != nil {
			return err
		}
		if err := validateHostPort("--temporal-address", c.Temporal.Address); err != nil {
			return err
		}
		if c.Temporal.Namespace == "" {
			return errors.New("--temporal-namespace must not be empty")
		}
		if c.Temporal.TaskQueue == "" {
			return errors.New("--task-queue must not be empty")
		}
		if (c.Temporal.TLSCertFile == "") != (c.Temporal.TLSKeyFile == "") {
			return errors.New("--temporal-tls-cert and --temporal-tls-key must be given together")
		}
		for flag, path := range map[string]string{
			"--temporal-tls-cert": c.Temporal.TLSCertFile,
			"--temporal-tls-key":  c.Temporal.TLSKeyFile,
			"--temporal-tls-ca":   c.Temporal.TLSCAFile,
		} {
			if path == "" {
				continue
			}
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("%s: %v", flag, err)
			}
		}
		if c.Temporal.APIKeyFile != "" {
			if _, err := ReadAPIKeyFile(c.Temporal.APIKeyFile); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

// validateTransport refuses an API that would hand out tokens and kubeconfigs in clear on a
// network without being told to, and TLS settings that do not go together.
func (c *Config) validateTransport() error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file must be given together")
	}
	if c.TLSCertFile != "" {
		if c.InsecureHTTP {
			return errors.New("--insecure-http and --tls-cert-file: choose one (HTTPS, or plain HTTP behind a proxy that terminates TLS)")
		}
		for flag, path := range map[string]string{"--tls-cert-file": c.TLSCertFile, "--tls-key-file": c.TLSKeyFile} {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("%s: %v", flag, err)
			}
		}
		return nil
	}
	host, _, err := net.SplitHostPort(c.APIAddress)
	if err != nil || c.InsecureHTTP || IsLoopback(host) {
		return nil // a malformed address is reported as such by the mode's own check
	}
	return fmt.Errorf("--api-address %s is not a loopback address: serve HTTPS with --tls-cert-file and --tls-key-file, or pass --insecure-http to serve plain HTTP (tokens and kubeconfigs in clear unless a proxy in front terminates TLS)", c.APIAddress)
}

// IsLoopback reports whether a listening host only accepts connections from this machine:
// "localhost" or a loopback IP. The empty host and names other than localhost do not.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validateHostPort(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want host:port (%v)", flag, addr, err)
	}
	_ = host
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s %q: port must be a number between 0 and 65535", flag, addr)
	}
	return nil
}

func validatePort(flag string, port int, zeroOK bool) error {
	if port == 0 && zeroOK {
		return nil
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("%s %d: must be between 1 and 65535", flag, port)
	}
	return nil
}

var hostClusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
