// Package bench is `make bench`: one program that starts the real `kobe dev` with the local
// backend and measures, in one run so that the ratios hold on a noisy machine, the bind
// latency of a lease from a warm pool through the REST API at several concurrency levels, full
// lease lifecycles per second, a cold local instance and a cold etcd + kube-apiserver (the
// envtest way) side by side, the Temporal engine's own floor on the same server, and the
// memory of `kobe dev` and of a warm instance. cmd/kobe-bench is its main; docs/performance.md
// explains the figures.
//
// The pure parts (percentiles, flags, rendering) have unit tests; the measurement itself runs
// only from the program, never from `go test`.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// progress prints timestamped lines (elapsed since the start) so a user sees where a run is.
type progress struct {
	mu sync.Mutex
	w  io.Writer
	t0 time.Time
}

// Printf prints one progress line.
func (p *progress) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.t0).Round(time.Second)
	fmt.Fprintf(p.w, "[%02d:%02d] %s\n", int(el.Minutes()), int(el.Seconds())%60, fmt.Sprintf(format, args...))
}

// ResolveTools checks that the tools dir holds what a run needs (kube-apiserver of the version,
// etcd, kine) and returns the Kubernetes version to use: version, or the newest built.
func ResolveTools(dir, version string) (string, error) {
	t := local.Tools{Dir: dir}
	versions := t.KubernetesVersions()
	if len(versions) == 0 {
		return "", fmt.Errorf("-tools: no kube-apiserver in %s (run `make tools`, or set KOBE_TOOLS_DIR)", dir)
	}
	if version == "" {
		version = NewestVersion(versions)
	}
	if _, err := t.Kubernetes(version, "kube-apiserver"); err != nil {
		return "", fmt.Errorf("-k8s-version: %w (built: %s)", err, strings.Join(versions, ", "))
	}
	for _, tool := range []string{"etcd", "kine"} {
		if _, err := t.Newest(tool, tool); err != nil {
			return "", fmt.Errorf("-tools: %w", err)
		}
	}
	return version, nil
}

// NewestVersion returns the highest of versions such as v1.37.2, by number (v1.9 < v1.37).
func NewestVersion(versions []string) string {
	if len(versions) == 0 {
		return ""
	}
	s := append([]string(nil), versions...)
	local.SortVersions(s)
	return s[len(s)-1]
}

// Pool names. The bind pool is deleted before the lifecycle pool is applied, so the two
// measurements do not share the machine with each other's clusters.
const (
	bindPool      = "bench"
	lifecyclePool = "bench-cycles"
)

// envtestSettle is how long the kept etcd + kube-apiserver runs again before its idle memory is
// read: long enough for the forced GC its runtime owes after a pause of minutes.
const envtestSettle = 10 * time.Second

