// Package local is kobe's embedded default backend: an instance is a real kube-apiserver
// process on the kobe host, with its own kine datastore (SQLite file) and kobe-issued PKI,
// optionally with kube-controller-manager, kube-scheduler and kwok fake nodes so that workloads
// get scheduled and "run".
//
// Why kine over SQLite rather than etcd: an instance's whole datastore is one file in its
// directory, so deleting, snapshotting (golden images) or moving an instance is a file
// operation, and the same kine can later point at PostgreSQL for shared datastores. Start-up
// and memory are the same as etcd's here (~45 MiB, apiserver ready in ~2 s).
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
)

// Name is spec.backend.type for this backend.
const Name = "local"

func init() {
	backends.Register(backends.Factory{
		Name:        Name,
		Description: "kube-apiserver + kine (SQLite, or a shared PostgreSQL/MySQL/NATS datastore) processes on the kobe host, kobe-issued PKI",
		New: func(env backends.Environment) (backends.RuntimeBackend, error) {
			shares, err := BootCPUSharesFromEnv()
			if err != nil {
				return nil, fmt.Errorf("local backend: %w", err)
			}
			return New(Config{StateDir: env.StateDir, HostID: env.HostID, ToolsDir: DefaultToolsDir(), SecretsDir: os.Getenv("KOBE_SECRETS_DIR"),
				BootCPUShares: shares})
		},
		Prototype: &Backend{},
		Traits:    backends.Traits{Datastore: true, Golden: true, Sleep: true, PreparedCredentials: true},
		Options:   poolOptions,
	})
}

// poolOptions is the registration's Options: spec.backend.local, with upstream's
// spec.backend.datastore given as spec.backend.local.datastore, the field the backend reads
// (the same shape). Both at once would say the same thing twice, and could disagree: refused.
func poolOptions(sec backends.PoolSection) (json.RawMessage, error) {
	if len(sec.Datastore) == 0 {
		return sec.Own, nil
	}
	out, err := sec.Fields()
	if err != nil {
		return nil, err
	}
	if _, ok := out["datastore"]; ok {
		return nil, fmt.Errorf("spec.backend.datastore: given twice (%s.datastore too): keep one", sec.Field)
	}
	out["datastore"] = sec.Datastore
	return json.Marshal(out)
}

// Component names accepted in spec.backend.local.components.
const (
	ComponentAPIServer         = "apiserver"
	ComponentControllerManager = "controller-manager"
	ComponentScheduler         = "scheduler"
	ComponentKwok              = "kwok"
)

var knownComponents = []string{ComponentAPIServer, ComponentControllerManager, ComponentScheduler, ComponentKwok}

// Options is spec.backend.local of a pool.
type Options struct {
	// Components to run; default [apiserver]. kwok needs controller-manager and scheduler.
	Components []string `json:"components,omitempty"`
	// Nodes is the number of kwok fake nodes (default 1 when kwok runs).
	Nodes int `json:"nodes,omitempty"`
	// Datastore puts kine on the instance's own database of a shared server (see
	// DatastoreOptions); without it kine keeps the instance's data in a SQLite file.
	Datastore *DatastoreOptions `json:"datastore,omitempty"`
}

// MaxNodes bounds fake nodes per instance.
const MaxNodes = 100

// Config configures the backend for one host.
type Config struct {
	StateDir string
	HostID   string
	ToolsDir string
	// SecretsDir is where spec.backend.local.datastore.secretRef is looked up
	// (<SecretsDir>/<secretRef>/<secretKey>); default <StateDir>/secrets.
	SecretsDir string
	// BootCPUShares is the CPU weight (cgroup v1 cpu.shares, against 1024 for every other task)
	// of instances until they are first Ready (cpuweight.go); 0: they boot at the normal weight.
	// kobe takes it from $KOBE_LOCAL_BOOT_CPU_SHARES, default 256.
	BootCPUShares int
}

// Backend manages the local instances of one host.
type Backend struct {
	root       string // <state-dir>/local/instances
	hostID     string
	tools      Tools
	secretsDir string
	boot       bootCPU

	mu        sync.Mutex
	instances map[string]*instance
	// locks serialises Create/Delete (and sleep, freeze, rotation) per id.
	locks backends.InstanceLocks
	// stopped refuses new Creates once StopCreating ran; creates counts those in flight.
	stopped bool
	creates sync.WaitGroup
	// down is told of the exits of instances' processes that kobe did not cause (DownNotifier).
	down downNotice
}

