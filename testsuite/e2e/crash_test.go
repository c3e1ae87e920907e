package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kunobi-ninja/kobe/api"

	"github.com/kunobi-ninja/kobe/lease"
	"github.com/kunobi-ninja/kobe/pool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	localbackend "github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/internal/logging"
	"github.com/kunobi-ninja/kobe/internal/store"
	"github.com/kunobi-ninja/kobe/poolspec"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// The crash tests run kobe as two processes on one state directory — `kobe dev --no-worker`
// (embedded Temporal, API, store) and `kobe worker` (workflows, activities, the local backend's
// clusters) — and kill -9 one of them at three moments of a pool's life: while its members are
// being provisioned, while a burst of leases is being bound, and while released instances are
// being torn down. After each restart every lease must reach Bound or a terminal phase, and the
// host must hold exactly the pool's members — as processes, instance directories and store
// rows — and nothing else. At the end the pool is scaled to zero and everything is stopped:
// nothing may remain.

// TestCrashWorker kills -9 the worker process (`kobe worker`) at each moment.
func TestCrashWorker(t *testing.T) { runCrashScenarios(t, victimWorker) }

// TestCrashServer kills -9 the embedded Temporal server process (`kobe dev --no-worker`) at
// each moment; the worker keeps running and reconnects.
func TestCrashServer(t *testing.T) { runCrashScenarios(t, victimServer) }

type victim string

const (
	victimWorker victim = "worker"
	victimServer victim = "server"
)

const (
	crashPool     = "crash"
	crashWarm     = 2 // the pool's warm target
	crashLeases   = 2 // leases of the burst
	crashSettle   = 5 * time.Minute
	crashRecovery = 6 * time.Minute
)

