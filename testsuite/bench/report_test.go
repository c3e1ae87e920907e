package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleReport is a report with made-up figures, for rendering only.
func sampleReport() *Report {
	lat := func(p50 float64) Latency {
		return Latency{N: 10, P50Ms: p50, P95Ms: p50 * 2, P99Ms: p50 * 3, MaxMs: p50 * 3, MeanMs: p50, SamplesMs: []float64{p50}}
	}
	r := &Report{
		Schema: SchemaVersion, Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), DurationSeconds: 612,
		Machine: Machine{Hostname: "box", CPUs: 2, CPUModel: "Some CPU @ 2.00GHz", MemTotalMiB: 24000,
			LoadStart: [3]float64{1.5, 1, 0.5}, LoadEnd: [3]float64{3, 2, 1}, GoVersion: "go1.26.8", OS: "linux", Arch: "amd64"},
		Kobe:  Build{Commit: "abc1234-dirty", Version: "kobe v0.1.0-dev (commit abc)"},
		Flags: DefaultOptions(),
		Pool: PoolShape{Name: "bench", Backend: "local", KubernetesVersion: "v1.37.2", Components: []string{"apiserver"},
			MaxConcurrentProvisions: 4},
		Dev: DevFigures{StartToReadyMs: 2345.6, IdleRSSMiB: 180.2, IdlePSSMiB: 170.1},
		WarmInstances: InstanceMemory{Instances: 50, Components: []string{"kine", "kube-apiserver"}, RSSMiB: 250, PSSMiB: 200,
			RSSMiBByComponent: map[string]float64{"kine": 40, "kube-apiserver": 210},
			PSSMiBByComponent: map[string]float64{"kine": 30, "kube-apiserver": 170}, IdleCoresPerInstance: 0.0234},
		IdleEnvtest: InstanceMemory{Instances: 1, Components: []string{"etcd", "kube-apiserver"}, RSSMiB: 400, PSSMiB: 250,
			RSSMiBByComponent: map[string]float64{"etcd": 60, "kube-apiserver": 340},
			PSSMiBByComponent: map[string]float64{"etcd": 55, "kube-apiserver": 195}, IdleCoresPerInstance: 0.031},
		Bind: []BindLevel{
			{Clients: 10, Rounds: 1, PoolMinReady: 10, PoolMaxClusters: 12, WarmupSeconds: 40, Latency: lat(300), ServerVersion: "v1.37.2",
				BurstSeconds: 0.9, BindsPerSecond: 11.1, KobeCores: 1.85, KobeCPUPerBindMs: 166,
				FloorUpdate: lat(50), FloorUpdateStartingChild: lat(150)},
			{Clients: 1, Rounds: 10, PoolMinReady: 1, PoolMaxClusters: 3, WarmupSeconds: 6, Latency: lat(120), ServerVersion: "v1.37.2"},
		},
		Lifecycles: Lifecycles{Count: 20, Clients: 4, PoolMinReady: 4, Seconds: 40, PerSecond: 0.5,
			Lifecycle: lat(7000), Bind: lat(2000), Teardown: lat(900)},
		Cold:  Cold{Local: lat(3600), Envtest: lat(6000)},
		Floor: Floor{Update: lat(4), UpdateWithStart: lat(12)},
	}
	r.ComputeRatios()
	return r
}

func TestComputeRatiosUsesTheSmallestLevel(t *testing.T) {
	r := sampleReport()
	assert.Equal(t, 1, r.Ratios.BindClients, "the 1-client level is the reference even when listed second")
	assert.Equal(t, 120.0, r.Ratios.BindP50Ms)
	assert.Equal(t, 30.0, r.Ratios.ColdLocalOverBind)
	assert.Equal(t, 50.0, r.Ratios.EnvtestOverBind)
	assert.Equal(t, 30.0, r.Ratios.BindOverUpdate)
	assert.Equal(t, 10.0, r.Ratios.BindOverUpdateWithStart)
	assert.Equal(t, 0.6, r.Ratios.ColdLocalOverEnvtest, "cold local over envtest")
	assert.Equal(t, 0.63, r.Ratios.WarmRSSOverEnvtest, "warm instance RSS over envtest's (250 / 400, rounded)")
}

