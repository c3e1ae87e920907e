package soak

import (
	"context"
	"fmt"
	"math/rand"
	"syscall"
	"time"

	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// Kinds of fault the injector applies, in a shuffled cycle so a short run sees each one.
const (
	faultKillWorker   = "kill -9 worker"
	faultKillAPI      = "kill -9 API server"
	faultKillTemporal = "kill -9 Temporal server"
	faultBackend      = "backend failure"
)

// fault is one injected fault and how long the system took to serve again.
type fault struct {
	Kind      string        `json:"kind"`
	At        time.Time     `json:"at"`
	Recovered time.Time     `json:"recovered,omitempty"`
	Recovery  time.Duration `json:"recovery"`
	Detail    string        `json:"detail,omitempty"`
	// Failed is set when the system did not serve again within the recovery bound.
	Failed string `json:"failed,omitempty"`
}

const recoveryBound = 3 * time.Minute

// injectFaults applies faults until stop is closed, one at a time: the next one only after the
// system has recovered from the previous one and a random pause (mean cfg.FaultEvery).
func (e *env) injectFaults(rng *rand.Rand, stop <-chan struct{}) []fault {
	var out []fault
	var cycle []string
	for {
		pause := time.Duration((0.5 + rng.Float64()) * float64(e.cfg.FaultEvery))
		if !sleepOrStop(pause, stop) {
			return out
		}
		if len(cycle) == 0 {
			cycle = []string{faultKillWorker, faultKillAPI, faultKillTemporal, faultBackend}
			rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		kind := cycle[0]
		cycle = cycle[1:]
		f := fault{Kind: kind}
		switch kind {
		case faultBackend:
			f = e.breakACreation(stop)
		default:
			p := map[string]*kobeProc{faultKillWorker: e.worker, faultKillAPI: e.server, faultKillTemporal: e.dev}[kind]
			f.At = time.Now()
			p.kill()
			// A supervisor (systemd, Kubernetes) restarts a dead process after a moment.
			time.Sleep(time.Duration(rng.Intn(1000)) * time.Millisecond)
			if err := p.start(); err != nil {
				f.Failed = err.Error()
				out = append(out, f)
				return out
			}
			f.Recovered, f.Failed = e.waitRecovered(f.At)
			if f.Failed == "" {
				f.Recovery = f.Recovered.Sub(f.At)
			}
		}
		e.t.Logf("fault %s at %s: recovery %s %s %s", f.Kind, f.At.Format("15:04:05.000"), f.Recovery.Round(time.Millisecond), f.Detail, f.Failed)
		out = append(out, f)
		if f.Failed != "" {
			return out
		}
	}
}

// healthy: the API answers /readyz (its Temporal and store are reachable), the worker is up and
// the pool workflow answers a query (which needs Temporal and a polling worker).
func (e *env) healthy() bool {
	if !e.server.serving() || !e.worker.serving() || !e.dev.serving() {
		return false
	}
	_, err := e.poolStatus(3 * time.Second)
	return err == nil
}

// waitRecovered polls until the system is healthy and returns when it was first seen healthy.
func (e *env) waitRecovered(since time.Time) (time.Time, string) {
	for time.Since(since) < recoveryBound {
		for _, p := range []*kobeProc{e.dev, e.server, e.worker} {
			if p.exited() {
				return time.Time{}, fmt.Sprintf("kobe %s exited after the fault:\n%s", p.name, p.tail())
			}
		}
		if e.healthy() {
			return time.Now(), ""
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, fmt.Sprintf("not serving %s after the fault", recoveryBound)
}

// breakACreation kills -9 the kube-apiserver of an instance being created: the backend's create
// fails as it would if a host ran out of memory. It waits up to 20 s for a creation to break.
func (e *env) breakACreation(stop <-chan struct{}) fault {
	f := fault{Kind: faultBackend}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rows, err := e.db.QueryContext(ctx, `SELECT id FROM instances WHERE phase = 'Creating'`)
		var creating []string
		if err == nil {
			for rows.Next() {
				var id string
				if rows.Scan(&id) == nil {
					creating = append(creating, id)
				}
			}
			rows.Close()
		}
		cancel()
		local, _ := leaks.CountLocalInstances(context.Background(), e.state, nil, "")
		for _, id := range creating {
			for _, p := range local.Processes[id] {
				if p.Name == "kube-apiserver" {
					f.At = time.Now()
					_ = syscall.Kill(p.PID, syscall.SIGKILL)
					f.Detail = "killed kube-apiserver of Creating instance " + id
					return f
				}
			}
		}
		if !sleepOrStop(100*time.Millisecond, stop) {
			break
		}
	}
	f.At = time.Now()
	f.Detail = "skipped: no instance was being created"
	return f
}
