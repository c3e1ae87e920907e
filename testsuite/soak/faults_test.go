package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// Kinds of fault the injector applies, in a shuffled cycle so a short run sees each one.
const (
	faultKillWorker   = "kill -9 worker"
	faultKillAPI      = "kill -9 API server"
	faultKillTemporal = "kill -9 Temporal server"
	faultBackend      = "backend failure"
	// faultKillMember kills -9 the kube-apiserver or the kine of a member that is Ready (or
	// leased): the pool's health check must find it within interval × threshold.
	faultKillMember = "kill -9 a member's kube-apiserver or kine"
	// faultReboot: the worker dies and every instance process with it, as in a host reboot;
	// the restarted worker's pool must find every dead member and rebuild the warm pool.
	faultReboot = "reboot: worker and every instance process killed"
	// faultRecreatePool deletes the soak pool under load and applies it again: at once (while
	// it drains), or once the drain has finished (a new pool of the same name). Inside its
	// window, and only there, a create may find no pool (404) and a lease may fail with
	// pool_deleted (queued when the delete came) or not_found (its claim found no pool).
	faultRecreatePool = "pool deleted and applied again"
)

// The soak pool's health check, and how long a dead member may stay Ready: interval ×
// threshold, plus 30 s for the check's own time and a loaded machine.
const (
	healthInterval  = 5 * time.Second
	healthThreshold = 2
	deadMemberBound = healthInterval*healthThreshold + 30*time.Second
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

// orphanCycleFrom: a load at least this long has the orphan fault in its cycle too.
const orphanCycleFrom = 3 * time.Minute

// allFaults are the faults a run injects, each once per cycle in a random order.
var allFaults = []string{faultKillWorker, faultKillAPI, faultKillTemporal, faultBackend, faultKillMember, faultReboot, faultRecreatePool,
	faultThaw, faultOrphan, faultRecreateSchedPool}

// injectFaults applies faults until stop is closed, one at a time: the next one only after the
// system has recovered from the previous one and a random pause (mean cfg.FaultEvery).
func (e *env) injectFaults(tr *traffic, rng *rand.Rand, stop <-chan struct{}) []fault {
	var out []fault
	var cycle []string
	schedShape := 0
	for {
		pause := time.Duration((0.5 + rng.Float64()) * float64(e.cfg.FaultEvery))
		if !sleepOrStop(pause, stop) {
			return out
		}
		if len(cycle) == 0 {
			cycle = slices.Clone(allFaults)
			if len(e.cfg.Faults) > 0 {
				cycle = slices.Clone(e.cfg.Faults)
			}
			rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
			if e.cfg.Duration < orphanCycleFrom {
				// The orphan's reaping takes up to three minutes: a short run has only the one
				// before its load (run), which the warm-up and the load overlap.
				cycle = slices.DeleteFunc(cycle, func(k string) bool { return k == faultOrphan })
			}
		}
		kind := cycle[0]
		cycle = cycle[1:]
		f := fault{Kind: kind}
		switch kind {
		case faultBackend:
			f = e.breakACreation(stop)
		case faultKillMember:
			f = e.killAMember(rng)
		case faultReboot:
			f = e.reboot(rng)
		case faultRecreatePool:
			f = e.recreatePool(rng)
		case faultThaw:
			f = e.thawFault(tr, rng, stop)
		case faultOrphan:
			f = e.orphanLease(tr, rng)
		case faultRecreateSchedPool:
			f = e.recreateSchedPool(rng, &schedShape)
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

// instancesIn lists the store's instances in a phase.
func (e *env) instancesIn(phase string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := e.db.QueryContext(ctx, `SELECT id FROM instances WHERE pool = $1 AND phase = $2 ORDER BY id`, soakPool, phase)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// instancePhase is an instance's phase in the store ("" once its row is gone).
func (e *env) instancePhase(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var phase string
	_ = e.db.QueryRowContext(ctx, `SELECT phase FROM instances WHERE id = $1`, id).Scan(&phase)
	return phase
}

// killAMember kills one process of a Ready member and waits until the pool no longer counts it
// Ready (its row turns Unhealthy, Deleting, or goes): that must happen within deadMemberBound.
func (e *env) killAMember(rng *rand.Rand) fault {
	f := fault{Kind: faultKillMember, At: time.Now()}
	// A frozen member is left to the thaw fault: its processes act on no signal until it thaws.
	frozen := map[string]bool{}
	for _, st := range []pool.FreezeState{pool.Frozen, pool.Freezing, pool.Thawing} {
		for _, id := range e.membersInFreeze(st, soakPool) {
			frozen[id] = true
		}
	}
	var ready []string
	for _, id := range e.instancesIn("Ready") {
		if !frozen[id] {
			ready = append(ready, id)
		}
	}
	if len(ready) == 0 {
		f.Detail = "skipped: no Ready member"
		return f
	}
	id := ready[rng.Intn(len(ready))]
	proc := []string{"kube-apiserver", "kine"}[rng.Intn(2)]
	local, _ := leaks.CountLocalInstances(context.Background(), e.state, nil, "")
	killed := false
	for _, p := range local.Processes[id] {
		if p.Name == proc {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			killed = true
		}
	}
	if !killed {
		f.Detail = fmt.Sprintf("skipped: %s of %s not found", proc, id)
		return f
	}
	f.At = time.Now()
	f.Detail = fmt.Sprintf("killed %s of Ready member %s", proc, id)
	for time.Since(f.At) < recoveryBound {
		if e.instancePhase(id) != "Ready" {
			f.Recovered = time.Now()
			f.Recovery = f.Recovered.Sub(f.At)
			if f.Recovery > deadMemberBound {
				f.Failed = fmt.Sprintf("dead member %s stayed Ready %s, more than interval × threshold + 30 s (%s)",
					id, f.Recovery.Round(time.Second), deadMemberBound)
			}
			return f
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.Failed = fmt.Sprintf("dead member %s still Ready %s after the kill", id, recoveryBound)
	return f
}

// reboot kills the worker and every instance process, starts the worker again, and waits until
// the pool has given up every member that died: none of them is Ready any more. (Under load the
// clients lease each new member as soon as it is Ready, so "minReady Ready again" would measure
// the clients, not the pool.)
func (e *env) reboot(rng *rand.Rand) fault {
	f := fault{Kind: faultReboot, At: time.Now()}
	dead := e.instancesIn("Ready")
	e.worker.kill()
	killed := thawAndKill(leaks.InstancesDir(e.state) + "/")
	f.Detail = fmt.Sprintf("%d instance processes killed, %d Ready members", len(killed), len(dead))
	time.Sleep(time.Duration(rng.Intn(1000)) * time.Millisecond)
	if err := e.worker.start(); err != nil {
		f.Failed = err.Error()
		return f
	}
	if _, failed := e.waitRecovered(f.At); failed != "" {
		f.Failed = failed
		return f
	}
	for time.Since(f.At) < recoveryBound {
		still := 0
		for _, id := range dead {
			if e.instancePhase(id) == "Ready" {
				still++
			}
		}
		if still == 0 {
			f.Recovered = time.Now()
			f.Recovery = f.Recovered.Sub(f.At)
			return f
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.Failed = fmt.Sprintf("members that died in the reboot were still Ready %s after it", recoveryBound)
	return f
}

// recreatePool deletes the soak pool and applies it again, either at once (0–2 s later, while
// it drains) or after its drain has finished, and waits until the pool serves again: it
// answers, it is not draining and it has a Ready or Leased member.
func (e *env) recreatePool(rng *rand.Rand) fault {
	f := fault{Kind: faultRecreatePool, At: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	draining, err := e.client(e.adminToken).DeletePool(ctx, soakPool)
	cancel()
	if err != nil {
		f.Failed = fmt.Sprintf("delete the pool: %v", err)
		return f
	}
	if rng.Intn(2) == 0 {
		time.Sleep(time.Duration(rng.Intn(2000)) * time.Millisecond)
		f.Detail = fmt.Sprintf("applied again %s after the delete (draining %v)", time.Since(f.At).Round(time.Millisecond), draining)
	} else {
		gone := false
		for time.Since(f.At) < recoveryBound {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := e.client(e.adminToken).GetPool(ctx, soakPool)
			cancel()
			var ae *api.Error
			if errors.As(err, &ae) && ae.StatusCode == 404 {
				gone = true
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !gone {
			f.Failed = fmt.Sprintf("the deleted pool was not gone %s after its delete", recoveryBound)
			return f
		}
		f.Detail = fmt.Sprintf("drained and forgotten in %s, then applied again", time.Since(f.At).Round(time.Millisecond))
		if left := e.membersOutliving(); len(left) > 0 {
			f.Failed = fmt.Sprintf("members outlived their deleted pool: %v", left)
			return f
		}
	}
	if err := e.applyPoolErr(soakPool, e.cfg.Warm, e.cfg.MaxClusters); err != nil {
		f.Failed = fmt.Sprintf("apply the pool again: %v", err)
		return f
	}
	for time.Since(f.At) < recoveryBound {
		st, err := e.poolStatus(3 * time.Second)
		if err == nil && st.Phase != api.PoolDraining && st.Ready+st.Leased > 0 {
			f.Recovered = time.Now()
			f.Recovery = f.Recovered.Sub(f.At)
			return f
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.Failed = fmt.Sprintf("the pool applied again did not serve %s after its delete", recoveryBound)
	return f
}

// ofSoakPool says whether an instance id is of the soak pool (ids start with the pool's name
// and a dash; the other pools' names start with the soak pool's).
func ofSoakPool(id string) bool {
	return strings.HasPrefix(id, soakPool+"-") && !strings.HasPrefix(id, schedPool+"-") && !strings.HasPrefix(id, forbiddenPool+"-")
}

// membersOutliving lists what is left of the soak pool's members once the pool is gone: store
// rows and local processes or data directories, other than Quarantined members (which stay, for
// an operator). It looks for 5 s, so that a process being reaped is not counted.
func (e *env) membersOutliving() []string {
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		left = nil
		quarantined := map[string]bool{}
		for _, id := range e.instancesIn("Quarantined") {
			quarantined[id] = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rows, err := e.db.QueryContext(ctx, `SELECT id, phase FROM instances WHERE pool = $1 AND phase <> 'Quarantined'`, soakPool)
		if err == nil {
			for rows.Next() {
				var id, phase string
				if rows.Scan(&id, &phase) == nil {
					left = append(left, fmt.Sprintf("%s (store row %s)", id, phase))
				}
			}
			rows.Close()
		}
		cancel()
		if l, err := leaks.CountLocalInstances(context.Background(), e.state, nil, ""); err == nil {
			for _, id := range l.ProcessIDs() {
				if !quarantined[id] && ofSoakPool(id) {
					left = append(left, id+" (processes)")
				}
			}
			for _, id := range l.DirIDs() {
				if !quarantined[id] && ofSoakPool(id) {
					left = append(left, id+" (data dir)")
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}
