package backends

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory is a backend's registration: everything kobe's other parts need to know of it, so
// that adding a backend is adding its package (docs/backends/adding.md). Backends register one
// from their package's init.
type Factory struct {
	Name        string
	Description string
	// New builds the backend for a host; env carries host-level settings (state dir, tools).
	New func(env Environment) (RuntimeBackend, error)
	// Prototype is a zero-cost value of the backend type, used to read its capabilities
	// without starting anything.
	Prototype RuntimeBackend
	// Traits are what the backend declares about the pools it serves (docs/backends/contract.md).
	Traits Traits
	// Options turns the pool manifest's parts this backend reads into its instances'
	// InstanceSpec.Options: the same JSON for the same manifest, since a change of it is drift.
	// It may refuse what it reads (errors name the field); the rest of the judgement is
	// Validate's. Nil: the backend's own section spec.backend.<name>, unchanged.
	Options func(PoolSection) (json.RawMessage, error)
}

// Traits of a backend. The pool manifest reads them to know which of its shared parts a backend
// reads (the others are refused by name) and where its members run; Register checks the ones an
// optional interface also shows (Golden, Sleep, PreparedCredentials) against the Prototype.
type Traits struct {
	// HostCluster: the members run in a host cluster, which a pool may name
	// (spec.backend.hostCluster): its members then go to the workers of that host cluster.
	HostCluster bool
	// Hosted: each member is pods of the host cluster, shaped by spec.cluster (servers, agents,
	// serverArgs, persistence, expose) and spec.resources, which PoolSection then carries.
	// A hosted backend runs in a host cluster (HostCluster).
	Hosted bool
	// Datastore: the backend reads upstream's spec.backend.datastore (a shared datastore),
	// which PoolSection then carries.
	Datastore bool
	// Golden: members on a shared datastore can start from the pool's golden template
	// (GoldenTemplater).
	Golden bool
	// Sleep: instances can sleep and wake with their data (Sleeper); spec.sleep is refused
	// for the other backends.
	Sleep bool
	// PreparedCredentials: a member's lease credential is prepared before any lease claims
	// it, so that a warm bind does not call the member (LeasePreparer).
	PreparedCredentials bool
}

// PoolSection is what a pool's manifest holds for its backend: the backend's own section, and
// the shared parts of the manifest its Traits say it reads (nil otherwise, and when absent).
type PoolSection struct {
	// Field is where Own is in the manifest ("spec.backend.<name>"), for errors.
	Field string
	// Own is spec.backend.<name>, as given.
	Own json.RawMessage
	// Datastore is spec.backend.datastore (Traits.Datastore).
	Datastore json.RawMessage
	// Cluster is the shape of spec.cluster: the fields among servers, agents, serverArgs,
	// persistence and expose that are set, as one JSON object (Traits.Hosted).
	Cluster json.RawMessage
	// Resources is spec.resources (Traits.Hosted).
	Resources json.RawMessage
}

// Fields is the backend's own section as an object's fields, to add to: empty when the
// section is absent, an error naming it when it is not an object.
func (s PoolSection) Fields() (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if len(s.Own) > 0 && string(s.Own) != "null" {
		if err := json.Unmarshal(s.Own, &out); err != nil {
			return nil, fmt.Errorf("%s: must be an object", s.Field)
		}
	}
	return out, nil
}

// PoolOptions is the InstanceSpec.Options of a pool's members: the backend's Options of sec,
// or its own section when it has none.
func (f Factory) PoolOptions(sec PoolSection) (json.RawMessage, error) {
	if f.Options == nil {
		return sec.Own, nil
	}
	return f.Options(sec)
}

// Environment is what a backend gets from the process that runs it.
type Environment struct {
	// StateDir is where host-local backends keep instance data.
	StateDir string
	// HostID names this kobe host.
	HostID string
	// HostKubeconfig is the kubeconfig file of the host cluster of the backends that put their
	// instances into one (k3s, k0s, vcluster): the worker's --host-kubeconfig. Empty: the
	// backend looks at $KOBE_HOST_KUBECONFIG, then at its in-cluster config.
	HostKubeconfig string
}

var (
	mu       sync.RWMutex
	registry = map[string]Factory{}
)

