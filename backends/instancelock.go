package backends

import "sync"

// InstanceLocks serialises the calls that change one instance (Create, Delete, Sleep, …) of a
// backend: two activities may reach the same instance at once (a retry beside the attempt it
// replaces, a teardown beside a late create), while calls on different instances must not wait
// for each other. The zero value is ready to use.
type InstanceLocks struct {
	mu   sync.Mutex
	byID map[string]*sync.Mutex
}

// Lock waits until no other caller holds id's lock and returns the function that releases it.
func (l *InstanceLocks) Lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.byID == nil {
		l.byID = map[string]*sync.Mutex{}
	}
	m, ok := l.byID[id]
	if !ok {
		m = &sync.Mutex{}
		l.byID[id] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}