// downNotice holds the function NotifyDown set.
type downNotice struct {
	mu sync.Mutex
	fn func(id, message string)
}

func (d *downNotice) report(id, message string) {
	d.mu.Lock()
	fn := d.fn
	d.mu.Unlock()
	if fn != nil {
		fn(id, message)
	}
}

// NotifyDown implements backends.DownNotifier: fn is called when a process of a Ready
// instance exits without kobe stopping it (killed, crashed), within moments for a process this
// kobe started and within half a second for one it adopted after a restart.
func (b *Backend) NotifyDown(fn func(id, message string)) {
	b.down.mu.Lock()
	defer b.down.mu.Unlock()
	b.down.fn = fn
}

var (
	_ backends.RuntimeBackend   = (*Backend)(nil)
	_ backends.HostBound        = (*Backend)(nil)
	_ backends.LeasePreparer    = (*Backend)(nil)
	_ backends.Sleeper          = (*Backend)(nil)
	_ backends.ActivityReporter = (*Backend)(nil)
	_ backends.CertManager      = (*Backend)(nil)
	_ backends.Preflighter      = (*Backend)(nil)
	_ backends.Freezer          = (*Backend)(nil)
	_ backends.DownNotifier     = (*Backend)(nil)
)

// New opens the backend's state and re-adopts the instances an earlier kobe left running.
func New(cfg Config) (*Backend, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("local backend: no state directory")
	}
	b := &Backend{
		root:       filepath.Join(cfg.StateDir, "local", "instances"),
		hostID:     cfg.HostID,
		tools:      Tools{Dir: cfg.ToolsDir},
		secretsDir: cfg.SecretsDir,
		boot:       newBootCPU(cfg.BootCPUShares),
		instances:  map[string]*instance{},
	}
	if b.secretsDir == "" {
		b.secretsDir = filepath.Join(cfg.StateDir, "secrets")
	}
	if err := os.MkdirAll(b.root, 0o700); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	if err := b.adoptAll(); err != nil {
		return nil, err
	}
	removeEmptyFreezers()
	b.boot.sweep()
	return b, nil
}

// Name implements backends.RuntimeBackend.
func (b *Backend) Name() string { return Name }

// HostID implements backends.HostBound: instances live on this host only.
func (b *Backend) HostID() string { return b.hostID }

// Tools returns where the backend finds its binaries.
func (b *Backend) Tools() Tools { return b.tools }

var idPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ParseOptions decodes spec.backend.local strictly: unknown fields are errors.
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return o, fmt.Errorf("spec.backend.local: %v", err)
		}
	}
	if len(o.Components) == 0 {
		o.Components = []string{ComponentAPIServer}
	}
	return o, nil
}