// Run does one full run. Whatever happens (an error, ctx cancelled by Ctrl-C), everything it
// started is stopped and its temp dir removed before it returns. The report is returned only
// when every measurement succeeded.
func Run(ctx context.Context, o Options, stderr io.Writer) (rep *Report, err error) {
	log := &progress{w: stderr, t0: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	// The boot CPU weight goes to kobe dev and to the local backend in this process through the
	// environment, as a user sets it; the report says the value used.
	if o.BootCPUShares >= 0 {
		if err := os.Setenv("KOBE_LOCAL_BOOT_CPU_SHARES", strconv.Itoa(o.BootCPUShares)); err != nil {
			return nil, err
		}
	}
	if o.BootCPUShares, err = local.BootCPUSharesFromEnv(); err != nil {
		return nil, err
	}
	r := &Report{Schema: SchemaVersion, Date: time.Now().UTC().Truncate(time.Second), Flags: o}
	r.Machine = ReadMachine()
	r.Kobe = ReadBuild(ctx, o.Kobe)
	log.Printf("kobe bench: %s, %d CPUs, load %s; kobe %s", r.Machine.CPUModel, r.Machine.CPUs, loadString(r.Machine.LoadStart), r.Kobe.Commit)

	work, err := os.MkdirTemp("", "kobe-bench-")
	if err != nil {
		return r, err
	}
	// work is resolved so that the sweep below matches the paths the processes were given.
	if work, err = filepath.EvalSymlinks(work); err != nil {
		return r, err
	}
	// Said at the start: if the bench itself is killed (kill -9), `pkill -9 -f <this dir>/`
	// stops what it left running.
	log.Printf("temp dir %s (kobe dev's state, clusters, cold starts)", work)
	var dev *devProcess
	defer func() {
		log.Printf("cleaning up %s", work)
		if serr := dev.Stop(30 * time.Second); serr != nil {
			log.Printf("  %v", serr)
		}
		// A clean `kobe dev` stop leaves its local instances running (a restart re-adopts
		// them): kill everything that names the bench's temp dir — instances, cold starts.
		if killed := leaks.KillNaming(work + string(os.PathSeparator)); len(killed) > 0 {
			byName := map[string]int{}
			for _, p := range killed {
				byName[p.Name]++
			}
			log.Printf("  killed %d leftover processes %v", len(killed), byName)
			waitNoProcesses(work+string(os.PathSeparator), 10*time.Second)
		}
		if rerr := os.RemoveAll(work); rerr != nil {
			log.Printf("  removing %s: %v", work, rerr)
		}
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
	}()

	// 1. kobe dev: start-up, then idle memory once start-up garbage has settled.
	log.Printf("starting %s dev", o.Kobe)
	dev, startup, err := startDev(ctx, o.Kobe, o.ToolsDir, work)
	if err != nil {
		return r, err
	}
	r.Dev.StartToReadyMs = Ms(startup)
	log.Printf("  ready in %s at %s (Temporal %s)", FormatMs(Ms(startup)), dev.APIURL, dev.TemporalAddr)
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return r, err
	}
	mem, err := ReadMemory(dev.cmd.Process.Pid)
	if err != nil {
		return r, fmt.Errorf("kobe dev memory: %w", err)
	}
	r.Dev.IdleRSSMiB, r.Dev.IdlePSSMiB = round1(float64(mem.RSSKiB)/1024), round1(float64(mem.PSSKiB)/1024)
	log.Printf("  idle RSS %.1f MiB", r.Dev.IdleRSSMiB)

	token, err := dev.AdminToken()
	if err != nil {
		return r, err
	}
	ab, err := newAPIBench(dev.APIURL, token, dev.stateDir, log)
	if err != nil {
		return r, err
	}
	if err := ab.makeClients(ctx, max(o.MaxClientsLevel(), o.LifecycleClients)); err != nil {
		return r, err
	}

	// 2. The warm pool, through PUT /v1/pools/bench. It grows level by level (minReady = the
	// level's clients) rather than starting at the largest: each warm local instance costs a
	// few percent of a core even idle, so fifty of them would slow every refill of the small
	// levels (and their binds) on a 2-core machine. Levels run from the smallest up.
	levels := slices.Sorted(slices.Values(o.Clients))
	most := levels[len(levels)-1]
	r.Pool = PoolShape{Name: bindPool, Backend: "local", KubernetesVersion: o.KubernetesVersion,
		Components: []string{"apiserver"}, MaxConcurrentProvisions: o.MaxProvisions}
	grow := func(size int) (float64, error) {
		log.Printf("pool %s: %d warm local cluster%s (Kubernetes %s), %d provisions at a time", bindPool, size, plural(size), o.KubernetesVersion, o.MaxProvisions)
		t0 := time.Now()
		if err := ab.applyPool(ctx, poolManifest(bindPool, o.KubernetesVersion, size, size+2, o.MaxProvisions, o.ThawedFor(size))); err != nil {
			return 0, err
		}
		if _, err := ab.waitQuiet(ctx, bindPool, size, 30*time.Minute, dev.Alive); err != nil {
			return 0, err
		}
		s := round1(time.Since(t0).Seconds())
		log.Printf("  %d Ready and quiet in %.0f s", size, s)
		return s, nil
	}
	firstWarmup, err := grow(levels[0])
	if err != nil {
		return r, err
	}

	// 3. The engine floor, on the same Temporal server, with the pool of the first level warm
	// and idle: the conditions of that level's binds, which the ratios compare with.
	log.Printf("engine floor: %d Updates, %d UpdateWithStarts on %s", o.Floor, o.Floor, dev.TemporalAddr)
	upd, uws, err := measureFloor(ctx, dev.TemporalAddr, o.Floor, log)
	if err != nil {
		return r, err
	}
	r.Floor = Floor{Update: Summarize(upd), UpdateWithStart: Summarize(uws)}

	// 4. Cold starts, in the same conditions, the two kinds alternating.
	log.Printf("cold starts, %d of each: a local instance (local backend in-process), etcd + kube-apiserver the envtest way", o.Cold)
	cl, ce, envtest, err := coldStarts(ctx, local.Tools{Dir: o.ToolsDir}, o.KubernetesVersion, work, o.Cold, log)
	if err != nil {
		return r, err
	}
	defer envtest.Stop() // stopped earlier once measured; Stop twice is harmless
	r.Cold.Local = Summarize(cl)
	r.Cold.Envtest = Summarize(ce)

	// 5. Bind latency per concurrency level, the pool grown to the level's size first. Every
	// round starts on a full, quiet pool: the previous round's clusters released, torn down
	// and replaced. At the largest level, the memory and idle CPU of its warm instances.
	for li, c := range levels {
		rounds := o.RoundsFor(c)
		level := BindLevel{Clients: c, Rounds: rounds, PoolMinReady: c, PoolMaxClusters: c + 2, WarmupSeconds: firstWarmup,
			ThawedSpares: o.ThawedFor(c)}
		if li > 0 {
			if level.WarmupSeconds, err = grow(c); err != nil {
				return r, err
			}
		}
		if c == most {
			if r.WarmInstances, err = MeasureInstances(ctx, dev.stateDir, c); err != nil {
				return r, err
			}
			wi := r.WarmInstances
			log.Printf("  per warm instance: RSS %.1f MiB, PSS %.1f MiB (%s), idle CPU %.1f %% of a core",
				wi.RSSMiB, wi.PSSMiB, strings.Join(wi.Components, ", "), 100*wi.IdleCoresPerInstance)
			// The baseline: the last cold start's etcd + kube-apiserver, paused since, run again
			// beside the warm instances and measured the same way.
			if r.IdleEnvtest, err = MeasureEnvtest(ctx, envtest, envtestSettle); err != nil {
				return r, fmt.Errorf("etcd + kube-apiserver the envtest way, idle: %w", err)
			}
			envtest.Stop()
			ie := r.IdleEnvtest
			log.Printf("  etcd + kube-apiserver the envtest way, idle: RSS %.1f MiB, PSS %.1f MiB (%s), idle CPU %.1f %% of a core",
				ie.RSSMiB, ie.PSSMiB, strings.Join(ie.Components, ", "), 100*ie.IdleCoresPerInstance)
		}
		log.Printf("bind latency: %d client%s, %d round%s", c, plural(c), rounds, plural(rounds))
		var samples, firsts, alone []time.Duration
		var burst, cpu time.Duration
		var hostBusy, hostTotal int64
		answers503 := ab.answers503.n.Load()
		for round := range rounds {
			if _, err := ab.waitQuiet(ctx, bindPool, c, 15*time.Minute, dev.Alive); err != nil {
				return r, err
			}
			cpu0, err := ReadCPU(dev.cmd.Process.Pid)
			if err != nil {
				return r, fmt.Errorf("kobe dev CPU time: %w", err)
			}
			busy0, total0, herr := ReadHostCPU()
			if herr != nil {
				return r, fmt.Errorf("host CPU time: %w", herr)
			}
			t0 := time.Now()
			leases, err := ab.bindRound(ctx, bindPool, c, o.FirstRequestAtOnce)
			burst += time.Since(t0)
			if busy1, total1, herr := ReadHostCPU(); herr == nil {
				hostBusy, hostTotal = hostBusy+busy1-busy0, hostTotal+total1-total0
			}
			if cpu1, cerr := ReadCPU(dev.cmd.Process.Pid); cerr == nil {
				cpu += cpu1 - cpu0
			} else if err == nil {
				err = fmt.Errorf("kobe dev CPU time: %w", cerr)
			}
			if err == nil && round == 0 {
				// Outside the timing, before the release revokes it: a kubeconfig the API
				// handed out really works.
				level.ServerVersion, err = serverVersion(leases[0].Kubeconfig)
			}
			// Released whatever happened, so that a failed round holds no clusters.
			rerr := ab.release(ctx, leases)
			if err != nil {
				return r, fmt.Errorf("bind, %d clients, round %d: %w", c, round+1, err)
			}
			if rerr != nil {
				return r, rerr
			}
			for _, l := range leases {
				samples = append(samples, l.Latency)
				firsts = append(firsts, l.FirstRequest)
				alone = append(alone, l.FirstRequestAlone)
			}
		}
		level.Retries503 = int(ab.answers503.n.Load() - answers503)
		level.Latency = Summarize(samples)
		level.FirstRequest = Summarize(firsts)
		level.FirstRequestAlone = Summarize(alone)
		fl, flChild, err := measureConcurrentFloor(ctx, dev.TemporalAddr, c, max(1, len(samples)/c))
		if err != nil {
			return r, fmt.Errorf("engine floor at %d clients: %w", c, err)
		}
		level.FloorUpdate, level.FloorUpdateStartingChild = Summarize(fl), Summarize(flChild)
		level.BurstSeconds = round1(burst.Seconds())
		level.BindsPerSecond = Ratio(float64(len(samples)), burst.Seconds())
		level.KobeCores = Ratio(cpu.Seconds(), burst.Seconds())
		level.KobeCPUPerBindMs = Ms(cpu / time.Duration(len(samples)))
		// Busy ticks over all ticks is the busy share of every CPU; times the CPUs, cores.
		level.HostCores = round2(Ratio(float64(hostBusy), float64(hostTotal)) * float64(r.Machine.CPUs))
		level.Load = LoadAverage()[0]
		r.Bind = append(r.Bind, level)
		log.Printf("  p50 %s, p95 %s, max %s (kubeconfig works: server %s)", FormatMs(level.Latency.P50Ms),
			FormatMs(level.Latency.P95Ms), FormatMs(level.Latency.MaxMs), level.ServerVersion)
	}

	// 7. Lifecycles on a pool of their own, warm with one cluster per client: in a sustained
	// run every lease consumes a cluster (an instance is never reused), so the rate is set by
	// how fast the pool tears down and re-provisions, not by the size of a warm buffer.
	log.Printf("deleting pool %s", bindPool)
	if err := ab.deletePool(ctx, bindPool, 10*time.Minute); err != nil {
		return r, err
	}
	n := o.LifecycleClients
	log.Printf("lifecycles: %d from %d clients on pool %s (%d warm)", o.Lifecycles, n, lifecyclePool, n)
	if err := ab.applyPool(ctx, poolManifest(lifecyclePool, o.KubernetesVersion, n, 2*n, o.MaxProvisions, n)); err != nil {
		return r, err
	}
	if _, err := ab.waitQuiet(ctx, lifecyclePool, n, 15*time.Minute, dev.Alive); err != nil {
		return r, err
	}
	lcs, elapsed, err := ab.lifecycles(ctx, lifecyclePool, o.Lifecycles, n)
	if err != nil {
		return r, fmt.Errorf("lifecycles: %w", err)
	}
	var total, bind, teardown []time.Duration
	for _, lc := range lcs {
		total, bind, teardown = append(total, lc.total), append(bind, lc.bind), append(teardown, lc.teardown)
	}
	r.Lifecycles = Lifecycles{Count: o.Lifecycles, Clients: n, PoolMinReady: n, Seconds: round1(elapsed.Seconds()),
		PerSecond: Ratio(float64(o.Lifecycles), elapsed.Seconds()),
		Lifecycle: Summarize(total), Bind: Summarize(bind), Teardown: Summarize(teardown)}
	log.Printf("  %.2f lifecycles/s (%d in %.1f s)", r.Lifecycles.PerSecond, o.Lifecycles, elapsed.Seconds())
	if err := dev.Alive(); err != nil {
		return r, err
	}
	// 8. The same number of cycles with the backend alone, once the lifecycle pool is gone.
	log.Printf("deleting pool %s; the local backend's own create → ready → delete, %d from %d clients", lifecyclePool, o.Lifecycles, n)
	if err := ab.deletePool(ctx, lifecyclePool, 10*time.Minute); err != nil {
		return r, err
	}
	be, err := backendCycles(ctx, local.Tools{Dir: o.ToolsDir}, o.KubernetesVersion, work, o.Lifecycles, n, log)
	if err != nil {
		return r, fmt.Errorf("backend cycles: %w", err)
	}
	r.Lifecycles.BackendSeconds = round1(be.Seconds())
	r.Lifecycles.BackendPerSecond = Ratio(float64(o.Lifecycles), be.Seconds())
	r.Lifecycles.OverBackend = Ratio(r.Lifecycles.PerSecond, r.Lifecycles.BackendPerSecond)

	r.ComputeRatios()
	r.Machine.LoadEnd = LoadAverage()
	r.DurationSeconds = round1(time.Since(log.t0).Seconds())
	return r, nil
}

// waitNoProcesses waits until no process names s (killed processes take a moment to go).
func waitNoProcesses(s string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && len(leaks.ProcessesNaming(s)) > 0 {
		time.Sleep(100 * time.Millisecond)
	}
}
