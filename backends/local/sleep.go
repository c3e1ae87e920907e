package local

import (
	"context"
	"fmt"
	"time"

	"github.com/kunobi-ninja/kobe/backends"
)

// Sleep implements backends.Sleeper: every process stops, the datastore stays on disk.
func (b *Backend) Sleep(ctx context.Context, id string) error {
	unlock := b.locks.Lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	if err := in.stopAll(10 * time.Second); err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stopping = false
	in.rec.Sleeping = true
	return in.save()
}

// Resume implements backends.Sleeper: the processes start again on the same ports and data.
// The caller waits for readiness with WaitReady.
func (b *Backend) Resume(ctx context.Context, id string) error {
	unlock := b.locks.Lock(id)
	defer unlock()
	in, ok := b.get(id)
	if !ok {
		return backends.ErrNotFound
	}
	in.mu.Lock()
	if len(in.procs) > 0 && !in.rec.Sleeping {
		in.mu.Unlock()
		return nil // already awake
	}
	in.rec.Sleeping = false
	in.failure = ""
	err := in.save()
	in.mu.Unlock()
	if err != nil {
		return err
	}
	for _, port := range []int{in.rec.APIPort, in.rec.KinePort} {
		if portOpen(port) {
			return fmt.Errorf("instance %s cannot resume: port %d is taken by another process", id, port)
		}
	}
	return in.start(b)
}
