package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/pool"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// The faults of issue 39, item 13.
const (
	// faultThaw breaks a thaw of a frozen spare: a frozen member's kube-apiserver is killed (the
	// signal waits in the frozen cgroup and lands when it thaws: its thaw must fail, the member
	// must never be granted), or the worker is killed, or stopped (SIGSTOP) for a few seconds,
	// while a thaw runs (the member must leave Thawing).
	faultThaw = "thaw broken"
	// faultOrphan kills -9 the API after a lease's admission (its Pending row is in the store)
	// and before it answered, and nobody retries that request's idempotency key: with no
	// workflow, the orphan reaper must fail the row `orphaned`.
	faultOrphan = "kill -9 API server between admission and start"
	// faultRecreateSchedPool deletes the schedule pool and applies it again in its other shape
	// (at once, or once it is gone): it must end with exactly the new shape's schedules.
	faultRecreateSchedPool = "schedule pool deleted and applied again"
)

// The bounds of the new invariants.
const (
	// admissionBound: a lease admitted is Bound or ended within the pool's queueTimeout plus a
	// minute (a queued claim gives up at queueTimeout).
	admissionBound = queueTimeout + time.Minute
	// orphanBound: an orphan ends within the grace, one reaper interval and a minute.
	orphanBound = orphanGrace + reaperInterval + time.Minute
	// teardownBound: the instance of an ended lease is gone within this (the recovery bound of
	// a fault that stopped the worker or Temporal meanwhile, and 30 s).
	teardownBound = recoveryBound + 30*time.Second
	// asleepBound: a lease of the schedule pool is woken within this of being seen asleep (the
	// wake schedule fires every other minute; resume and a loaded machine get the rest).
	asleepBound = 4 * time.Minute
)

// membersInFreeze lists the members of the given pools in a freeze state (Ready ones when
// Frozen).
func (e *env) membersInFreeze(state pool.FreezeState, pools ...string) []string {
	var ids []string
	for _, name := range pools {
		st, err := e.poolStatusOf(name, 3*time.Second)
		if err != nil {
			continue
		}
		for _, m := range st.Members {
			if m.Freeze == state && (state != pool.Frozen || m.Phase == pool.MemberPhase("Ready")) {
				ids = append(ids, m.ID)
			}
		}
	}
	return ids
}

// memberFreeze is a member's freeze state and whether its pool still has it.
func (e *env) memberFreeze(id string) (pool.FreezeState, bool, error) {
	name := soakPool
	if strings.HasPrefix(id, schedPool+"-") {
		name = schedPool
	}
	st, err := e.poolStatusOf(name, 3*time.Second)
	if err != nil {
		return "", false, err
	}
	for _, m := range st.Members {
		if m.ID == id {
			return m.Freeze, true, nil
		}
	}
	return "", false, nil
}

// thawFault applies the three ways of breaking a thaw in turn (a run has two or three thaw
// faults: drawn at random, a run could miss one way, as every run of session 44 missed the
// worker's): the worker stopped during a thaw, the worker killed during a thaw, a frozen
// member's API server killed.
func (e *env) thawFault(tr *traffic, rng *rand.Rand, stop <-chan struct{}) fault {
	n := e.thawFaults
	e.thawFaults++
	switch n % 3 {
	case 0:
		return e.breakWorkerDuringThaw(tr, rng, stop, true)
	case 1:
		return e.breakWorkerDuringThaw(tr, rng, stop, false)
	}
	return e.killFrozenMember(rng, stop)
}