func TestRenderTable(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, sampleReport().Render(&buf))
	out := buf.String()
	for _, want := range []string{
		"machine:  box, 2 CPUs (Some CPU @ 2.00GHz), 24000 MiB memory, load average 1.50/1.00/0.50 at start, 3.00/2.00/1.00 at end",
		"go:       go1.26.8 linux/amd64",
		"kobe:     commit abc1234-dirty, `kobe version`: kobe v0.1.0-dev (commit abc)",
		"flags:    -clients 1,10,50 -rounds 0 -lifecycles 20",
		"pool:     bench, backend local, Kubernetes v1.37.2, components apiserver, maxConcurrentProvisions 4; minReady = the level's clients (warm: 10 in 40 s, 1 in 6 s)",
		"idle CPU, per instance",
		"2.3 % of a core",
		"2.35 s",
		"180.2 MiB (170.1 MiB)",
		"0.50 /s",
		"11.1 /s; 1.85, 166 ms",
		"is 30.0x faster than a cold local instance (3.60 s)",
		"is 50.0x faster than etcd + kube-apiserver the envtest way (6.00 s)",
		"costs 30.0x an engine Update (4.00 ms)",
		"costs 10.0x an engine UpdateWithStart (12.0 ms)",
		"cold local instance p50 (3.60 s) takes 0.60x etcd + kube-apiserver the envtest way (6.00 s)",
		"    that request alone (sent once the round was bound)",
		"etcd + kube-apiserver (envtest), idle: RSS (PSS)",
		"400.0 MiB (250.0 MiB)",
		"340.0 MiB (195.0 MiB)",
		"3.1 % of a core",
		"warm local instance RSS (250.0 MiB) is 0.63x an idle etcd + kube-apiserver the envtest way (400.0 MiB)",
		"RATIOS per level (bind / the engine's Update at the same concurrency)\n  10 clients: p50 6.0x (300 ms / 50.0 ms), p99 6.0x (900 ms / 150 ms)",
		"RATIOS per level (bind / the engine's Update starting a child workflow, same concurrency)\n  10 clients: p50 2.0x (300 ms / 150 ms), p99 2.0x (900 ms / 450 ms)",
	} {
		assert.Contains(t, out, want)
	}

	// The table's rows all have the same width up to the last column: aligned.
	var table []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FIGURE") {
			in = true
		}
		if in && line == "" {
			break
		}
		if in {
			table = append(table, line)
		}
	}
	require.Len(t, table, 1+2+1+2+1+1+2+1+2*8+5+2+2, "header, dev (2), instance + 2 components + idle CPU, envtest pair + 2 components + idle CPU, 2 bind levels (8 rows each), lifecycles (4) + the backend alone, cold (2), floor (2)")
	// Aligned: every row ends either where the header ends (rows with percentiles) or where
	// its P50 / VALUE column ends (rows with one value).
	valueEnd := strings.Index(table[0], "P50 / VALUE") + len("P50 / VALUE")
	for _, line := range table {
		n := len([]rune(line))
		assert.True(t, n == len(table[0]) || n == valueEnd, "row %q is aligned with the header", line)
	}
	assert.Contains(t, table[0], "P50 / VALUE")
	assert.Regexp(t, `^bind \(POST → Bound \+ kubeconfig\), 10 clients +10 +300 ms +600 ms +900 ms +900 ms$`, table[11])
	assert.Contains(t, table[12], "binds/s; kobe dev CPU: cores, per bind")
}

func TestWriteJSONStableNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.json")
	require.NoError(t, sampleReport().WriteJSON(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	for _, k := range []string{"schema", "date", "durationSeconds", "machine", "kobe", "flags", "pool", "dev",
		"warmInstances", "idleEnvtest", "bind", "lifecycles", "cold", "floor", "ratios"} {
		assert.Contains(t, doc, k)
	}
	assert.Equal(t, "kobe-bench/1", doc["schema"])
	bind := doc["bind"].([]any)[1].(map[string]any)
	assert.Equal(t, 1.0, bind["clients"])
	assert.Equal(t, 120.0, bind["latency"].(map[string]any)["p50Ms"])
	ratios := doc["ratios"].(map[string]any)
	assert.Equal(t, 30.0, ratios["coldLocalOverBind"])
	assert.Equal(t, 10.0, ratios["bindOverUpdateWithStart"])
	m := doc["machine"].(map[string]any)
	assert.Equal(t, 2.0, m["cpus"])
	assert.Equal(t, []any{1.5, 1.0, 0.5}, m["loadAvgStart"])
	assert.Equal(t, 250.0, doc["warmInstances"].(map[string]any)["rssMiBPerInstance"])
	assert.Equal(t, 400.0, doc["idleEnvtest"].(map[string]any)["rssMiBPerInstance"])
	assert.Equal(t, 0.63, ratios["warmRssOverEnvtest"])
	assert.Equal(t, []any{1.0, 10.0, 50.0}, doc["flags"].(map[string]any)["clients"], "the flags are recorded")
}

func TestFormatMs(t *testing.T) {
	assert.Equal(t, "0.85 ms", FormatMs(0.853))
	assert.Equal(t, "12.3 ms", FormatMs(12.34))
	assert.Equal(t, "123 ms", FormatMs(123.4))
	assert.Equal(t, "1.23 s", FormatMs(1234))
}

func TestRenderIncompleteKeepsTheLevelsMeasured(t *testing.T) {
	r := sampleReport()
	r.Incomplete = "backend cycles: instance cycle-7 is Failed"
	var buf bytes.Buffer
	r.RenderIncomplete(&buf)
	out := buf.String()
	assert.Contains(t, out, "INCOMPLETE: backend cycles: instance cycle-7 is Failed")
	assert.Contains(t, out, "bind (POST → Bound + kubeconfig), 10 clients: N 10, p50 300 ms, p95 600 ms, p99 900 ms, max 900 ms")
	assert.Contains(t, out, "RATIOS per level (bind / the engine's Update at the same concurrency)\n  10 clients: p50 6.0x (300 ms / 50.0 ms), p99 6.0x (900 ms / 150 ms)")
	assert.NotContains(t, out, "lease lifecycles/s", "the steps after the failure print nothing")

	path := filepath.Join(t.TempDir(), "bench.json")
	require.NoError(t, r.WriteJSON(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"incomplete": "backend cycles: instance cycle-7 is Failed"`)

	r.Bind = nil
	buf.Reset()
	r.RenderIncomplete(&buf)
	assert.Contains(t, buf.String(), "no bind level was completed")
}
