package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/internal/cmd/iostreams"
)

// Final reports whether a lease phase is final: it will never become Bound. Besides kobe's
// ended phases, upstream's Recycling and Quarantined are final for a waiting client.
func Final(phase api.LeasePhase) bool {
	return phase.Ended() || phase == "Recycling" || phase == "Quarantined"
}

// LeaseEndedError is a lease that reached a final phase instead of Bound.
type LeaseEndedError struct{ Lease api.Lease }

func (e *LeaseEndedError) Error() string {
	msg := fmt.Sprintf("lease %s is %s", e.Lease.ID, e.Lease.Phase)
	if e.Lease.Reason != "" {
		msg += " (reason " + string(e.Lease.Reason) + ")"
	}
	return msg
}

// WaitTimeoutError is a lease still not Bound when the wait ended.
type WaitTimeoutError struct {
	Lease   api.Lease
	Timeout time.Duration
}

func (e *WaitTimeoutError) Error() string {
	return fmt.Sprintf("lease %s is still %s after --wait-timeout %s (%s)", e.Lease.ID, e.Lease.Phase, e.Timeout, Waiting(e.Lease))
}

// WaitOptions tune WaitForLease.
type WaitOptions struct {
	// Timeout bounds the whole wait.
	Timeout time.Duration
	// Poll is how long each GET asks the server to hold the request (default 30s).
	Poll time.Duration
	// MinInterval is the least time between two GETs, in case a server answers at once
	// (default 1s); it is also the pause after a transient error.
	MinInterval time.Duration
	// IO receives a progress line on stderr while the lease is Pending, when stderr is a terminal.
	IO *iostreams.IOStreams
	// Started is when the request was made (for the elapsed time shown); default now.
	Started time.Time
}

// WaitForLease long-polls GET /v1/leases/{id} until the lease is Bound, reaches a final phase
// (LeaseEndedError), or the timeout passes (WaitTimeoutError). Transient failures (the API
// unreachable, 5xx) are retried until then; other API errors end the wait.
func WaitForLease(ctx context.Context, c *api.Client, l api.Lease, o WaitOptions) (api.Lease, error) {
	if o.Poll <= 0 {
		o.Poll = 30 * time.Second
	}
	if o.MinInterval <= 0 {
		o.MinInterval = time.Second
	}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	deadline := time.Now().Add(o.Timeout)
	p := StartProgress(o.IO, o.Started)
	defer p.Stop()
	for {
		switch {
		case l.Phase == api.LeaseBound:
			return l, nil
		case Final(l.Phase):
			return l, &LeaseEndedError{Lease: l}
		}
		p.Set(Waiting(l))
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return l, &WaitTimeoutError{Lease: l, Timeout: o.Timeout}
		}
		t0 := time.Now()
		next, err := c.GetLease(ctx, l.ID, min(o.Poll, remaining))
		if ctx.Err() != nil {
			return l, ctx.Err()
		}
		if err != nil {
			var apiErr *api.Error
			if errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
				return l, err
			}
			p.Set(fmt.Sprintf("%s; API unreachable, retrying (%v)", Waiting(l), err))
		} else {
			l = next
		}
		// A server that does not hold the request (or an error) must not make this a busy loop.
		if l.Phase != api.LeaseBound && !Final(l.Phase) {
			if pause := o.MinInterval - time.Since(t0); pause > 0 {
				select {
				case <-ctx.Done():
					return l, ctx.Err()
				case <-time.After(min(pause, max(time.Until(deadline), 0))):
				}
			}
		}
	}
}

// Waiting describes a Pending lease: "queued #3 in pool ci" or "waiting for a cluster in pool ci".
func Waiting(l api.Lease) string {
	pool := l.Pool
	if pool == "" {
		pool = l.Profile
	}
	if l.QueuePosition > 0 {
		return fmt.Sprintf("queued #%d in pool %s", l.QueuePosition, pool)
	}
	return "waiting for a cluster in pool " + pool
}

// Progress is a one-line status on a terminal's stderr, redrawn every second with the time
// elapsed ("queued #3 in pool ci, 12s"). It does nothing when stderr is not a terminal.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	text    string
	started time.Time
	stop    chan struct{}
	done    chan struct{}
	drawn   bool
}

// StartProgress starts a progress line (nil, which is valid, when stderr is not a terminal).
func StartProgress(s *iostreams.IOStreams, started time.Time) *Progress {
	if s == nil || !s.IsStderrTTY() {
		return nil
	}
	p := &Progress{w: s.ErrOut, started: started, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// Set changes the text and redraws the line.
func (p *Progress) Set(text string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.text = text
	p.mu.Unlock()
	p.draw()
}

func (p *Progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.text == "" {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s, %s", p.text, HumanDuration(time.Since(p.started)))
	p.drawn = true
}

// Stop ends the redraws and clears the line.
func (p *Progress) Stop() {
	if p == nil {
		return
	}
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
