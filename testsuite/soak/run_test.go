package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/api"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// run drives the load and the faults, lets the system settle, drains the pool and checks.
func (e *env) run() *Report {
	r := &Report{Config: e.cfg}
	rng := rand.New(rand.NewSource(e.cfg.Seed))
	tr := newTraffic()
	watch := e.startWatcher()
	// An API killed between a lease's admission and its start, before anything else: the orphan
	// reaper's minute of grace and minute of interval then pass during the warm-up and the load.
	f := e.orphanLease(tr, rand.New(rand.NewSource(rng.Int63())))
	e.t.Logf("fault %s at %s: recovery %s %s %s", f.Kind, f.At.Format("15:04:05.000"), f.Recovery.Round(time.Millisecond), f.Detail, f.Failed)
	r.Faults = append(r.Faults, f)
	if f.Failed != "" {
		r.violate("%s at %s: %s", f.Kind, f.At.Format("15:04:05"), f.Failed)
		watch.stop()
		return r
	}
	if err := e.waitPool(func(ready, members int) bool { return ready >= e.cfg.Warm }, 5*time.Minute); err != nil {
		r.violate("the pool never had %d Ready members: %v", e.cfg.Warm, err)
		return r
	}

	smp := e.startSampler()
	stop := make(chan struct{})
	faultsDone := make(chan []fault, 1)
	faultRng := rand.New(rand.NewSource(rng.Int63()))
	go func() { faultsDone <- e.injectFaults(tr, faultRng, stop) }()
	var clients sync.WaitGroup
	for i := 0; i < e.cfg.Clients; i++ {
		clients.Add(1)
		clientRng := rand.New(rand.NewSource(rng.Int63()))
		go func() {
			defer clients.Done()
			e.runClient(i, tr, clientRng, stop)
		}()
	}
	invalidRng := rand.New(rand.NewSource(rng.Int63()))
	invalidDone := make(chan struct{})
	go func() {
		defer close(invalidDone)
		e.runInvalidClient(tr, invalidRng, stop)
	}()
	var others sync.WaitGroup
	schedRng, signInRng := rand.New(rand.NewSource(rng.Int63())), rand.New(rand.NewSource(rng.Int63()))
	others.Add(2)
	go func() {
		defer others.Done()
		e.runSchedClient(tr, schedRng, stop)
	}()
	go func() {
		defer others.Done()
		e.runSignInClient(tr, signInRng, stop)
	}()
	allDone := make(chan struct{})
	go func() { clients.Wait(); close(allDone) }()
	start := time.Now()
	select {
	case <-time.After(e.cfg.Duration):
	case <-allDone: // the lifecycle budget is spent
	}
	close(stop)
	r.Faults = append(r.Faults, <-faultsDone...)
	e.t.Logf("load stopped after %s; waiting for the clients' leases to end", time.Since(start).Round(time.Second))
	<-allDone
	<-invalidDone
	others.Wait()
	r.LoadTime = time.Since(start)

	// Every lease the store holds must end (leases whose answer was lost expire by TTL).
	if err := e.waitNoActiveLeases(4 * time.Minute); err != nil {
		r.violate("%v", err)
	}
	samples := smp.stop()
	e.checkQuarantinedVisible(r)

	// Drain: deleting the pools tears every member down.
	e.drainPools(r)
	e.checkAudit(r)
	watch.stop()
	tr.mu.Lock()
	orphans := append([]orphanRecord{}, tr.orphans...)
	tr.mu.Unlock()
	watch.check(r, orphans)

	e.check(r, tr, samples)
	return r
}