// Validate implements backends.RuntimeBackend.
func (b *Backend) Validate(spec backends.InstanceSpec) error {
	if !idPattern.MatchString(spec.ID) || len(spec.ID) > 63 {
		return fmt.Errorf("instance id %q: must be a DNS label (lowercase letters, digits, '-'; at most 63)", spec.ID)
	}
	o, err := ParseOptions(spec.Options)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, c := range o.Components {
		if !contains(knownComponents, c) {
			return fmt.Errorf("spec.backend.local.components[%d]: unknown component %q (known: %s)", i, c, strings.Join(knownComponents, ", "))
		}
		if seen[c] {
			return fmt.Errorf("spec.backend.local.components[%d]: %q listed twice", i, c)
		}
		seen[c] = true
	}
	if !seen[ComponentAPIServer] {
		return fmt.Errorf("spec.backend.local.components: must include %q", ComponentAPIServer)
	}
	if seen[ComponentKwok] && (!seen[ComponentScheduler] || !seen[ComponentControllerManager]) {
		return fmt.Errorf("spec.backend.local.components: %q needs %q and %q (kwok does not schedule pods)", ComponentKwok, ComponentScheduler, ComponentControllerManager)
	}
	if o.Nodes < 0 || o.Nodes > MaxNodes {
		return fmt.Errorf("spec.backend.local.nodes: %d is out of range 0..%d", o.Nodes, MaxNodes)
	}
	if o.Nodes > 0 && !seen[ComponentKwok] {
		return fmt.Errorf("spec.backend.local.nodes: fake nodes need the %q component", ComponentKwok)
	}
	if o.Datastore != nil {
		if err := o.Datastore.validate(); err != nil {
			return err
		}
	}
	if spec.KubernetesVersion == "" {
		return errors.New("spec.cluster.version: required for the local backend")
	}
	versions := b.tools.KubernetesVersions()
	if !contains(versions, spec.KubernetesVersion) {
		built := "none — run `make tools`"
		if len(versions) > 0 {
			built = strings.Join(versions, ", ")
		}
		return fmt.Errorf("spec.cluster.version: Kubernetes %q is not available to the local backend (built: %s)", spec.KubernetesVersion, built)
	}
	for _, c := range o.Components {
		if _, err := b.binary(spec.KubernetesVersion, c); err != nil {
			return err
		}
	}
	if _, err := b.tools.Newest("kine", "kine"); err != nil {
		return err
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (b *Backend) binary(version, component string) (string, error) {
	switch component {
	case ComponentAPIServer:
		return b.tools.Kubernetes(version, "kube-apiserver")
	case ComponentControllerManager:
		return b.tools.Kubernetes(version, "kube-controller-manager")
	case ComponentScheduler:
		return b.tools.Kubernetes(version, "kube-scheduler")
	case ComponentKwok:
		return b.tools.Newest("kwok", "kwok")
	}
	return "", fmt.Errorf("unknown component %q", component)
}

func (b *Backend) get(id string) (*instance, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	in, ok := b.instances[id]
	return in, ok
}

// Create implements backends.RuntimeBackend. It writes the instance's PKI and record, starts
// its processes and returns while the API server starts.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.InstanceStatus, error) {
	if err := b.Validate(spec); err != nil {
		return backends.InstanceStatus{}, err
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return backends.InstanceStatus{}, errors.New("the local backend is stopping: it creates no more instances")
	}
	b.creates.Add(1)
	b.mu.Unlock()
	defer b.creates.Done()
	unlock := b.locks.Lock(spec.ID)
	defer unlock()
	if in, ok := b.get(spec.ID); ok {
		// Idempotent: the same id never makes a second instance. A retry after a crash of
		// kobe in the middle of the first Create finishes what that one started.
		if in.rec.Datastore != nil && !in.rec.ReadyOnce {
			if _, err := in.readDSN(); err != nil {
				if err := in.provisionDatastore(ctx, b); err != nil {
					return in.status(), err
				}
			}
		}
		if err := in.finishStart(b); err != nil {
			in.fail(err.Error())
		}
		return in.status(), nil
	}
	opts, _ := ParseOptions(spec.Options)
	if opts.Nodes == 0 && contains(opts.Components, ComponentKwok) {
		opts.Nodes = 1
	}
	var ds *datastoreRecord
	if opts.Datastore != nil {
		// The secret and its URL are judged before anything is written.
		s, err := b.server(opts.Datastore.SecretRef, opts.Datastore.key())
		if err != nil {
			return backends.InstanceStatus{}, err
		}
		name, err := s.Name(spec.ID)
		if err != nil {
			return backends.InstanceStatus{}, backends.InvalidSpec(err)
		}
		if err := goldenSupported(s, opts.Datastore); err != nil {
			return backends.InstanceStatus{}, err
		}
		if err := s.Ping(ctx); err != nil {
			return backends.InstanceStatus{}, err
		}
		ds = &datastoreRecord{SecretRef: opts.Datastore.SecretRef, SecretKey: opts.Datastore.key(), Driver: s.Driver(), Name: name,
			Template: goldenTemplateOf(spec, opts.Datastore)}
	}
	dir := filepath.Join(b.root, spec.ID)
	in, err := b.newInstance(dir, spec, opts, ds)
	if err != nil {
		_ = os.RemoveAll(dir) // a half-written instance is removed, never left behind
		return backends.InstanceStatus{}, err
	}
	if ds != nil {
		// The record names the database before it exists, so that a crash here leaves
		// something Delete (or a retried Create) knows how to finish.
		if err := in.provisionDatastore(ctx, b); err != nil {
			if derr := b.dropDatastore(context.WithoutCancel(ctx), in.rec); derr != nil {
				// Kept as a Failed instance: its record says what to drop, and Delete retries.
				in.fail(err.Error())
				b.mu.Lock()
				b.instances[spec.ID] = in
				b.mu.Unlock()
				return in.status(), fmt.Errorf("%w; and cleaning up: %v (the instance is kept, Failed, so that Delete can retry)", err, derr)
			}
			_ = os.RemoveAll(dir)
			return backends.InstanceStatus{}, err
		}
	}
	b.mu.Lock()
	b.instances[spec.ID] = in
	b.mu.Unlock()
	if err := in.start(b); err != nil {
		in.fail(err.Error())
	}
	return in.status(), nil
}

// Status implements backends.RuntimeBackend.
func (b *Backend) Status(ctx context.Context, id string) (backends.InstanceStatus, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.InstanceStatus{ID: id, Phase: backends.PhaseGone}, backends.ErrNotFound
	}
	return in.status(), nil
}