// Register adds a backend factory. A name registered twice, or a registration that says
// something its Prototype contradicts, panics: it is a programming error, found by any test
// that imports the backend.
func Register(f Factory) {
	if err := f.check(); err != nil {
		panic(fmt.Sprintf("backend %q: %v", f.Name, err))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[f.Name]; dup {
		panic(fmt.Sprintf("backend %q registered twice", f.Name))
	}
	registry[f.Name] = f
}

// check is what Register requires of a registration.
func (f Factory) check() error {
	if f.Name == "" || f.New == nil || f.Prototype == nil {
		return errors.New("a registration needs a Name, New and a Prototype")
	}
	if got := f.Prototype.Name(); got != f.Name {
		return fmt.Errorf("its Prototype's Name() is %q", got)
	}
	if f.Traits.Hosted && !f.Traits.HostCluster {
		return errors.New("a Hosted backend runs in a host cluster: declare HostCluster too")
	}
	_, golden := f.Prototype.(GoldenTemplater)
	_, sleeps := f.Prototype.(Sleeper)
	_, prepares := f.Prototype.(LeasePreparer)
	for _, t := range []struct {
		trait, iface        string
		declared, implement bool
	}{
		{"Golden", "GoldenTemplater", f.Traits.Golden, golden},
		{"Sleep", "Sleeper", f.Traits.Sleep, sleeps},
		{"PreparedCredentials", "LeasePreparer", f.Traits.PreparedCredentials, prepares},
	} {
		switch {
		case t.declared && !t.implement:
			return fmt.Errorf("it declares Traits.%s but its Prototype is no %s", t.trait, t.iface)
		case t.implement && !t.declared:
			return fmt.Errorf("its Prototype is a %s: declare Traits.%s", t.iface, t.trait)
		}
	}
	return nil
}

// Lookup returns the factory of a backend by name.
func Lookup(name string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the backends compiled in, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NamesWith lists, sorted, the backends compiled in whose traits satisfy has: the
// manifest names them when it refuses a part another backend does not read.
func NamesWith(has func(Traits) bool) []string {
	var out []string
	for _, n := range Names() {
		if f, _ := Lookup(n); has(f.Traits) {
			out = append(out, n)
		}
	}
	return out
}

// Capabilities of a backend, for the matrix.
type Capabilities struct {
	Backend     string `json:"backend"`
	Contract    string `json:"contract"`
	Description string `json:"description"`
	Sleep       bool   `json:"sleep"`
	// SleepRequires says what an instance's spec needs to sleep ("" for every instance).
	SleepRequires string `json:"sleepRequires,omitempty"`
	Freeze        bool   `json:"freeze"`
	CertRotate    bool   `json:"certRotation"`
	HostBound     bool   `json:"hostBound"`
	// Activity: the backend observes the use of lease kubeconfigs (ActivityReporter); without
	// it, spec.sleep.afterInactivity counts only requests through kobe.
	Activity bool `json:"activity"`
	// WarmBind: the backend prepares a member's lease credential before any lease claims it
	// (LeasePreparer), so a warm bind answers without calling the member.
	WarmBind bool `json:"warmBind"`
}

// CapabilitiesOf reads a backend's optional capabilities from the interfaces it implements.
func CapabilitiesOf(name, description string, b RuntimeBackend) Capabilities {
	c := Capabilities{Backend: name, Contract: ContractVersion, Description: description}
	_, c.Sleep = b.(Sleeper)
	if r, ok := b.(SleepRequirement); ok && c.Sleep {
		c.SleepRequires = r.SleepRequirement()
	}
	_, c.Freeze = b.(Freezer)
	_, c.CertRotate = b.(CertManager)
	_, c.HostBound = b.(HostBound)
	_, c.Activity = b.(ActivityReporter)
	_, c.WarmBind = b.(LeasePreparer)
	return c
}

// Matrix returns the capabilities of every backend compiled in, sorted by name.
func Matrix() []Capabilities {
	var out []Capabilities
	for _, n := range Names() {
		f, _ := Lookup(n)
		out = append(out, CapabilitiesOf(f.Name, f.Description, f.Prototype))
	}
	return out
}

// Resolve returns the factory named by a pool's spec.backend.type, or an error that names the
// field and lists the backends compiled in.
func Resolve(backendType string) (Factory, error) {
	if backendType == "" {
		return Factory{}, fmt.Errorf("spec.backend.type: required (compiled in: %s)", strings.Join(Names(), ", "))
	}
	f, ok := Lookup(backendType)
	if !ok {
		return Factory{}, fmt.Errorf("spec.backend.type: unknown backend %q (compiled in: %s)", backendType, strings.Join(Names(), ", "))
	}
	return f, nil
}
