// Package backends defines the runtime backend contract and the registry of backends compiled
// into this binary. A pool names its backend with spec.backend.type.
package backends

import (
	"sort"
	"sync"
)

var (
	mu       sync.RWMutex
	registry = map[string]struct{}{}
)

// RegisterName records that a backend is compiled in. Backend packages call it from init.
func RegisterName(name string) {
	mu.Lock()
	defer mu.Unlock()
	registry[name] = struct{}{}
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