func runCrashScenarios(t *testing.T, v victim) {
	e := newCrashEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	var leaseIDs []string
	runs := map[string]client.WorkflowRun{}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"provision", func(t *testing.T) {
			// Pool members are Creating: their processes exist and their rows say Creating.
			require.NoError(t, pool.Apply(ctx, e.c, e.s, e.manifest(crashWarm), pool.ApplyOptions{TaskQueue: "kobe"}))
			var creating string
			e.waitFor(t, "a member with processes and a Creating row", 3*time.Minute, 10*time.Millisecond, func() bool {
				l := e.count(t)
				for id, phase := range l.Rows {
					if phase == string(api.InstanceCreating) && len(l.Processes[id]) > 0 {
						creating = id
						return true
					}
				}
				return false
			})
			e.kill(t, v)
			t.Logf("killed the %s while %s was being provisioned: %s", v, creating, e.count(t))
			restarted := e.restart(t, v)

			st := e.settle(t, crashWarm, 0, crashRecovery)
			t.Logf("RECOVERY provision/%s: pool Ready %d/%d %s after the restart; %s", v, st.Ready, crashWarm,
				time.Since(restarted).Round(time.Millisecond), e.count(t))
		}},
		{"bind", func(t *testing.T) {
			// A burst of leases, killed as they are being claimed: as soon as the first lease has
			// projected itself into the store (it signals its claim to the pool right after).
			for i := 1; i <= crashLeases; i++ {
				id := fmt.Sprintf("lease-%s-%d", v, i)
				run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kobe"},
					lease.WorkflowName, lease.Input{LeaseID: id, Pool: crashPool, Principal: "crash-test",
						LeaseTerms: poolspec.LeaseTerms{TTL: 10 * time.Minute, MaxTTL: time.Hour, MaxExtensions: 2}})
				require.NoError(t, err)
				leaseIDs = append(leaseIDs, id)
				runs[id] = run
			}
			e.waitFor(t, "a lease row", time.Minute, 2*time.Millisecond, func() bool {
				rows, err := e.s.ListLeases(ctx, store.LeaseFilter{Pool: crashPool})
				return err == nil && len(rows) > 0
			})
			e.kill(t, v)
			t.Logf("killed the %s while %d leases were being claimed; lease rows then: %s", v, crashLeases, e.leaseRows(t, leaseIDs))
			restarted := e.restart(t, v)

			// Every lease reaches Bound, or fails with a reason: none stays Pending.
			views := map[string]lease.View{}
			e.waitFor(t, "every lease Bound or ended", crashRecovery, 100*time.Millisecond, func() bool {
				for _, id := range leaseIDs {
					lv, ok := e.leaseView(id)
					if !ok || lv.Phase == api.LeasePending || lv.Phase == "" {
						return false
					}
					views[id] = lv
				}
				return true
			})
			bound := time.Since(restarted)
			instances := map[string]string{}
			for _, id := range leaseIDs {
				lv := views[id]
				if lv.Phase != api.LeaseBound {
					assert.NotEmpty(t, lv.Reason, "lease %s ended %s without a reason", id, lv.Phase)
					continue
				}
				require.NotEmpty(t, lv.InstanceID)
				other, dup := instances[lv.InstanceID]
				require.False(t, dup, "instance %s granted to %s and %s", lv.InstanceID, other, id)
				instances[lv.InstanceID] = id
				cred, err := e.s.GetLeaseCredential(ctx, id)
				require.NoError(t, err, "lease %s is Bound: its sealed kubeconfig is stored", id)
				assert.NotEmpty(t, cred.Sealed)
				// The lease projects its phase into the store right after it changed it.
				e.waitFor(t, "lease "+id+" Bound in the store", time.Minute, 50*time.Millisecond, func() bool {
					row, err := e.s.GetLease(ctx, id)
					return err == nil && row.Phase == api.LeaseBound && row.InstanceID == lv.InstanceID
				})
			}
			st := e.settle(t, crashWarm, len(instances), crashRecovery)
			for _, m := range st.Members {
				if m.Phase == pool.MemberLeased {
					assert.Equal(t, instances[m.ID], m.LeaseID, "the pool and the lease agree on %s", m.ID)
				}
			}
			t.Logf("RECOVERY bind/%s: %d/%d leases Bound %s after the restart (%v), pool refilled (Ready %d, Leased %d) after %s; %s",
				v, len(instances), crashLeases, bound.Round(time.Millisecond), instances, st.Ready, st.Leased,
				time.Since(restarted).Round(time.Millisecond), e.count(t))
		}},
		{"teardown", func(t *testing.T) {
			// Release every lease; kill as soon as a released instance is being deleted.
			leased := map[string]bool{}
			for _, id := range leaseIDs {
				if lv, ok := e.leaseView(id); ok && lv.InstanceID != "" {
					leased[lv.InstanceID] = true
				}
				require.NoError(t, e.c.SignalWorkflow(ctx, id, "", lease.SignalReleaseLease, nil))
			}
			var deleting string
			e.waitFor(t, "a released instance Deleting", 3*time.Minute, 5*time.Millisecond, func() bool {
				rows, err := e.s.ListInstances(ctx, store.InstanceFilter{Pool: crashPool, Phase: api.InstanceDeleting})
				if err == nil && len(rows) > 0 {
					deleting = rows[0].ID
					return true
				}
				return false
			})
			e.kill(t, v)
			t.Logf("killed the %s while %s was being deleted: %s", v, deleting, e.count(t))
			restarted := e.restart(t, v)

			for _, id := range leaseIDs {
				var lv lease.View
				require.NoError(t, runs[id].Get(ctx, &lv), "lease %s", id)
				requireTerminal(t, lv)
				row, err := e.s.GetLease(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, lv.Phase, row.Phase, "the store agrees with lease %s", id)
				_, err = e.s.GetLeaseCredential(ctx, id)
				assert.True(t, errors.Is(err, store.ErrNotFound), "lease %s's credential is forgotten", id)
			}
			st := e.settle(t, crashWarm, 0, crashRecovery)
			for _, m := range st.Members {
				assert.False(t, leased[m.ID], "released instance %s is not reused", m.ID)
			}
			t.Logf("RECOVERY teardown/%s: %d released instances gone, pool settled (Ready %d) %s after the restart; %s",
				v, len(leased), st.Ready, time.Since(restarted).Round(time.Millisecond), e.count(t))
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %s failed: the later steps depend on it", s.name)
		}
	}

	// Scale the pool to zero: every member torn down, nothing left anywhere.
	require.NoError(t, pool.Apply(ctx, e.c, e.s, e.manifest(0), pool.ApplyOptions{TaskQueue: "kobe"}))
	t0 := time.Now()
	e.settle(t, 0, 0, crashSettle)
	l := e.count(t)
	require.True(t, l.Empty(), "scaled to zero, nothing remains: %s", l)
	t.Logf("scaled to zero in %s: %s", time.Since(t0).Round(time.Millisecond), l)
	require.NoError(t, e.c.TerminateWorkflow(ctx, pool.WorkflowID(crashPool), "", "test over"))

	// A clean stop of both processes; still nothing running.
	for _, p := range []*proc{e.worker, e.dev} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 0, p.wait(t, time.Minute))
	}
	assert.Empty(t, leaks.ProcessesNaming(e.state+"/"), "no process names the state dir")
	entries, _ := os.ReadDir(leaks.InstancesDir(e.state))
	assert.Empty(t, entries, "no instance directory")
}