// breakWorkerDuringThaw stops (SIGSTOP for 2-6 s) or kills -9 the worker while a member thaws for
// a claim. A thaw of a healthy member lasts well under a second, too short to be caught by
// polling the pool (the soak of session 44 never saw one), so the fault makes the thaw last: it
// stops the kube-apiserver of every frozen member of a pool first. The stop waits in the frozen
// cgroup and lands at the thaw, and the thaw's check (GET /readyz, 10 s) then hangs on it. The
// fault then asks for a lease of that pool, so that a claim thaws one of them, waits to see it
// Thawing, and breaks the worker. What must follow: the member leaves Thawing (its thaw fails,
// thaw_failed, and it is torn down), no lease is ever granted a member whose API server was
// stopped (the same invariant as a member killed frozen: the detail names them), and the
// fault's own lease ends Bound to another member or with a reason.
func (e *env) breakWorkerDuringThaw(tr *traffic, rng *rand.Rand, stop <-chan struct{}, stopOnly bool) fault {
	f := fault{Kind: faultThaw, At: time.Now()}
	// The schedule pool freezes every spare, so a claim of it always thaws; the soak pool
	// thaws its next spare after a bind, when it has one frozen.
	// Under load, or after a reboot fault, a pool may have no spare frozen for a while: wait
	// for one rather than skip.
	var name string
	var frozen []string
	for deadline := time.Now().Add(2 * time.Minute); len(frozen) == 0; {
		for _, p := range []string{schedPool, soakPool} {
			if frozen = e.membersInFreeze(pool.Frozen, p); len(frozen) > 0 {
				name = p
				break
			}
		}
		if len(frozen) == 0 && (time.Now().After(deadline) || !sleepOrStop(500*time.Millisecond, stop)) {
			f.Detail = "skipped: no frozen member in 2 min"
			return f
		}
	}
	local, _ := leaks.CountLocalInstances(context.Background(), e.state, nil, "")
	var stoppedIDs []string
	var pids []int
	for _, id := range frozen {
		for _, p := range local.Processes[id] {
			if p.Name == "kube-apiserver" && syscall.Kill(p.PID, syscall.SIGSTOP) == nil {
				stoppedIDs = append(stoppedIDs, id)
				pids = append(pids, p.PID)
			}
		}
	}
	if len(stoppedIDs) == 0 {
		f.Detail = "skipped: no kube-apiserver of a frozen member of " + name + " found"
		return f
	}
	// A claim, so that the pool thaws one of them. It is the admin's (no client's quota is
	// taken) and released below, whatever it got.
	key := fmt.Sprintf("soak-thaw-%x", rng.Int63())
	body, _ := json.Marshal(api.LeaseRequest{Pool: name, TTL: "2m", IdempotencyKey: key})
	var l api.Lease
	created := e.call(tr, true, "create (to thaw a stopped member)", e.adminToken, "POST", "/v1/leases", body, &l)
	defer func() {
		if l.ID != "" {
			e.call(tr, true, "release (the thaw fault's lease)", e.adminToken, "DELETE", "/v1/leases/"+l.ID, nil, nil)
		}
	}()
	var id string
	for deadline := time.Now().Add(60 * time.Second); id == "" && time.Now().Before(deadline) && !stopped(stop); {
		for _, t := range e.membersInFreeze(pool.Thawing, name) {
			if slices.Contains(stoppedIDs, t) {
				id = t
			}
		}
		if id == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if id == "" {
		// No thaw of them came (the claim took a running member, or none was made): give the
		// members their API servers back. A SIGCONT discards the stop still pending in the
		// frozen cgroup, and resumes one that was already stopped.
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		f.Detail = fmt.Sprintf("skipped: no thaw of %s seen in 60 s (create answered %d %s)", strings.Join(stoppedIDs, ","), created.Status, created.Reason)
		return f
	}
	f.At = time.Now()
	var what string
	if stopOnly {
		pause := time.Duration(2000+rng.Intn(4000)) * time.Millisecond
		e.worker.signal(syscall.SIGSTOP)
		time.Sleep(pause)
		e.worker.signal(syscall.SIGCONT)
		what = fmt.Sprintf("worker stopped %s while %s thawed", pause.Round(time.Millisecond), id)
	} else {
		e.worker.kill()
		// The instance's processes are a process group of their own whose parent was the
		// worker: its death orphans the group, and the kernel sends a group with a stopped
		// member SIGHUP and SIGCONT (POSIX). kube-apiserver survives the SIGHUP, so the API
		// servers of thawed members run again and serve: granting those is right. Only the
		// ones still stopped (still frozen, the signal pending) stay in the invariant.
		var resumed []string
		kept := stoppedIDs[:0]
		for i, sid := range stoppedIDs {
			if !stoppedOrStopping(pids[i]) {
				resumed = append(resumed, sid)
				continue
			}
			kept = append(kept, sid)
		}
		stoppedIDs = kept
		time.Sleep(time.Duration(rng.Intn(1000)) * time.Millisecond)
		if err := e.worker.start(); err != nil {
			f.Failed = err.Error()
			return f
		}
		what = fmt.Sprintf("worker killed while %s thawed", id)
		if len(resumed) > 0 {
			what += fmt.Sprintf(" (the kernel resumed the API servers of %s: their process group was orphaned)", strings.Join(resumed, ","))
		}
	}
	// The detail starts as a frozen-member kill's does: frozenKilled reads the members from it.
	if len(stoppedIDs) > 0 {
		f.Detail = stoppedFrozenPrefix + strings.Join(stoppedIDs, ",") + ": " + what
	} else {
		f.Detail = "every stopped API server resumed: " + what
	}
	if _, failed := e.waitRecovered(f.At); failed != "" {
		f.Failed = failed
		return f
	}
	// The thaw must end: the member runs again, or it was torn down (thaw_failed).
	for time.Since(f.At) < recoveryBound {
		state, present, err := e.memberFreeze(id)
		if err == nil && (!present || state != pool.Thawing) {
			f.Recovered = time.Now()
			f.Recovery = f.Recovered.Sub(f.At)
			if !present {
				f.Detail += "; member gone"
			} else {
				f.Detail += "; member " + orRunning(state)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if f.Recovered.IsZero() {
		f.Failed = fmt.Sprintf("member %s still Thawing %s after the fault", id, recoveryBound)
		return f
	}
	// What the stopped API servers are now (T: still stopped; gone: torn down).
	var states []string
	for _, pid := range pids {
		states = append(states, fmt.Sprintf("%d:%s", pid, processState(pid)))
	}
	f.Detail += "; API servers " + strings.Join(states, ",")
	// The fault's own lease: never Bound to one of the stopped members. (A Pending lease may
	// name the member it was assigned while the member thaws.)
	if l.ID != "" {
		var got api.Lease
		if a := e.call(tr, true, "get (the thaw fault's lease)", e.adminToken, "GET", "/v1/leases/"+l.ID, nil, &got); a.Status == 200 {
			f.Detail += fmt.Sprintf("; its lease %s %s %s", got.ID, got.Phase, got.ClusterName)
			if got.Phase == api.LeaseBound && slices.Contains(stoppedIDs, got.ClusterName) {
				f.Failed = fmt.Sprintf("lease %s was granted %s, whose kube-apiserver was stopped while it was frozen", got.ID, got.ClusterName)
			}
		}
	}
	return f
}

func orRunning(s pool.FreezeState) string {
	if s == pool.Running {
		return "running"
	}
	return string(s)
}

// killFrozenMember kills -9 the kube-apiserver of a frozen member: the process cannot act on
// the signal until its cgroup thaws, and then dies. The thaw's check (GET /readyz) must fail it
// (thaw_failed): no lease may be granted that member. The fault waits up to two minutes for a
// thaw to find the member dead (its row leaves Ready), or for the load to stop; none coming is
// not a failure (no claim needed the member), the check of the grants still holds.
func (e *env) killFrozenMember(rng *rand.Rand, stop <-chan struct{}) fault {
	f := fault{Kind: faultThaw, At: time.Now()}
	frozen := e.membersInFreeze(pool.Frozen, soakPool, schedPool)
	if len(frozen) == 0 {
		f.Detail = "skipped: no frozen member"
		return f
	}
	id := frozen[rng.Intn(len(frozen))]
	local, _ := leaks.CountLocalInstances(context.Background(), e.state, nil, "")
	killed := false
	for _, p := range local.Processes[id] {
		if p.Name == "kube-apiserver" {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			killed = true
		}
	}
	if !killed {
		f.Detail = "skipped: kube-apiserver of frozen member " + id + " not found"
		return f
	}
	f.At = time.Now()
	f.Detail = killedFrozenPrefix + id
	for time.Since(f.At) < 2*time.Minute && !stopped(stop) {
		if e.instancePhase(id) != "Ready" {
			f.Recovered = time.Now()
			f.Recovery = f.Recovered.Sub(f.At)
			f.Detail += ": out of Ready"
			return f
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.Detail += fmt.Sprintf(": still Ready %s later (no thaw came)", time.Since(f.At).Round(time.Second))
	return f
}

// The starts of the details of the thaw faults that broke frozen members' API servers.
const (
	killedFrozenPrefix  = "killed kube-apiserver of frozen member "
	stoppedFrozenPrefix = "stopped kube-apiserver of frozen members "
)

// frozenKilled are the members whose API server a thaw fault killed or stopped while they were
// frozen (none may be granted after it), nil for other faults.
func frozenKilled(f fault) []string {
	if f.Kind != faultThaw {
		return nil
	}
	for _, p := range []string{killedFrozenPrefix, stoppedFrozenPrefix} {
		if strings.HasPrefix(f.Detail, p) {
			ids, _, _ := strings.Cut(strings.TrimPrefix(f.Detail, p), ":")
			return strings.Split(ids, ",")
		}
	}
	return nil
}

// orphanRecord is a lease whose API was killed between admission and start by faultOrphan.
type orphanRecord struct {
	ID       string
	Admitted time.Time
	// Workflow says whether its lease workflow existed once the API served again.
	Workflow bool
}

// orphanLease sends a create (as admin: no quota of the clients is taken) and kills -9 the API
// the moment the lease's row is in the store; the request is never retried.
func (e *env) orphanLease(tr *traffic, rng *rand.Rand) fault {
	f := fault{Kind: faultOrphan, At: time.Now()}
	key := fmt.Sprintf("soak-orphan-%x", rng.Int63())
	body, _ := json.Marshal(api.LeaseRequest{Pool: soakPool, TTL: "30s", IdempotencyKey: key})
	go e.call(tr, true, "create (API killed after admission)", e.adminToken, "POST", "/v1/leases", body, nil)
	var id string
	var created time.Time
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := e.db.QueryRowContext(ctx, `SELECT id, created_at FROM leases WHERE idempotency_key = $1`, key).Scan(&id, &created)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.At = time.Now()
	e.server.kill()
	if id == "" {
		f.Detail = "no row within 20 s: the API was killed anyway"
	}
	time.Sleep(time.Duration(rng.Intn(1000)) * time.Millisecond)
	if err := e.server.start(); err != nil {
		f.Failed = err.Error()
		return f
	}
	f.Recovered, f.Failed = e.waitRecovered(f.At)
	if f.Failed != "" {
		return f
	}
	f.Recovery = f.Recovered.Sub(f.At)
	if id == "" {
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := e.temporal.DescribeWorkflowExecution(ctx, "lease-"+id, "")
	cancel()
	var nf *serviceerror.NotFound
	rec := orphanRecord{ID: id, Admitted: created, Workflow: !errors.As(err, &nf)}
	f.Detail = fmt.Sprintf("lease %s, killed %s after its admission; a workflow when the API served again: %v", id, f.At.Sub(created).Round(time.Millisecond), rec.Workflow)
	tr.mu.Lock()
	tr.orphans = append(tr.orphans, rec)
	tr.mu.Unlock()
	return f
}

// recreateSchedPool deletes the schedule pool and applies it in its other shape, at once or
// once it is gone, and waits until Temporal holds exactly the new shape's schedules of it (ids,
// and each note naming the shape's cron).
func (e *env) recreateSchedPool(rng *rand.Rand, shape *int) fault {
	f := fault{Kind: faultRecreateSchedPool, At: time.Now()}
	admin := e.client(e.adminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := admin.DeletePool(ctx, schedPool)
	cancel()
	if err != nil {
		f.Failed = fmt.Sprintf("delete the schedule pool: %v", err)
		return f
	}
	if rng.Intn(2) == 0 {
		time.Sleep(time.Duration(rng.Intn(2000)) * time.Millisecond)
		f.Detail = fmt.Sprintf("applied again %s after the delete", time.Since(f.At).Round(time.Millisecond))
	} else {
		gone := false
		for time.Since(f.At) < recoveryBound && !gone {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := admin.GetPool(ctx, schedPool)
			cancel()
			var ae *api.Error
			gone = errors.As(err, &ae) && ae.StatusCode == 404
			time.Sleep(100 * time.Millisecond)
		}
		if !gone {
			f.Failed = fmt.Sprintf("the deleted schedule pool was not gone %s after its delete", recoveryBound)
			return f
		}
		f.Detail = fmt.Sprintf("gone in %s, then applied again", time.Since(f.At).Round(time.Millisecond))
	}
	*shape = 1 - *shape
	if err := e.applySchedPool(*shape); err != nil {
		f.Failed = fmt.Sprintf("apply the schedule pool again: %v", err)
		return f
	}
	var last string
	for time.Since(f.At) < recoveryBound {
		got, err := e.schedulesOf(schedPool)
		if err == nil {
			last = schedMismatch(got, *shape)
			if last == "" {
				f.Recovered = time.Now()
				f.Recovery = f.Recovered.Sub(f.At)
				f.Detail += fmt.Sprintf(" (shape %d: %d schedules)", *shape, len(got))
				return f
			}
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.Failed = fmt.Sprintf("the re-created schedule pool's schedules were not its own %s after the delete: %s", recoveryBound, last)
	return f
}

// schedulesOf are the Temporal schedules of a pool: id → note.
func (e *env) schedulesOf(name string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it, err := e.temporal.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for it.HasNext() {
		s, err := it.Next()
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(s.ID, pool.ScheduleIDPrefix(name)) {
			continue
		}
		d, err := e.temporal.ScheduleClient().GetHandle(ctx, s.ID).Describe(ctx)
		if err != nil {
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue // deleted since the list
			}
			return nil, err
		}
		note := ""
		if d.Schedule.State != nil {
			note = d.Schedule.State.Note
		}
		out[s.ID] = note
	}
	return out, nil
}

// schedMismatch says how the schedules differ from the shape's ("" when they are exactly its).
func schedMismatch(got map[string]string, shape int) string {
	want := schedIDs(shape)
	var ids []string
	for id := range got {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	sorted := slices.Clone(want)
	sort.Strings(sorted)
	if !slices.Equal(ids, sorted) {
		return fmt.Sprintf("schedules %v, want %v", ids, sorted)
	}
	sleep, wake := schedCrons(shape)
	p := pool.ScheduleIDPrefix(schedPool)
	for id, cron := range map[string]string{p + "sleep": sleep, p + "wake": wake} {
		if !strings.Contains(got[id], fmt.Sprintf("%q", cron)) {
			return fmt.Sprintf("schedule %s is %q, want its cron %q", id, got[id], cron)
		}
	}
	return ""
}

// thawAndKill kills processes that may be frozen: SIGKILL, then their freezer cgroups thawed
// so the signal lands (a host that reboots stops frozen processes too). It returns the pids.
func thawAndKill(prefix string) []leaks.Process {
	ps := leaks.KillNaming(prefix)
	for _, p := range ps {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && parts[1] == "freezer" && parts[2] != "/" {
				_ = os.WriteFile(filepath.Join("/sys/fs/cgroup/freezer", parts[2], "freezer.state"), []byte("THAWED"), 0o644)
			}
		}
	}
	return ps
}

// processState is the state letter of a process in /proc (R, S, T for stopped…), or "gone".
func processState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	if i := strings.LastIndexByte(string(data), ')'); i >= 0 && i+2 < len(data) {
		return string(data[i+2])
	}
	return "?"
}

// stoppedOrStopping says whether a process is stopped, or will stop as it thaws (a SIGSTOP
// pending, /proc/<pid>/status ShdPnd or SigPnd), or is gone.
func stoppedOrStopping(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true // gone: it was never resumed
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "State":
			if strings.HasPrefix(strings.TrimSpace(v), "T") {
				return true
			}
		case "ShdPnd", "SigPnd":
			if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(uint(syscall.SIGSTOP)-1)) != 0 {
				return true
			}
		}
	}
	return false
}
