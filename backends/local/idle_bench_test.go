package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kunobi-ninja/kobe/backends"
	"github.com/kunobi-ninja/kobe/backends/local"
	"github.com/kunobi-ninja/kobe/testsuite/bench"
	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// envDuration reads a duration from the environment (e.g. KOBE_BENCH_IDLE_WINDOW=30s).
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// footprint is what the processes of a set of instances use, per instance.
type footprint struct {
	// uss is the memory no other process shares (private pages): what one more instance costs.
	rssMiB, pssMiB, ussMiB float64
	byComponent            map[string]float64 // RSS MiB per process name, per instance
	ussByComponent         map[string]float64 // private MiB per process name, per instance
}

// kibField reads a "Name:   123 kB" line of a /proc file, in KiB.
func kibField(path, name string) float64 {
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, name+":") {
			if f := strings.Fields(line); len(f) > 1 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb
			}
		}
	}
	return 0
}

// instanceProcesses lists the processes of the instances, found by the instance directory they name.
func instanceProcesses(b *testing.B, ids []string) []leaks.Process {
	var out []leaks.Process
	for _, id := range ids {
		ps := leaks.ProcessesNaming("/" + id + "/")
		require.NotEmpty(b, ps, "no process of instance %s", id)
		out = append(out, ps...)
	}
	return out
}

func measureFootprint(b *testing.B, ids []string) footprint {
	f := footprint{byComponent: map[string]float64{}, ussByComponent: map[string]float64{}}
	for _, p := range instanceProcesses(b, ids) {
		rss := kibField(fmt.Sprintf("/proc/%d/status", p.PID), "VmRSS") / 1024 / float64(len(ids))
		f.rssMiB += rss
		rollup := fmt.Sprintf("/proc/%d/smaps_rollup", p.PID)
		f.pssMiB += kibField(rollup, "Pss") / 1024 / float64(len(ids))
		uss := (kibField(rollup, "Private_Clean") + kibField(rollup, "Private_Dirty")) / 1024 / float64(len(ids))
		f.ussMiB += uss
		f.byComponent[p.Name] += rss
		f.ussByComponent[p.Name] += uss
	}
	return f
}