// WaitReady implements backends.RuntimeBackend.
func (b *Backend) WaitReady(ctx context.Context, id string, progress func(backends.InstanceStatus)) (backends.InstanceStatus, error) {
	in, ok := b.get(id)
	if !ok {
		return backends.InstanceStatus{ID: id, Phase: backends.PhaseGone}, backends.ErrNotFound
	}
	return in.waitReady(ctx, b, progress)
}

// Delete implements backends.RuntimeBackend: stop every process, remove the data, and verify
// that no process, listening port or file of the instance remains.
func (b *Backend) Delete(ctx context.Context, id string) error {
	unlock := b.locks.Lock(id)
	defer unlock()
	in, ok := b.get(id)
	dir := filepath.Join(b.root, id)
	if ok {
		if err := in.stopAll(0); err != nil {
			return err
		}
		// The database goes before the directory that says where it is: if dropping fails,
		// the instance stays (stopped) and the next Delete tries again.
		if err := b.dropDatastore(ctx, in.rec); err != nil {
			return err
		}
		b.mu.Lock()
		delete(b.instances, id)
		b.mu.Unlock()
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	if err := removeFreezer(dir); err != nil {
		return err
	}
	if err := b.boot.remove(dir); err != nil {
		return err
	}
	if ok {
		return in.verifyGone()
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("instance directory %s still exists", dir)
	}
	return nil
}

// StopCreating refuses every Create from now on and waits for those in flight to return, so
// that InstanceIDs then lists every instance that has (or will have) processes: what a process
// that deletes its instances at stop (an ephemeral `kobe dev`) must call first. Before it, a
// Create that had not yet recorded its instance when the instances were listed started its
// processes after they were deleted, and they outlived the run.
func (b *Backend) StopCreating() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.creates.Wait()
}

// InstanceIDs lists the instances this backend holds (for reconciliation and tests).
func (b *Backend) InstanceIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id := range b.instances {
		out = append(out, id)
	}
	return out
}

// adoptAll re-reads every instance directory. Instances whose processes still run are adopted
// as they are; the others are reported Unhealthy (not silently restarted) until deleted or resumed.
func (b *Backend) adoptAll() error {
	entries, err := os.ReadDir(b.root)
	if err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		in, err := loadInstance(filepath.Join(b.root, e.Name()))
		if err != nil {
			// An instance whose record was never written completely is debris of a crash in
			// Create: nothing was handed out, so remove it rather than leak it.
			_ = thawForStop(filepath.Join(b.root, e.Name()))
			_ = killByDir(filepath.Join(b.root, e.Name()))
			_ = os.RemoveAll(filepath.Join(b.root, e.Name()))
			_ = removeFreezer(filepath.Join(b.root, e.Name()))
			_ = b.boot.remove(filepath.Join(b.root, e.Name()))
			continue
		}
		in.down = &b.down
		in.adopt()
		if in.rec.ReadyOnce {
			// kobe stopped between the instance's Ready and its leaving the boot weight.
			// One that cannot leave it must not be handed out throttled: it is reported Failed.
			if err := b.boot.leave(in.dir); err != nil {
				in.fail(err.Error())
			}
		}
		b.instances[in.rec.ID] = in
	}
	return nil
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
