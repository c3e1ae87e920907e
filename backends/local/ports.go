package local

import "github.com/kunobi-ninja/kobe/internal/loopback"

// instancePortsFor returns an API server port and a kine port for a new instance of b: outside
// the kernel's ephemeral range (internal/loopback says why), and not a port another instance of
// b owns, running or asleep.
func (b *Backend) instancePortsFor() (apiPort, kinePort int, err error) {
	b.mu.Lock()
	used := map[int]bool{}
	for _, in := range b.instances {
		used[in.rec.APIPort], used[in.rec.KinePort] = true, true
	}
	b.mu.Unlock()
	ps, err := loopback.Take(2, func(p int) bool { return used[p] })
	if err != nil {
		return 0, 0, err
	}
	return ps[0], ps[1], nil
}