// cpuTime is the CPU time (user + system, in clock ticks of 10 ms) the processes used so far.
func cpuTime(b *testing.B, ps []leaks.Process) time.Duration {
	var total time.Duration
	for _, p := range ps {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
		require.NoError(b, err, "%s (pid %d) exited during the measurement", p.Name, p.PID)
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

// idleCores is the CPU the instances' processes use over window, per instance, in cores.
func idleCores(b *testing.B, ids []string, window time.Duration) float64 {
	ps := instanceProcesses(b, ids)
	c0, t0 := cpuTime(b, ps), time.Now()
	time.Sleep(window)
	c1 := cpuTime(b, ps)
	return (c1 - c0).Seconds() / time.Since(t0).Seconds() / float64(len(ids))
}

// BenchmarkIdleInstance measures what a warm local instance (the default components: kine and
// kube-apiserver) costs while nobody uses it: RSS, PSS and private memory (USS: what one more
// instance adds) summed over its processes, and the
// CPU they use over a window, per instance; then, with the instances frozen (backends.Freezer),
// their CPU again and how long a Thaw takes until the API server answers /readyz (on a new
// connection).
//
//	KOBE_BENCH_IDLE_INSTANCES (default 3) instances; KOBE_BENCH_IDLE_SETTLE (30s) after ready
//	before measuring; KOBE_BENCH_IDLE_WINDOW (30s) of CPU observation.
//
// One setting at a time is tried with KOBE_BENCH_APISERVER_ARGS and KOBE_BENCH_KINE_ARGS
// (arguments added to kube-apiserver's and kine's, space-separated) and KOBE_BENCH_ENV
// (NAME=value added to the environment of both); KOBE_BENCH_HEAP_PROFILE=file writes the first
// instance's kube-apiserver heap profile after the settle (with
// KOBE_BENCH_APISERVER_ARGS=--profiling=true).
func BenchmarkIdleInstance(b *testing.B) {
	n := envInt("KOBE_BENCH_IDLE_INSTANCES", 3)
	settle := envDuration("KOBE_BENCH_IDLE_SETTLE", 30*time.Second)
	window := envDuration("KOBE_BENCH_IDLE_WINDOW", 30*time.Second)
	b.Cleanup(local.SetTrial(trialSettings()))
	lb, err := local.New(local.Config{StateDir: b.TempDir(), HostID: "bench", ToolsDir: local.DefaultToolsDir()})
	require.NoError(b, err)
	ctx := context.Background()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("idle-%d", i)
		ids = append(ids, id)
		b.Cleanup(func() { _ = lb.Delete(context.Background(), id) })
		_, err := lb.Create(ctx, spec(id, ""))
		require.NoError(b, err)
		_, err = lb.WaitReady(ctx, id, nil)
		require.NoError(b, err)
	}
	time.Sleep(settle)
	if path := os.Getenv("KOBE_BENCH_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, lb, ids[0], path)
	}
	f := measureFootprint(b, ids)
	cores := idleCores(b, ids, window)

	var names []string
	for name := range f.byComponent {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f MiB (private %.1f)", name, f.byComponent[name], f.ussByComponent[name]))
	}
	// Frozen: the same instances, their processes stopped in place; then each thawed and timed
	// until its API server answers /readyz.
	var frozenCores float64
	var thaw []time.Duration
	if err := lb.Freeze(ctx, ids[0]); errors.Is(err, backends.ErrUnavailableHere) {
		b.Logf("no freezer here, frozen figures skipped: %v", err)
	} else {
		require.NoError(b, err)
		for _, id := range ids[1:] {
			require.NoError(b, lb.Freeze(ctx, id))
		}
		frozenCores = idleCores(b, ids, window)
		for _, id := range ids {
			readyz := readyzProbe(b, lb, id)
			t0 := time.Now()
			require.NoError(b, lb.Thaw(ctx, id))
			for readyz() != nil {
				time.Sleep(time.Millisecond)
			}
			thaw = append(thaw, time.Since(t0))
		}
		b.ReportMetric(frozenCores*100, "frozen-CPU-%-of-a-core")
		b.ReportMetric(ms(pct(thaw, 0.5)), "thaw-to-readyz-p50-ms")
		b.ReportMetric(ms(pct(thaw, 1)), "thaw-to-readyz-max-ms")
		b.Logf("frozen: CPU %.3f %% of a core per instance over %s; thaw → /readyz 200: p50 %s, max %s",
			frozenCores*100, window, pct(thaw, 0.5), pct(thaw, 1))
	}

	b.ReportMetric(f.rssMiB, "idle-RSS-MiB")
	b.ReportMetric(f.pssMiB, "idle-PSS-MiB")
	b.ReportMetric(f.ussMiB, "idle-USS-MiB")
	b.ReportMetric(cores*100, "idle-CPU-%-of-a-core")
	b.Logf("%d warm instances, per instance: RSS %.1f MiB (%s; PSS %.1f MiB, private %.1f MiB), idle CPU %.2f %% of a core over %s",
		n, f.rssMiB, strings.Join(parts, ", "), f.pssMiB, f.ussMiB, cores*100, window)
}

// trialSettings are the arguments and environment the benchmark's environment adds to the
// instances' processes (see BenchmarkIdleInstance).
func trialSettings() (args, env map[string][]string) {
	args = map[string][]string{
		local.ComponentAPIServer: strings.Fields(os.Getenv("KOBE_BENCH_APISERVER_ARGS")),
		"kine":                   strings.Fields(os.Getenv("KOBE_BENCH_KINE_ARGS")),
	}
	all := strings.Fields(os.Getenv("KOBE_BENCH_ENV"))
	env = map[string][]string{local.ComponentAPIServer: all, "kine": all}
	return args, env
}

// writeHeapProfile saves the heap profile of an instance's kube-apiserver (its
// /debug/pprof/heap, served with --profiling=true) to path, for `go tool pprof`.
func writeHeapProfile(b *testing.B, lb *local.Backend, id, path string) {
	cred, err := lb.Credentials(context.Background(), id, backends.CredentialRequest{})
	require.NoError(b, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(b, err)
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(b, err)
	resp, err := hc.Get(cfg.Host + "/debug/pprof/heap")
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode, "heap profile of %s (is --profiling=true set?)", id)
	out, err := os.Create(path)
	require.NoError(b, err)
	defer out.Close()
	_, err = io.Copy(out, resp.Body)
	require.NoError(b, err)
	b.Logf("heap profile of %s's kube-apiserver: %s", id, path)
}

// readyzProbe returns a function that asks the instance's API server for /readyz with its admin
// credential (on a fresh connection each time: a connection opened before a freeze proves
// nothing) and reports nil once it answers 200.
func readyzProbe(b *testing.B, lb *local.Backend, id string) func() error {
	cred, err := lb.Credentials(context.Background(), id, backends.CredentialRequest{})
	require.NoError(b, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Kubeconfig)
	require.NoError(b, err)
	cfg.Timeout = 2 * time.Second
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(b, err)
	return func() error {
		resp, err := hc.Get(cfg.Host + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		hc.CloseIdleConnections()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}
}

// BenchmarkColdStart times, alternating so both see the same machine load, a local instance
// from Create to Ready (WaitReady, deleted afterwards) and etcd + kube-apiserver started the
// envtest way (testsuite/bench.EnvtestStart: envtest's flags, certificates made inside the
// timing) to /readyz 200, KOBE_BENCH_RUNS times each (default 5), and reports the ratio of the
// p50s (the goal: local at most 1.0x).
func BenchmarkColdStart(b *testing.B) {
	runs := envInt("KOBE_BENCH_RUNS", 5)
	tools := local.Tools{Dir: local.DefaultToolsDir()}
	etcd, err := tools.Newest("etcd", "etcd")
	require.NoError(b, err)
	apiserver, err := tools.Kubernetes(kubeVersion, "kube-apiserver")
	require.NoError(b, err)
	lb, err := local.New(local.Config{StateDir: b.TempDir(), HostID: "bench", ToolsDir: tools.Dir})
	require.NoError(b, err)
	ctx := context.Background()
	work := b.TempDir()
	var localStarts, envtestStarts []time.Duration
	for i := 0; i < runs; i++ {
		id := fmt.Sprintf("cold-%d", i)
		t0 := time.Now()
		_, err := lb.Create(ctx, spec(id, ""))
		require.NoError(b, err)
		_, err = lb.WaitReady(ctx, id, nil)
		require.NoError(b, err)
		localStarts = append(localStarts, time.Since(t0))
		require.NoError(b, lb.Delete(ctx, id))

		d, err := bench.EnvtestStart(ctx, etcd, apiserver, filepath.Join(work, fmt.Sprintf("envtest-%d", i)))
		require.NoError(b, err)
		envtestStarts = append(envtestStarts, d)
	}
	l, e := pct(localStarts, 0.5), pct(envtestStarts, 0.5)
	b.ReportMetric(ms(l), "local-create-ready-p50-ms")
	b.ReportMetric(ms(e), "envtest-etcd+apiserver-p50-ms")
	b.ReportMetric(float64(l)/float64(e), "local/envtest-p50")
	b.Logf("%d runs each, alternating: local create → ready p50 %s (%v); etcd + kube-apiserver the envtest way p50 %s (%v); local/envtest %.2fx",
		runs, l, rounded(localStarts), e, rounded(envtestStarts), float64(l)/float64(e))
}