// waitPool waits until cond holds for the pool's Ready count and members.
func (e *env) waitPool(cond func(ready, members int) bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		st, err := e.poolStatus(5 * time.Second)
		if err == nil && cond(st.Ready, len(st.Members)) {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("ready %d, members %d, phase %s %s", st.Ready, len(st.Members), st.Phase, st.LastFailureReason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

func (e *env) activeLeases() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := e.db.QueryRowContext(ctx, `SELECT count(*) FROM leases WHERE phase IN ('Pending', 'Bound')`).Scan(&n)
	return n, err
}

func (e *env) waitNoActiveLeases(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n, err := e.activeLeases(); err == nil && n == 0 {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := e.db.QueryContext(ctx, `SELECT id, phase, principal FROM leases WHERE phase IN ('Pending', 'Bound')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var stuck []string
	for rows.Next() {
		var id, phase, who string
		_ = rows.Scan(&id, &phase, &who)
		stuck = append(stuck, fmt.Sprintf("%s=%s(%s)", id, phase, who))
	}
	return fmt.Errorf("leases still active %s after the load: %v", timeout, stuck)
}

// drainPools deletes the soak's pools and waits until nothing of their instances remains.
func (e *env) drainPools(r *Report) {
	admin := e.client(e.adminToken)
	for _, name := range []string{soakPool, forbiddenPool, schedPool} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := admin.DeletePool(ctx, name)
		cancel()
		if err != nil {
			r.violate("delete pool %s: %v", name, err)
		}
	}
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := e.localInstances()
		if err == nil && l.Empty() {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// localInstances is what exists of local instances: processes, directories and store rows.
func (e *env) localInstances() (leaks.Local, error) {
	l, err := leaks.CountLocalInstances(context.Background(), e.state, nil, "")
	if err != nil {
		return l, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := e.db.QueryContext(ctx, `SELECT id, phase FROM instances`)
	if err != nil {
		return l, err
	}
	defer rows.Close()
	l.Rows = map[string]string{}
	for rows.Next() {
		var id, phase string
		if err := rows.Scan(&id, &phase); err != nil {
			return l, err
		}
		l.Rows[id] = phase
	}
	return l, rows.Err()
}

// sampler watches the store and the pool while the load runs: the per-principal and per-role
// active lease counts (as the store sees them, in one consistent read) and the pool's members.
type sampler struct {
	quit chan struct{}
	done chan samples
}

type samples struct {
	N               int
	MaxPerPrincipal int
	MaxRole         int
	MaxMembers      int
	// MaxFrozen and MaxFrozenSched: the most frozen members the soak and schedule pools had.
	MaxFrozen, MaxFrozenSched int
	Violations                []string
}

func (e *env) startSampler() *sampler {
	s := &sampler{quit: make(chan struct{}), done: make(chan samples, 1)}
	go func() {
		var out samples
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				s.done <- out
				return
			case <-tick.C:
			}
			out.N++
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			rows, err := e.db.QueryContext(ctx, `SELECT principal, count(*) FROM leases
				WHERE phase IN ('Pending', 'Bound') AND role = 'ci' GROUP BY principal`)
			if err == nil {
				role := 0
				for rows.Next() {
					var who string
					var n int
					if rows.Scan(&who, &n) != nil {
						continue
					}
					role += n
					out.MaxPerPrincipal = max(out.MaxPerPrincipal, n)
					if n > perPrincipal {
						out.Violations = append(out.Violations, fmt.Sprintf("%s held %d active leases (maxConcurrentLeases %d) at %s", who, n, perPrincipal, time.Now().Format("15:04:05.000")))
					}
				}
				rows.Close()
				out.MaxRole = max(out.MaxRole, role)
				if role > e.cfg.Quota {
					out.Violations = append(out.Violations, fmt.Sprintf("role ci held %d active leases (quota %d) at %s", role, e.cfg.Quota, time.Now().Format("15:04:05.000")))
				}
			}
			cancel()
			if out.N%4 == 0 {
				if st, err := e.poolStatusOf(schedPool, 2*time.Second); err == nil {
					out.MaxFrozenSched = max(out.MaxFrozenSched, st.Frozen)
				}
			}
			if st, err := e.poolStatus(2 * time.Second); err == nil {
				out.MaxFrozen = max(out.MaxFrozen, st.Frozen)
				// Quarantined members do not count against maxClusters (docs/architecture.md).
				members := len(st.Members) - st.Quarantined
				out.MaxMembers = max(out.MaxMembers, members)
				if members > e.cfg.MaxClusters {
					out.Violations = append(out.Violations, fmt.Sprintf("the pool had %d members besides quarantined ones (maxClusters %d)", members, e.cfg.MaxClusters))
				}
			}
		}
	}()
	return s
}

func (s *sampler) stop() samples {
	close(s.quit)
	return <-s.done
}

// check computes the summary and every invariant from the harness's records, the store, the
// host and Temporal.
func (e *env) check(r *Report, tr *traffic, smp samples) {
	tr.mu.Lock()
	defer tr.mu.Unlock()

	// Leases as the clients saw them.
	r.Leases.Failed = map[string]int{}
	instances := map[string]string{}
	for _, l := range tr.leases {
		r.Leases.Requested++
		if l.Bound {
			r.Leases.Bound++
			if prev, ok := instances[l.Instance]; ok {
				r.violate("double grant: instance %s was bound to lease %s and to lease %s", l.Instance, prev, l.ID)
			}
			instances[l.Instance] = l.ID
			if l.KubeconfigErr != "" && !killedClusters(e.faultsSoFar(r), l.KubeconfigAt) {
				r.violate("lease %s was Bound but its kubeconfig did not reach the cluster: %s", l.ID, l.KubeconfigErr)
			}
		}
		switch l.Final {
		case "Released":
			r.Leases.Released++
		case "Expired":
			r.Leases.Expired++
		case "Failed":
			r.Leases.Failed[string(l.Reason)]++
			if l.Reason == "" {
				r.violate("lease %s failed without a reason", l.ID)
			}
			if (l.Reason == "pool_deleted" || l.Reason == "not_found") && !poolRecreatedOf(r.Faults, l.Kind == "sched", l.Created, l.Ended) {
				r.violate("lease %s failed %s (created %s, ended %s) outside any pool delete", l.ID, l.Reason,
					l.Created.Format("15:04:05.000"), l.Ended.Format("15:04:05.000"))
			}
		default:
			r.violate("lease %s (%s) never reached a terminal phase", l.ID, l.Kind)
		}
		if l.Kind == "expire" && l.Bound && l.Final != "Expired" {
			r.violate("lease %s was left to expire but ended %s", l.ID, l.Final)
		}
		// No lease leaves a terminal phase: what the API answered, in order.
		if how := leftTerminal(l.seen); how != "" {
			r.violate("lease %s left its terminal phase in the API's answers: %s", l.ID, how)
		}
		// A member that died frozen must fail its thaw, never be granted.
		for _, f := range r.Faults {
			if ids := frozenKilled(f); l.Bound && slices.Contains(ids, l.Instance) && l.BoundAt.After(f.At) {
				r.violate("lease %s was granted %s at %s, whose kube-apiserver was killed or stopped while it was frozen (at %s)", l.ID, l.Instance,
					l.BoundAt.Format("15:04:05.000"), f.At.Format("15:04:05.000"))
			}
		}
		if l.Slept {
			r.Sleep.Slept++
			if l.ReleasedAsleep {
				r.Sleep.ReleasedAsleep++
			}
			if l.Kind == "sched" {
				r.Sleep.BySchedule++
			}
		}
	}
	r.Sleep.Answers = tr.sleeps
	r.Sleep.SchedLeases = 0
	for _, l := range tr.leases {
		if l.Kind == "sched" {
			r.Sleep.SchedLeases++
		}
	}
	for _, x := range tr.asleepTooLong {
		r.violate("%s", x)
	}
	r.SignIn = tr.signIn
	r.Leases.RefusedQuota = tr.refused[api.ReasonQuotaExhausted]
	r.Leases.Extensions = tr.extendRef
	r.Quota = quotaSummary{MaxPerPrincipal: smp.MaxPerPrincipal, PerPrincipalLimit: perPrincipal, MaxRole: smp.MaxRole, RoleQuota: e.cfg.Quota, Samples: smp.N}
	r.MaxMembers = smp.MaxMembers
	r.MaxFrozen, r.MaxFrozenSched = smp.MaxFrozen, smp.MaxFrozenSched
	for _, v := range smp.Violations {
		r.violate("%s", v)
	}

	// Leases as the store saw them: every row ended, the same way the API said.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	storePhase := map[string]string{}
	if rows, err := e.db.QueryContext(ctx, `SELECT id, phase FROM leases`); err == nil {
		for rows.Next() {
			var id, phase string
			_ = rows.Scan(&id, &phase)
			storePhase[id] = phase
		}
		rows.Close()
	} else {
		r.violate("read leases: %v", err)
	}
	r.Leases.StoreRows = len(storePhase)
	for _, l := range tr.leases {
		if p := storePhase[l.ID]; l.Final != "" && p != string(l.Final) {
			r.violate("lease %s: the API said %s, the store says %q", l.ID, l.Final, p)
		}
	}
	if rows, err := e.db.QueryContext(ctx, `SELECT instance_id, count(*) FROM leases WHERE instance_id <> ''
		GROUP BY instance_id HAVING count(*) > 1`); err == nil {
		for rows.Next() {
			var id string
			var n int
			_ = rows.Scan(&id, &n)
			r.DoubleGrants++
			r.violate("double grant: the store binds instance %s to %d leases", id, n)
		}
		rows.Close()
	}

	// Instances: created and torn down (audit events), and whatever remains on the host.
	created, deleted := map[string]bool{}, map[string]bool{}
	if rows, err := e.db.QueryContext(ctx, `SELECT action, target FROM events WHERE action IN ('instance.Creating', 'instance.deleted')`); err == nil {
		for rows.Next() {
			var action, target string
			_ = rows.Scan(&action, &target)
			if action == "instance.deleted" {
				deleted[target] = true
			} else {
				created[target] = true
			}
		}
		rows.Close()
	} else {
		r.violate("read events: %v", err)
	}
	r.Instances.Created, r.Instances.TornDown = len(created), len(deleted)
	var leaked []string
	for id := range created {
		if !deleted[id] {
			leaked = append(leaked, id+" (created, never deleted)")
		}
	}
	l, err := e.localInstances()
	if err != nil {
		r.violate("count local instances: %v", err)
	}
	for _, id := range l.ProcessIDs() {
		leaked = append(leaked, fmt.Sprintf("%s (processes %v)", id, l.Processes[id]))
	}
	for _, id := range l.DirIDs() {
		leaked = append(leaked, id+" (data dir)")
	}
	for _, id := range l.RowIDs() {
		leaked = append(leaked, fmt.Sprintf("%s (store row %s)", id, l.Rows[id]))
	}
	for _, l := range tr.leases {
		if l.Endpoint == "" {
			continue
		}
		if u, err := url.Parse(l.Endpoint); err == nil {
			if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
				c.Close()
				port, _ := strconv.Atoi(u.Port())
				pid, cmd, err := portOwner(port)
				switch {
				case err != nil:
					leaked = append(leaked, fmt.Sprintf("%s (port %s still open: %v)", l.Instance, u.Host, err))
				case strings.Contains(cmd, e.state):
					leaked = append(leaked, fmt.Sprintf("%s (port %s still open, pid %d)", l.Instance, u.Host, pid))
				default:
					e.t.Logf("port %s of deleted instance %s was taken since by another program (pid %d: %.80s)", u.Host, l.Instance, pid, cmd)
				}
			}
		}
	}
	sort.Strings(leaked)
	r.Instances.Leaked = len(leaked)
	for _, x := range leaked {
		r.violate("leaked instance: %s", x)
	}
	if len(leaked) > 0 {
		e.explainLeaks(l)
	}

	// Answers: a 5xx or no answer outside a fault window is a failure to serve.
	r.Requests.Invalid = tr.invalid
	r.Requests.PoolMissing = len(tr.poolMissing)
	for _, a := range tr.poolMissing {
		if !poolRecreatedOf(r.Faults, a.Op == "create (schedule pool)", a.Sent, a.Answered) {
			r.violate("%s (sent %s) found no pool (404) outside any pool delete", a.Op, a.Sent.Format("15:04:05.000"))
		}
	}
	for _, a := range tr.answers {
		r.Requests.Total++
		if a.Valid {
			r.Requests.Valid++
		}
		bad := a.Status >= 500 || a.Status == 0
		if !bad {
			continue
		}
		if a.Status >= 500 {
			r.Requests.Status5xx++
		} else {
			r.Requests.Unanswered++
		}
		if faultAt := during(r.Faults, a); faultAt != "" {
			continue
		}
		if a.Status == 502 && a.Reason == api.ReasonWakeFailed && brokeInstance(r.Faults, a.Instance, a.Answered) {
			continue // the wake of a cluster a fault killed
		}
		r.Requests.FailedOutsideFaults++
		r.violate("%s (sent %s) got %d %q %s outside any fault window", a.Op, a.Sent.Format("15:04:05.000"), a.Status, a.Reason, a.Err)
	}
	// An extension refused because the lease's cluster is broken must be about a cluster a fault
	// broke: a member killed, or every instance in a reboot.
	for _, b := range tr.brokenExtends {
		if !brokeInstance(r.Faults, b.Instance, b.Answered) {
			r.violate("extend of a lease on %s refused health_failed at %s, but no fault broke that cluster", b.Instance, b.Answered.Format("15:04:05.000"))
		}
	}
	for _, w := range tr.wrong {
		r.violate("%s", w)
	}

	// Faults and recovery.
	for _, f := range r.Faults {
		if f.Failed != "" {
			r.violate("%s at %s: %s", f.Kind, f.At.Format("15:04:05"), f.Failed)
		}
		if f.Recovery > r.WorstRecovery {
			r.WorstRecovery, r.WorstRecoveryKind = f.Recovery, f.Kind
		}
	}

	// Secrets: logs of every run of every process, and every workflow history.
	var logs []string
	for _, p := range []*kobeProc{e.dev, e.server, e.worker} {
		logs = append(logs, p.logFiles()...)
	}
	key, _ := os.ReadFile(filepath.Join(e.state, "secret.key"))
	needles := e.secretNeedles(tr, string(trimSpace(key)))
	r.Secrets = e.scanSecrets(needles, logs)
	for _, f := range r.Secrets.Findings {
		r.violate("secret found: %s", f)
	}
	if r.Secrets.CanaryFound == 0 {
		r.violate("the secrets scan did not find its canary in any workflow history: it could not find a secret either")
	}
}

// killedClusters says whether a fault that kills clusters (a member's process, a reboot) was
// under way at t: a kubeconfig that did not reach its cluster then is the fault's doing.
func killedClusters(faults []fault, t time.Time) bool {
	for _, f := range faults {
		if f.Kind != faultKillMember && f.Kind != faultReboot {
			continue
		}
		end := f.Recovered
		if end.IsZero() {
			end = time.Now()
		}
		if !t.Before(f.At.Add(-time.Second)) && !t.After(end.Add(deadMemberBound)) {
			return true
		}
	}
	return false
}

func (e *env) faultsSoFar(r *Report) []fault { return r.Faults }

// poolRecreatedOf says whether [from, to] overlaps the window of a delete and re-apply of the
// soak pool, or of the schedule pool when sched (from the delete until the pool served again,
// plus a second for the answers in flight).
func poolRecreatedOf(faults []fault, sched bool, from, to time.Time) bool {
	kind := faultRecreatePool
	if sched {
		kind = faultRecreateSchedPool
	}
	for _, f := range faults {
		if f.Kind != kind {
			continue
		}
		end := f.Recovered
		if end.IsZero() {
			end = time.Now()
		}
		if !to.Before(f.At) && !from.After(end.Add(time.Second)) {
			return true
		}
	}
	return false
}

// brokeInstance says whether a fault before at killed the processes of instance.
func brokeInstance(faults []fault, instance string, at time.Time) bool {
	for _, f := range faults {
		if f.At.After(at) {
			continue
		}
		if f.Kind == faultReboot || (f.Kind == faultKillMember && strings.HasSuffix(f.Detail, " "+instance)) {
			return true
		}
	}
	return false
}

// during says which fault window a request overlaps: from the kill until the system served again
// (an unrecovered fault lasts to the end). Backend faults have no window: the API must not 5xx.
func during(faults []fault, a answer) string {
	for _, f := range faults {
		if f.Kind == faultBackend || f.Kind == faultKillMember || f.Kind == faultRecreatePool ||
			f.Kind == faultRecreateSchedPool || frozenKilled(f) != nil || strings.HasPrefix(f.Detail, "skipped") {
			continue // the API itself keeps serving: no 5xx excused
		}
		end := f.Recovered
		if end.IsZero() {
			end = time.Now()
		}
		if !a.Answered.Before(f.At) && !a.Sent.After(end) {
			return f.Kind
		}
	}
	return ""
}

// explainLeaks logs what kobe knows of leaked instances: the pool's view, the leases that name
// them and their audit events, so a failed run says where to look.
func (e *env) explainLeaks(l leaks.Local) {
	if st, err := e.poolStatus(5 * time.Second); err == nil {
		data, _ := json.MarshalIndent(st, "", "  ")
		e.t.Logf("pool status after the drain:\n%s", data)
	} else {
		e.t.Logf("pool status after the drain: %v", err)
	}
	ids := map[string]bool{}
	for _, id := range append(append(l.ProcessIDs(), l.DirIDs()...), l.RowIDs()...) {
		ids[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id := range ids {
		rows, err := e.db.QueryContext(ctx, `SELECT time, action, result, coalesce(detail::text, '') FROM events WHERE target = $1 ORDER BY id`, id)
		if err == nil {
			for rows.Next() {
				var at time.Time
				var action, result, detail string
				_ = rows.Scan(&at, &action, &result, &detail)
				e.t.Logf("event %s %s %s %s %s", at.Format("15:04:05.000"), id, action, result, detail)
			}
			rows.Close()
		}
		rows, err = e.db.QueryContext(ctx, `SELECT id, phase, reason FROM leases WHERE instance_id = $1`, id)
		if err == nil {
			for rows.Next() {
				var lid, phase, reason string
				_ = rows.Scan(&lid, &phase, &reason)
				e.t.Logf("lease %s bound to %s: %s %s", lid, id, phase, reason)
			}
			rows.Close()
		}
	}
}

// checkQuarantinedVisible: every member the store records Quarantined is listed by the API, and
// the pool counts as many.
func (e *env) checkQuarantinedVisible(r *Report) {
	stored := e.instancesIn("Quarantined")
	r.Instances.Quarantined = len(stored)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := e.client(e.adminToken).ListInstances(ctx, api.InstanceFilter{Phase: "Quarantined"})
	if err != nil {
		r.violate("list quarantined instances: %v", err)
		return
	}
	seen := map[string]bool{}
	for _, in := range listed {
		if in.Pool == soakPool {
			seen[in.ID] = true
		}
	}
	for _, id := range stored {
		if !seen[id] {
			r.violate("quarantined instance %s is not listed by GET /v1/instances", id)
		}
	}
	if st, err := e.poolStatus(10 * time.Second); err == nil && st.Quarantined != len(stored) {
		r.violate("the pool counts %d quarantined members, the store %d", st.Quarantined, len(stored))
	}
}

// checkAudit: every lease the store holds has the audit event of its creation and of its end.
func (e *env) checkAudit(r *Report) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := e.db.QueryContext(ctx, `SELECT l.id, l.phase,
		EXISTS (SELECT 1 FROM events e WHERE e.target = l.id AND e.action = 'lease.create'),
		EXISTS (SELECT 1 FROM events e WHERE e.target = l.id AND e.action = 'lease.' || lower(l.phase))
		FROM leases l`)
	if err != nil {
		r.violate("read leases and events: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id, phase string
		var created, ended bool
		if err := rows.Scan(&id, &phase, &created, &ended); err != nil {
			r.violate("read leases and events: %v", err)
			return
		}
		r.Audit.Leases++
		if !created {
			r.violate("lease %s has no lease.create audit event", id)
		}
		if !ended {
			r.violate("lease %s (%s) has no lease.%s audit event", id, phase, strings.ToLower(phase))
		}
	}
}
