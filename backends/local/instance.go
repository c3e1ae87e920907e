package local

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/internal/kubeconfig"
	"github.com/kunobi-ninja/kobe/internal/pki"
)

// caValidity is the lifetime of an instance's CA, and defaultCertValidity that of its serving
// and admin certificates when the pool does not say (spec.certificates.validity). The CA
// outlives them by far: RotateCertificates re-issues them from the same CA, so that the
// kubeconfigs already issued keep working (certificates.go).
const (
	caValidity          = 10 * 365 * 24 * time.Hour
	defaultCertValidity = 365 * 24 * time.Hour
)

// record is the instance's persistent description (instance.json). Everything needed to
// re-adopt, restart or delete the instance is here or derivable from the directory.
type record struct {
	ID                string    `json:"id"`
	Pool              string    `json:"pool"`
	Host              string    `json:"host"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	Components        []string  `json:"components"`
	Nodes             int       `json:"nodes"`
	APIPort           int       `json:"apiPort"`
	KinePort          int       `json:"kinePort"`
	CreatedAt         time.Time `json:"createdAt"`
	// ReadyOnce is set when the API server first answered /readyz.
	ReadyOnce bool `json:"readyOnce"`
	// Sleeping is set while the instance is stopped on purpose (Sleeper).
	Sleeping bool `json:"sleeping"`
	// Datastore is set when kine runs on the instance's own database of a shared server.
	Datastore *datastoreRecord `json:"datastore,omitempty"`
	// Frozen is set while the instance's processes are stopped in place (Freezer).
	Frozen bool `json:"frozen,omitempty"`
	// CertValidity is the lifetime of its serving and admin certificates (0: the default),
	// which RotateCertificates gives the new ones too.
	CertValidity time.Duration `json:"certValidity,omitempty"`
}

type instance struct {
	dir string

	mu       sync.Mutex
	rec      record
	procs    []*process // in start order
	failure  string     // set when start failed
	stopping bool
	// down is the backend's DownNotifier function, told of exits kobe did not cause.
	down *downNotice
	// starting is set from start until the API-server-dependent components run.
	starting bool
	// adopted is set for an instance found again after a kobe restart (its processes were
	// started by an earlier kobe, or not at all if that kobe died in the middle of Create).
	adopted bool
	client  *http.Client
	// bootCPUErr says why the processes of a booting instance could not join its boot cpu
	// cgroup (cpuweight.go) and boot at the normal weight ("" when they did, or it is off).
	bootCPUErr string
	// freezerErr says why the processes could not join the instance's freezer cgroup ("" when
	// they did): Freeze reports it.
	freezerErr string
}

func (in *instance) path(parts ...string) string {
	return filepath.Join(append([]string{in.dir}, parts...)...)
}

func (in *instance) endpoint() string {
	return "https://127.0.0.1:" + strconv.Itoa(in.rec.APIPort)
}

// newInstance writes the directory, PKI and record of a new instance. The record is written
// last: a directory without one is debris of an interrupted Create and is removed at adoption.
func (b *Backend) newInstance(dir string, spec backends.InstanceSpec, opts Options, ds *datastoreRecord) (*instance, error) {
	for _, d := range []string{"pki", "data", "logs", "kubeconfigs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	cp, err := newClusterPKI(spec.ID, spec.CertificateValidity)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"pki/ca.crt":        cp.CA.CertPEM,
		"pki/ca.key":        cp.CA.KeyPEM,
		"pki/apiserver.crt": cp.Serving.CertPEM,
		"pki/apiserver.key": cp.Serving.KeyPEM,
		"pki/sa.pub":        cp.ServiceAccountPublicPEM,
		"pki/sa.key":        cp.ServiceAccountPrivatePEM,
		"pki/admin.crt":     cp.Admin.CertPEM,
		"pki/admin.key":     cp.Admin.KeyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	apiPort, kinePort, err := b.instancePortsFor()
	if err != nil {
		return nil, err
	}
	in := &instance{dir: dir, rec: record{
		ID: spec.ID, Pool: spec.Pool, Host: b.hostID, KubernetesVersion: spec.KubernetesVersion,
		Components: opts.Components, Nodes: opts.Nodes, APIPort: apiPort, KinePort: kinePort,
		CreatedAt: time.Now().UTC(), Datastore: ds, CertValidity: spec.CertificateValidity,
	}, down: &b.down}
	admin, err := kubeconfig.ForClientCert(spec.ID, in.endpoint(), cp.CA.CertPEM, cp.Admin.CertPEM, cp.Admin.KeyPEM, pki.AdminUser)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(in.path("kubeconfigs", "admin.kubeconfig"), admin, 0o600); err != nil {
		return nil, err
	}
	if err := in.save(); err != nil {
		return nil, err
	}
	return in, nil
}

func loadInstance(dir string) (*instance, error) {
	data, err := os.ReadFile(filepath.Join(dir, "instance.json"))
	if err != nil {
		return nil, err
	}
	in := &instance{dir: dir}
	if err := json.Unmarshal(data, &in.rec); err != nil {
		return nil, err
	}
	if in.rec.ID == "" || in.rec.APIPort == 0 {
		return nil, errors.New("incomplete instance record")
	}
	return in, nil
}

// save writes the record atomically (write, then rename).
func (in *instance) save() error {
	data, err := json.MarshalIndent(in.rec, "", "  ")
	if err != nil {
		return err
	}
	tmp := in.path("instance.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, in.path("instance.json"))
}

// componentArgs returns the binary and arguments of one component. Every argument list names a
// path inside the instance directory, which is how processes are recognised after a restart.
func (in *instance) componentArgs(b *Backend, component string) (string, []string, error) {
	if component == "kine" {
		bin, err := b.tools.Newest("kine", "kine")
		args := []string{
			"--listen-address", "127.0.0.1:" + strconv.Itoa(in.rec.KinePort),
			"--metrics-bind-address", "0",
		}
		if in.rec.Datastore == nil {
			args = append(args, "--endpoint", "sqlite://"+in.path("data", "kine.db")+sqliteParams)
		}
		// On a shared datastore the endpoint (with its password) is KINE_ENDPOINT, see componentEnv.
		return bin, args, err
	}
	bin, err := b.binary(in.rec.KubernetesVersion, component)
	if err != nil {
		return "", nil, err
	}
	kc := in.path("kubeconfigs", "admin.kubeconfig")
	switch component {
	case ComponentAPIServer:
		audit, err := in.auditArgs()
		if err != nil {
			return "", nil, err
		}
		return bin, append([]string{
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(in.rec.APIPort),
			"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(in.rec.KinePort),
			"--client-ca-file=" + in.path("pki", "ca.crt"),
			"--tls-cert-file=" + in.path("pki", "apiserver.crt"),
			"--tls-private-key-file=" + in.path("pki", "apiserver.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + in.path("pki", "sa.pub"),
			"--service-account-signing-key-file=" + in.path("pki", "sa.key"),
			"--service-cluster-ip-range=10.0.0.0/24",
			"--authorization-mode=RBAC",
			// Loopback-only API servers: the endpoint reconciler would publish 127.0.0.1 as the
			// kubernetes Service endpoint and fight other instances; APF costs memory for nothing here.
			"--endpoint-reconciler-type=none",
			"--enable-priority-and-fairness=false",
			"--allow-privileged=true",
			"--profiling=false",
			"--storage-backend=etcd3",
			// No watch cache: each of the ~60 resources' caches keeps a watch on kine and
			// processes its progress notifications even when nothing changes, which was most
			// of an idle instance's CPU (2.0 → 0.74 % of a core per instance). Watches and
			// lists are served by kine directly, which a test cluster's few objects do not
			// notice.
			"--watch-cache=false",
		}, audit...), nil
	case ComponentControllerManager:
		return bin, []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--service-account-private-key-file=" + in.path("pki", "sa.key"),
			"--root-ca-file=" + in.path("pki", "ca.crt"),
			"--use-service-account-credentials=false",
			"--cluster-cidr=10.244.0.0/16",
			"--service-cluster-ip-range=10.0.0.0/24",
		}, nil
	case ComponentScheduler:
		return bin, []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
		}, nil
	case ComponentKwok:
		// Stages make kwok act as kubelets: nodes become Ready and keep heartbeating, pods go
		// Running (and Succeeded/deleted) at once. They ship with kwok; `make tools` copies them.
		stagesDir := filepath.Join(filepath.Dir(bin), "stages")
		args := []string{
			"--kubeconfig=" + kc,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--cidr=10.244.0.0/16",
			"--node-ip=127.0.0.1",
		}
		for _, s := range kwokStages {
			f := filepath.Join(stagesDir, s)
			if _, err := os.Stat(f); err != nil {
				return "", nil, fmt.Errorf("kwok stage %s is missing (run `make tools`)", f)
			}
			args = append(args, "--config="+f)
		}
		return bin, args, nil
	}
	return "", nil, fmt.Errorf("unknown component %q", component)
}

// sqliteParams are kine's SQLite settings: WAL, writers take the lock when they begin (no
// SQLITE_BUSY upgrading a reader), and synchronous=NORMAL — in WAL mode a commit then waits for
// no fsync (only checkpoints do), which survives a crash of kine or of kobe, not of the machine:
// what a disposable test cluster needs. It is kine's own default too; the DSN kobe passed before
// (synchronous left at SQLite's FULL, an fsync per commit) made the API server's bootstrap,
// some hundred writes, wait for the disk.
const sqliteParams = "?_journal=WAL&_synchronous=NORMAL&_txlock=immediate&_busy_timeout=30000"

// kwokStages are the kwok stage files (relative to its stages folder) an instance uses.
var kwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat/node-heartbeat.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

// processOrder is the start order; stop runs it backwards.
func (in *instance) processOrder() []string {
	order := []string{"kine", ComponentAPIServer}
	for _, c := range []string{ComponentControllerManager, ComponentScheduler, ComponentKwok} {
		if contains(in.rec.Components, c) {
			order = append(order, c)
		}
	}
	return order
}

// start launches kine and the API server now; the other components need a serving API server,
// so waitReady starts them once it answers.
func (in *instance) start(b *Backend) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.starting = true
	in.adopted = false // every process is this kobe's own from here on
	for _, c := range initialComponents {
		if c == ComponentAPIServer {
			in.waitKineListeningLocked()
		}
		if err := in.startComponentLocked(b, c); err != nil {
			return err
		}
	}
	in.ensureClientLocked()
	return nil
}

// kineListenWait bounds how long the API server's start waits for kine to listen.
const kineListenWait = 2 * time.Second

// waitKineListeningLocked waits (briefly: kine listens within ~20 ms of its start on SQLite)
// until kine accepts connections, or its process exited, or kineListenWait passed. An API server
// whose first dial of its datastore is refused waits for gRPC's reconnect backoff (1 s and
// more) before it tries again: on a busy host, where kine is slower to listen, that made cold
// starts seconds slower.
func (in *instance) waitKineListeningLocked() {
	deadline := time.Now().Add(kineListenWait)
	for time.Now().Before(deadline) && !portOpen(in.rec.KinePort) {
		for _, p := range in.procs {
			if p.name == "kine" && !p.alive() {
				return // reported by status
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runtimeEnv are the Go runtime settings of every process of an instance, chosen for many
// mostly idle instances on one host (measured in docs/performance.md, "Idle cost and cold start
// of a local instance"). GOGC=50: the heap grows to 1.5× the live data instead of 2×, ~35 MiB
// less per kube-apiserver, for a little more GC work while it is busy.
var runtimeEnv = []string{"GOGC=50"}

// kineRuntimeEnv is added for kine: GOMAXPROCS=1. An idle Go server spends most of its CPU in
// the scheduler looking for work across its Ps (timers, network polls); one P halves that. Not
// for kube-apiserver: on a loaded host the kernel shares the CPU among runnable threads, so an
// API server with one P got half the CPU of envtest's while starting (cold start 1.4× envtest's
// in `make bench` on a busy machine), and a leased one would be capped at one core.
var kineRuntimeEnv = []string{"GOMAXPROCS=1"}

// componentEnv is the environment added to a component's: the instance directory, by which
// kobe recognises a process whose command line does not name it (kine on a shared datastore),
// and kine's endpoint there.
func (in *instance) componentEnv(component string) ([]string, error) {
	env := append([]string{instanceDirEnv + "=" + in.dir}, runtimeEnv...)
	if component == "kine" {
		env = append(env, kineRuntimeEnv...)
	}
	if component == "kine" && in.rec.Datastore != nil {
		dsn, err := in.readDSN()
		if err != nil {
			return nil, err
		}
		env = append(env, "KINE_ENDPOINT="+dsn)
	}
	return env, nil
}

// trialArgs and trialEnv, by component, are appended to a component's arguments and
// environment. Nothing sets them in kobe: the idle benchmarks do (export_test.go), to measure one
// setting at a time against the defaults (docs/performance.md, "Each change, measured").
var trialArgs, trialEnv map[string][]string

func (in *instance) startComponentLocked(b *Backend, component string) error {
	bin, args, err := in.componentArgs(b, component)
	if err != nil {
		return err
	}
	env, err := in.componentEnv(component)
	if err != nil {
		return err
	}
	args = append(args, trialArgs[component]...)
	env = append(env, trialEnv[component]...)
	p, err := startProcess(component, bin, args, env, in.path("logs", component+".log"), in.exitWatcher)
	if err != nil {
		return err
	}
	in.procs = append(in.procs, p)
	in.joinFreezerLocked(p.pid)
	if !in.rec.ReadyOnce {
		in.bootCPUErr = ""
		if err := b.boot.join(in.dir, p.pid); err != nil {
			in.bootCPUErr = err.Error()
		}
	}
	return nil
}

// exitWatcher is told of every exit of the instance's processes. It reports to the backend's
// DownNotifier the exits kobe did not cause: of a process of the instance as it runs now (a
// stop clears in.procs before it clears stopping, and a sleep sets Sleeping), once the
// instance was ready (a boot's failures are the boot's to report).
func (in *instance) exitWatcher(p *process) {
	in.mu.Lock()
	current := false
	for _, q := range in.procs {
		current = current || q == p
	}
	report := current && in.down != nil && in.rec.ReadyOnce && !in.stopping && !in.rec.Sleeping && in.failure == ""
	id := in.rec.ID
	in.mu.Unlock()
	if report {
		in.down.report(id, fmt.Sprintf("its %s process ended: %s", p.name, p.exitMessage()))
	}
}

func (in *instance) hasProcess(component string) bool {
	for _, p := range in.procs {
		if p.name == component {
			return true
		}
	}
	return false
}

// adopt attaches to the processes an earlier kobe started for this instance.
func (in *instance) adopt() {
	in.mu.Lock()
	defer in.mu.Unlock()
	found := findProcesses(in.dir)
	for _, c := range in.processOrder() {
		pid, ok := found[binaryOf(c)]
		if !ok {
			continue
		}
		if p, ok := adoptProcess(c, pid, in.dir, in.exitWatcher); ok {
			in.procs = append(in.procs, p)
		}
	}
	in.adopted = true
	// The freezer cgroup outlives kobe: it says whether the instance is frozen.
	in.rec.Frozen = freezerState(in.freezerDir()) == "FROZEN"
	in.ensureClientLocked()
}

// initialComponents are the processes Create starts before it returns; the others need a
// serving API server and are started by waitReady.
var initialComponents = []string{"kine", ComponentAPIServer}

// finishStart completes a Create that a crash of kobe interrupted after the record was written:
// the initial processes that were never started (none runs for the instance) are started now.
// Only an instance that was never ready qualifies — nothing was handed out — and a process that
// this kobe started and saw exit is not restarted (that is reported, see status).
func (in *instance) finishStart(b *Backend) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.adopted || in.rec.ReadyOnce || in.rec.Sleeping || in.failure != "" || in.stopping {
		return nil
	}
	for _, c := range initialComponents {
		if in.hasProcess(c) {
			continue
		}
		if err := in.startComponentLocked(b, c); err != nil {
			return err
		}
		in.starting = true
	}
	return nil
}

func binaryOf(component string) string {
	switch component {
	case ComponentAPIServer:
		return "kube-apiserver"
	case ComponentControllerManager:
		return "kube-controller-manager"
	case ComponentScheduler:
		return "kube-scheduler"
	}
	return component // kine, kwok
}

func (in *instance) ensureClientLocked() {
	if in.client != nil {
		return
	}
	caPEM, err1 := os.ReadFile(in.path("pki", "ca.crt"))
	cert, err2 := tls.LoadX509KeyPair(in.path("pki", "admin.crt"), in.path("pki", "admin.key"))
	if err1 != nil || err2 != nil {
		return
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	in.client = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: false,
			MaxIdleConns:      2,
			IdleConnTimeout:   30 * time.Second,
		},
	}
}

func (in *instance) fail(msg string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failure = msg
}

// status derives the phase from the record and the processes. A process that died is reported,
// never restarted behind the operator's back.
func (in *instance) status() backends.InstanceStatus {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := backends.InstanceStatus{ID: in.rec.ID, Endpoint: in.endpoint(), Host: in.rec.Host, CreatedAt: in.rec.CreatedAt}
	switch {
	case in.failure != "":
		st.Phase, st.Message = backends.PhaseFailed, in.failure
	case in.rec.Sleeping:
		st.Phase = backends.PhaseSleeping
	default:
		if dead := in.deadProcessLocked(); dead != "" {
			st.Phase, st.Message = backends.PhaseUnhealthy, dead
			if !in.rec.ReadyOnce {
				st.Phase = backends.PhaseFailed
			}
		} else if in.rec.Frozen {
			st.Phase, st.Message = backends.PhaseFrozen, "its processes are frozen (cgroup freezer); Thaw resumes them"
		} else if in.rec.ReadyOnce && !in.starting && in.allStartedLocked() {
			st.Phase = backends.PhaseReady
		} else {
			st.Phase = backends.PhaseCreating
			if in.bootCPUErr != "" {
				st.Message = "booting at the normal CPU weight: " + in.bootCPUErr
			}
		}
	}
	return st
}

func (in *instance) allStartedLocked() bool {
	for _, c := range in.processOrder() {
		if !in.hasProcess(c) {
			return false
		}
	}
	return true
}

// deadProcessLocked describes the first expected process that is not running, with the tail of its log.
func (in *instance) deadProcessLocked() string {
	running := map[string]bool{}
	for _, p := range in.procs {
		if p.alive() {
			running[p.name] = true
			continue
		}
		return in.scrub(fmt.Sprintf("%s (pid %d) %s; last log lines: %s", p.name, p.pid, p.exitMessage(), tail(in.path("logs", p.name+".log"), 3)))
	}
	if in.rec.ReadyOnce && !in.starting {
		for _, c := range in.processOrder() {
			if !running[c] {
				return fmt.Sprintf("%s is not running", c)
			}
		}
	}
	if in.adopted && !in.rec.ReadyOnce && !in.stopping {
		// Found again after a restart before it was ever ready: Create had started (or, if it
		// was interrupted, its retry has started) kine and the API server. One missing will
		// never become ready: say so now rather than let a wait run into its timeout.
		for _, c := range initialComponents {
			if !running[c] {
				return fmt.Sprintf("%s is not running (no process found when kobe restarted before the instance was ever ready)", c)
			}
		}
	}
	return ""
}

// tail returns the last n non-empty lines of a file, joined on one line.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// readyz asks the API server whether it is ready.
func (in *instance) readyz(ctx context.Context) error {
	in.mu.Lock()
	c := in.client
	url := in.endpoint() + "/readyz"
	in.mu.Unlock()
	if c == nil {
		return errors.New("no admin client")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

func (in *instance) waitReady(ctx context.Context, b *Backend, progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	lastProgress := time.Time{}
	for {
		st := in.status()
		if st.Phase == backends.PhaseReady {
			return st, nil
		}
		if st.Phase == backends.PhaseFailed || st.Phase == backends.PhaseUnhealthy || st.Phase == backends.PhaseSleeping || st.Phase == backends.PhaseFrozen {
			return st, fmt.Errorf("instance %s is %s: %s", st.ID, st.Phase, st.Message)
		}
		if progress != nil && time.Since(lastProgress) > time.Second {
			progress(st)
			lastProgress = time.Now()
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := in.readyz(rctx)
		cancel()
		if err == nil {
			var done bool
			done, err = in.onAPIServerReady(ctx, b)
			if err != nil {
				in.fail(err.Error())
				continue
			}
			if done {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return in.status(), fmt.Errorf("instance %s not ready: %w (last check: %v)", st.ID, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// onAPIServerReady starts the components that need the API server and creates the fake nodes.
// It reports done once every fake node is Ready, and then records that the instance was ready.
func (in *instance) onAPIServerReady(ctx context.Context, b *Backend) (done bool, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, c := range in.processOrder() {
		if in.hasProcess(c) {
			continue
		}
		if err := in.startComponentLocked(b, c); err != nil {
			return false, err
		}
	}
	if contains(in.rec.Components, ComponentKwok) {
		if err := in.ensureFakeNodesLocked(ctx); err != nil {
			return false, err
		}
		ready, err := in.readyNodesLocked(ctx)
		if err != nil || ready < in.rec.Nodes {
			return false, err
		}
	}
	// Ready: its processes leave the low boot weight before anyone is handed the instance.
	if err := b.boot.leave(in.dir); err != nil {
		return false, err
	}
	in.starting = false
	if !in.rec.ReadyOnce {
		in.rec.ReadyOnce = true
		return true, in.save()
	}
	return true, nil
}

// stopAll stops every process of the instance (backwards) and any stray process that names
// the instance directory. grace is how long each process gets after SIGTERM before SIGKILL:
// Delete passes 0 (the data goes anyway), Sleep and rotation a few seconds so kine flushes.
func (in *instance) stopAll(grace time.Duration) error {
	in.mu.Lock()
	in.stopping = true
	procs := append([]*process(nil), in.procs...)
	in.mu.Unlock()
	var errs []error
	// A frozen process would not act on the signals below until thawed.
	if err := thawForStop(in.dir); err != nil {
		errs = append(errs, err)
	}
	in.mu.Lock()
	if in.rec.Frozen {
		in.rec.Frozen = false
		_ = in.save() // the directory may be on its way out (Delete); Sleep saves again
	}
	in.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].stop(grace); err != nil {
			errs = append(errs, err)
		}
	}
	if err := killByDir(in.dir); err != nil {
		errs = append(errs, err)
	}
	in.mu.Lock()
	in.procs = nil
	if in.client != nil {
		in.client.CloseIdleConnections()
	}
	in.mu.Unlock()
	return errors.Join(errs...)
}

// verifyGone checks that no process, port or file of the instance remains.
func (in *instance) verifyGone() error {
	if left := findProcesses(in.dir); len(left) > 0 {
		return fmt.Errorf("instance %s: processes remain: %v", in.rec.ID, left)
	}
	for _, port := range []int{in.rec.APIPort, in.rec.KinePort} {
		if portOpen(port) {
			return fmt.Errorf("instance %s: port %d still accepts connections", in.rec.ID, port)
		}
	}
	if _, err := os.Stat(in.dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("instance %s: directory %s remains", in.rec.ID, in.dir)
	}
	if _, err := os.Stat(in.freezerDir()); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("instance %s: freezer cgroup %s remains", in.rec.ID, in.freezerDir())
	}
	return nil
}