func requireTerminal(t *testing.T, lv lease.View) {
	t.Helper()
	switch lv.Phase {
	case api.LeaseReleased, api.LeaseExpired:
	case api.LeaseFailed:
		require.NotEmpty(t, lv.Reason, "lease %s failed without a reason code", lv.ID)
	default:
		require.Failf(t, "lease not terminal", "lease %s ended in phase %q", lv.ID, lv.Phase)
	}
}

// crashEnv is `kobe dev --no-worker` and `kobe worker` on one state dir, with the test's own
// Temporal client and store connection.
type crashEnv struct {
	t       *testing.T // the whole test: owns the processes
	state   string
	logs    string // the processes' output files
	ports   devPorts
	metrics int
	version string
	dev     *proc
	worker  *proc
	c       client.Client
	s       store.Store
}

func newCrashEnv(t *testing.T) *crashEnv {
	tools := localbackend.Tools{Dir: localbackend.DefaultToolsDir()}
	versions := tools.KubernetesVersions()
	if len(versions) == 0 {
		t.Fatalf("no Kubernetes binaries in %s: run `make tools` or set KOBE_TOOLS_DIR", tools.Dir)
	}
	state := filepath.Join(t.TempDir(), "state")
	// Instances run in their own process groups and outlive a killed kobe: whatever a failed run
	// leaves is killed — only what names this test's state dir. (Registered first: runs last.)
	t.Cleanup(func() {
		if ps := leaks.KillNaming(state + "/"); len(ps) > 0 {
			t.Logf("cleanup killed leftover processes: %v", ps)
		}
	})
	e := &crashEnv{t: t, state: state, logs: t.TempDir(), ports: newDevPorts(t), metrics: freePort(t), version: versions[len(versions)-1]}
	e.startDev(t)
	e.startWorker(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: fmt.Sprintf("127.0.0.1:%d", e.ports.temporal), Namespace: "default",
		Logger: logging.NewSDKLogger(zap.NewExample(zap.IncreaseLevel(zap.ErrorLevel)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	e.c = c
	s, err := store.Open(ctx, "sqlite://"+filepath.Join(state, "kobe.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	e.s = s
	return e
}

func (e *crashEnv) manifest(warm int) *poolspec.ClusterPool {
	maxClusters, maxProv := 2*crashWarm, 2
	return &poolspec.ClusterPool{
		APIVersion: poolspec.APIVersion, Kind: poolspec.Kind,
		Metadata: poolspec.Metadata{Name: crashPool},
		Spec: poolspec.Spec{
			TTL:                     "10m",
			MaxConcurrentProvisions: &maxProv,
			Backend:                 poolspec.Backend{Type: "local", Sections: map[string]json.RawMessage{"local": []byte(`{"components":["apiserver"]}`)}},
			Cluster:                 poolspec.Cluster{Version: e.version},
			Scaling: &poolspec.Scaling{MinReady: &warm, MaxClusters: &maxClusters,
				ScaleDownAfter: "2s", QueueTimeout: "10m"},
		},
	}
}

// startDev starts `kobe dev --no-worker` and waits for its /readyz (Temporal and store).
func (e *crashEnv) startDev(t *testing.T) {
	t0 := time.Now()
	e.dev = e.start(t, "dev", append(e.ports.args(e.state), "--no-worker", "--ui-port", "0")...)
	waitReady(t, e.ports.apiURL(), 2*time.Minute)
	t.Logf("kobe dev --no-worker ready in %s", time.Since(t0).Round(time.Millisecond))
}

// startWorker starts `kobe worker` against dev's Temporal and store and waits for its /healthz.
func (e *crashEnv) startWorker(t *testing.T) {
	t0 := time.Now()
	e.worker = e.start(t, "worker", "worker",
		"--temporal-address", fmt.Sprintf("127.0.0.1:%d", e.ports.temporal),
		"--store", "sqlite://"+filepath.Join(e.state, "kobe.db"),
		"--state-dir", e.state,
		"--secret-key-file", filepath.Join(e.state, "secret.key"),
		"--metrics-address", fmt.Sprintf("127.0.0.1:%d", e.metrics))
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", e.metrics)
	e.waitFor(t, "worker /healthz", 2*time.Minute, 20*time.Millisecond, func() bool {
		select {
		case <-e.worker.done:
			o, er := e.worker.output(t)
			t.Fatalf("kobe worker exited: %v\nstdout:\n%s\nstderr:\n%s", e.worker.cmd.ProcessState, o, er)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	t.Logf("kobe worker up in %s", time.Since(t0).Round(time.Millisecond))
}

// start runs a kobe process. It belongs to the whole test, not to the step (subtest) that
// started it: it is killed when the test ends and, if the test failed, the tail of its output
// is logged. Errors starting it fail t, the step.
func (e *crashEnv) start(t *testing.T, name string, args ...string) *proc {
	dir, err := os.MkdirTemp(e.logs, name+"-")
	require.NoError(t, err)
	out, err := os.Create(filepath.Join(dir, "stdout"))
	require.NoError(t, err)
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	cmd := exec.Command(kobeBin, args...)
	cmd.Stdout, cmd.Stderr = out, errf
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stdout: out, stderr: errf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if e.t.Failed() {
			o, _ := os.ReadFile(out.Name())
			er, _ := os.ReadFile(errf.Name())
			e.t.Logf("--- %s (pid %d) stdout:\n%s\n--- stderr (tail):\n%s", name, cmd.Process.Pid, tail(string(o), 20), tail(string(er), 60))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (e *crashEnv) kill(t *testing.T, v victim) {
	p := e.worker
	if v == victimServer {
		p = e.dev
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// restart starts the killed process again on the same state dir and returns when it was exec'd.
func (e *crashEnv) restart(t *testing.T, v victim) time.Time {
	t0 := time.Now()
	if v == victimServer {
		e.startDev(t)
	} else {
		e.startWorker(t)
	}
	return t0
}

func (e *crashEnv) count(t *testing.T) leaks.Local {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := leaks.CountLocalInstances(ctx, e.state, e.s, "")
	require.NoError(t, err)
	return l
}

// poolStatus queries the pool; false while Temporal or the worker cannot answer.
func (e *crashEnv) poolStatus() (pool.Status, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st pool.Status
	v, err := e.c.QueryWorkflow(ctx, pool.WorkflowID(crashPool), "", pool.QueryPoolStatus)
	if err != nil || v.Get(&st) != nil {
		return st, false
	}
	return st, true
}

func (e *crashEnv) leaseView(id string) (lease.View, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lv lease.View
	v, err := e.c.QueryWorkflow(ctx, id, "", lease.QueryLease)
	if err != nil || v.Get(&lv) != nil {
		return lv, false
	}
	return lv, true
}

func (e *crashEnv) leaseRows(t *testing.T, ids []string) string {
	var out []string
	for _, id := range ids {
		row, err := e.s.GetLease(context.Background(), id)
		if err != nil {
			out = append(out, id+"=(none)")
			continue
		}
		out = append(out, id+"="+string(row.Phase))
	}
	return strings.Join(out, " ")
}

func (e *crashEnv) waitFor(t *testing.T, what string, timeout, every time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; %s", what, timeout, e.count(t))
		}
		time.Sleep(every)
	}
}

// settle waits until the pool holds exactly ready Ready and leased Leased members and nothing
// in flight, and the host holds exactly those instances — each with one kine and one
// kube-apiserver, a directory and a store row — and nothing else.
func (e *crashEnv) settle(t *testing.T, ready, leased int, timeout time.Duration) pool.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no answer from the pool"
	for time.Now().Before(deadline) {
		st, ok := e.poolStatus()
		switch {
		case !ok:
		case st.Ready != ready || st.Leased != leased || st.Creating != 0 || st.Deleting != 0 || st.QueueDepth != 0:
			last = fmt.Sprintf("pool %s: ready %d leased %d creating %d deleting %d queue %d",
				st.Phase, st.Ready, st.Leased, st.Creating, st.Deleting, st.QueueDepth)
		default:
			var ids []string
			for _, m := range st.Members {
				ids = append(ids, m.ID)
			}
			l := e.count(t)
			diff := l.Diff(ids)
			for _, id := range ids {
				ps := l.Processes[id]
				if n, k := len(leaks.Named(ps, "kube-apiserver")), len(leaks.Named(ps, "kine")); n != 1 || k != 1 || len(ps) != 2 {
					diff += fmt.Sprintf("; %s runs %v (want one kine, one kube-apiserver)", id, ps)
				}
				if ph := l.Rows[id]; ph != string(api.InstanceReady) {
					diff += fmt.Sprintf("; %s's row is %q", id, ph)
				}
			}
			if diff == "" {
				return st
			}
			last = fmt.Sprintf("members %v; %s", sortedCopy(ids), diff)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("pool not settled at %d ready, %d leased within %s: %s; host: %s", ready, leased, timeout, last, e.count(t))
	return pool.Status{}
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}
