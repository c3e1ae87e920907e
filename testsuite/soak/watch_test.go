package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// leaseTrack is one lease as the store watcher saw it.
type leaseTrack struct {
	Pool     string
	Created  time.Time // the row's created_at: its admission
	Phase    string    // the last phase seen
	Reason   string
	Instance string
	// LeftPending is when it was first seen Bound or ended; TerminalAt when first seen ended.
	LeftPending time.Time
	Terminal    string
	TerminalAt  time.Time
}

// instTrack is one instance as the store watcher saw it.
type instTrack struct {
	Phase    string
	LastSeen time.Time
}

// watcher samples the store's leases and instances every second from before the load until
// after the drain: the new invariants of issue 39 are computed from what it saw.
type watcher struct {
	quit chan struct{}
	done chan struct{}

	leases     map[string]*leaseTrack
	instances  map[string]*instTrack
	violations []string
	samples    int
}

func (e *env) startWatcher() *watcher {
	w := &watcher{quit: make(chan struct{}), done: make(chan struct{}), leases: map[string]*leaseTrack{}, instances: map[string]*instTrack{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			w.sample(e)
			select {
			case <-w.quit:
				w.sample(e)
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *watcher) stop() {
	close(w.quit)
	<-w.done
}

var storeTerminal = map[string]bool{"Released": true, "Expired": true, "Failed": true}

func (w *watcher) sample(e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := e.db.QueryContext(ctx, `SELECT id, pool, phase, reason, instance_id, created_at FROM leases`)
	if err != nil {
		return
	}
	now := time.Now()
	for rows.Next() {
		var id, pl, phase, reason, inst string
		var created time.Time
		if rows.Scan(&id, &pl, &phase, &reason, &inst, &created) != nil {
			continue
		}
		t := w.leases[id]
		if t == nil {
			t = &leaseTrack{Pool: pl, Created: created}
			w.leases[id] = t
		}
		if t.Terminal != "" && phase != t.Terminal {
			w.violations = append(w.violations, fmt.Sprintf("lease %s left its terminal phase in the store: %s at %s, then %s at %s",
				id, t.Terminal, t.TerminalAt.Format("15:04:05"), phase, now.Format("15:04:05")))
			t.Terminal = phase // reported once per change
		}
		t.Phase, t.Reason = phase, reason
		if inst != "" {
			t.Instance = inst
		}
		if phase != "Pending" && t.LeftPending.IsZero() {
			t.LeftPending = now
		}
		if storeTerminal[phase] && t.TerminalAt.IsZero() {
			t.Terminal, t.TerminalAt = phase, now
		}
	}
	rows.Close()
	rows, err = e.db.QueryContext(ctx, `SELECT id, phase FROM instances`)
	if err != nil {
		return
	}
	for rows.Next() {
		var id, phase string
		if rows.Scan(&id, &phase) != nil {
			continue
		}
		t := w.instances[id]
		if t == nil {
			t = &instTrack{}
			w.instances[id] = t
		}
		t.Phase, t.LastSeen = phase, now
	}
	rows.Close()
	w.samples++
}

// watchSummary is the figures of the new invariants.
type watchSummary struct {
	Samples int `json:"samples"`
	// Worst times from admission to Bound or an end, of leases and of orphans.
	WorstAdmission time.Duration `json:"worstAdmission"`
	WorstOrphan    time.Duration `json:"worstOrphan"`
	// WorstTeardown: from a lease's end to the last sight of its instance's row.
	WorstTeardown time.Duration `json:"worstTeardown"`
	Ended         int           `json:"endedWithInstance"`
	Orphans       int           `json:"orphanFaults"`
	Orphaned      int           `json:"failedOrphaned"`
	OrphanStarted int           `json:"orphanWorkflowStarted"`
	// OrphanEnds: how the leases of the orphan faults ended (phase and reason).
	OrphanEnds map[string]int `json:"orphanEnds"`
}

// check computes the invariants of the watcher's samples and the orphan records.
func (w *watcher) check(r *Report, orphans []orphanRecord) {
	for _, v := range w.violations {
		r.violate("%s", v)
	}
	s := &r.Watch
	s.Samples = w.samples
	isOrphan := map[string]bool{}
	for _, o := range orphans {
		isOrphan[o.ID] = true
		s.Orphans++
		if o.Workflow {
			s.OrphanStarted++
		}
	}
	ids := make([]string, 0, len(w.leases))
	for id := range w.leases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := w.leases[id]
		left := t.LeftPending
		if left.IsZero() {
			left = time.Now()
		}
		took := left.Sub(t.Created)
		bound := admissionBound
		if t.Reason == "orphaned" {
			s.Orphaned++
			bound = orphanBound
			s.WorstOrphan = max(s.WorstOrphan, took)
		} else {
			s.WorstAdmission = max(s.WorstAdmission, took)
		}
		if took > bound {
			r.violate("lease %s (%s) admitted at %s was still Pending %s later (bound %s; now %s %s)", id, t.Pool,
				t.Created.Format("15:04:05"), took.Round(time.Second), bound, t.Phase, t.Reason)
		}
		if isOrphan[id] {
			if s.OrphanEnds == nil {
				s.OrphanEnds = map[string]int{}
			}
			s.OrphanEnds[strings.TrimSpace(t.Phase+" "+t.Reason)]++
		}
		if isOrphan[id] && t.Reason != "orphaned" && !storeTerminal[t.Phase] {
			r.violate("lease %s, whose API was killed after its admission, ended %s", id, t.Phase)
		}
		// The instance of an ended lease is torn down within teardownBound (Quarantined ones
		// stay, for an operator).
		if t.Terminal == "" || t.Instance == "" {
			continue
		}
		in := w.instances[t.Instance]
		if in == nil || in.Phase == "Quarantined" {
			continue
		}
		s.Ended++
		held := in.LastSeen.Sub(t.TerminalAt)
		s.WorstTeardown = max(s.WorstTeardown, held)
		if held > teardownBound {
			r.violate("instance %s of lease %s (%s at %s) was still in the store %s later, %s (bound %s)", t.Instance, id,
				t.Terminal, t.TerminalAt.Format("15:04:05"), held.Round(time.Second), strings.ToLower(in.Phase), teardownBound)
		}
	}
	if s.Orphans > 0 && s.Orphaned == 0 {
		// Not a violation: the kill may have landed after the pool's Update each time.
		r.Notes = append(r.Notes, fmt.Sprintf("none of the %d API kills after an admission left an orphan (each lease's workflow had started)", s.Orphans))
	}
}
