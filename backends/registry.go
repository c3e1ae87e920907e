package backends

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory creates a backend. Backends register one from their package's init.
type Factory struct {
	Name        string
	Description string
	// New builds the backend for a host; env carries host-level settings (state dir, tools).
	New func(env Environment) (RuntimeBackend, error)
	// Prototype is a zero-cost value of the backend type, used to read its capabilities
	// without starting anything.
	Prototype RuntimeBackend
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

// Register adds a backend factory; registering a name twice panics (a programming error).
func Register(f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[f.Name]; dup {
		panic(fmt.Sprintf("backend %q registered twice", f.Name))
	}
	registry[f.Name] = f
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
