package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// SchemaVersion names the JSON layout; it changes when a field is renamed or removed.
const SchemaVersion = "kobe-bench/1"

// Report is everything one run measured. It is written as JSON (-out) and printed as a table;
// it exists only for a run where every measurement succeeded.
type Report struct {
	Schema          string    `json:"schema"`
	Date            time.Time `json:"date"`
	DurationSeconds float64   `json:"durationSeconds"`
	Machine         Machine   `json:"machine"`
	Kobe            Build     `json:"kobe"`
	Flags           Options   `json:"flags"`
	// Incomplete, when set, is why the run stopped before its end: the report holds only what
	// was measured before (RenderIncomplete prints it).
	Incomplete string `json:"incomplete,omitempty"`

	// Pool is the shape of the warm pool the binds were measured on.
	Pool PoolShape `json:"pool"`
	// Dev is `kobe dev` itself: start-up and idle memory.
	Dev DevFigures `json:"dev"`
	// WarmInstances is the memory of the bind pool's warm instances.
	WarmInstances InstanceMemory `json:"warmInstances"`
	// IdleEnvtest is the baseline of that memory, measured right after it: the etcd +
	// kube-apiserver of the last cold start the envtest way, idle (paused) since.
	IdleEnvtest InstanceMemory `json:"idleEnvtest"`
	Bind        []BindLevel    `json:"bind"`
	Lifecycles  Lifecycles     `json:"lifecycles"`
	Cold        Cold           `json:"cold"`
	Floor       Floor          `json:"floor"`
	Ratios      Ratios         `json:"ratios"`
}

// PoolShape describes the bind pool (as applied through the API). It grows with the levels:
// before each level its minReady becomes the level's client count (maxClusters 2 more).
type PoolShape struct {
	Name              string `json:"name"`
	Backend           string `json:"backend"`
	KubernetesVersion string `json:"kubernetesVersion"`
	// Components of each instance (the local backend's default: apiserver, which runs kine too).
	Components              []string `json:"components"`
	MaxConcurrentProvisions int      `json:"maxConcurrentProvisions"`
}

// DevFigures are about the `kobe dev` process.
type DevFigures struct {
	// StartToReadyMs: exec of `kobe dev` on an empty state dir → first 200 from /readyz.
	StartToReadyMs float64 `json:"startToReadyMs"`
	// IdleRSSMiB and IdlePSSMiB of the kobe process a few seconds after ready, no pool.
	IdleRSSMiB float64 `json:"idleRssMiB"`
	IdlePSSMiB float64 `json:"idlePssMiB"`
}

// BindLevel is the bind latency at one concurrency level: POST /v1/leases sent → GET answer
// with phase Bound and a kubeconfig received.
type BindLevel struct {
	Clients int `json:"clients"`
	Rounds  int `json:"rounds"`
	// PoolMinReady and PoolMaxClusters: the pool's size for this level.
	PoolMinReady    int `json:"poolMinReady"`
	PoolMaxClusters int `json:"poolMaxClusters"`
	// WarmupSeconds is the time from applying that size to the pool being full and quiet.
	WarmupSeconds float64 `json:"warmupSeconds"`
	Latency       Latency `json:"latency"`
	// ServerVersion is what one kubeconfig of the level reported (checked outside the timing).
	ServerVersion string `json:"serverVersion"`
	// BurstSeconds is the wall time of the level's rounds (first POST → last Bound), summed,
	// and BindsPerSecond the binds of the level divided by it.
	BurstSeconds   float64 `json:"burstSeconds"`
	BindsPerSecond float64 `json:"bindsPerSecond"`
	// KobeCores is the CPU time the kobe dev process (API, Temporal server, worker) used during
	// the bursts divided by BurstSeconds: how many cores it kept busy; KobeCPUPerBindMs is that
	// CPU time divided by the binds.
	KobeCores        float64 `json:"kobeCores"`
	KobeCPUPerBindMs float64 `json:"kobeCpuPerBindMs"`
	// FirstRequest is POST sent → the first request with the kubeconfig answered (a GET of
	// the cluster's version, on a new connection), per bind: the bind's latency plus that
	// request's own time, FirstRequestAlone. By default the request goes out once every client
	// of the round is bound (Options.FirstRequestAtOnce), so the wait between is not counted.
	FirstRequest      Latency `json:"firstRequest"`
	FirstRequestAlone Latency `json:"firstRequestAlone"`
	// Retries503 counts the 503 answers the clients got and retried (the typed client retries
	// them); they are in the latencies, and counted here so that they are not hidden.
	Retries503 int `json:"retries503"`
	// FloorUpdate is the engine's floor at this concurrency: as many clients sending Updates
	// at once to one running workflow, as many Updates as the level's binds.
	FloorUpdate Latency `json:"floorUpdate"`
	// FloorUpdateStartingChild is the same with an Update that starts a child workflow the
	// parent abandons, with a lease's search attributes (as the pool starts a warm-bound
	// lease's workflow): what the engine costs for a bind of this design.
	FloorUpdateStartingChild Latency `json:"floorUpdateStartingChild"`
	// HostCores is the CPU the whole host used during the bursts (/proc/stat, every process),
	// in cores; Load the 1-minute load average after the level.
	HostCores float64 `json:"hostCores"`
	Load      float64 `json:"load"`
	// ThawedSpares is the pool's spec.scaling.thawedSpares at this level: the members kept
	// running; the spares beyond them are frozen and a claim that finds only those thaws one.
	ThawedSpares int `json:"thawedSpares"`
}

// Lifecycles is the throughput of full lease lifecycles.
type Lifecycles struct {
	Count   int `json:"count"`
	Clients int `json:"clients"`
	// PoolMinReady is the warm size of the pool they ran on (= Clients).
	PoolMinReady int     `json:"poolMinReady"`
	Seconds      float64 `json:"seconds"`
	PerSecond    float64 `json:"perSecond"`
	// Lifecycle is one lifecycle: POST → Bound → DELETE → Released and instance gone.
	Lifecycle Latency `json:"lifecycle"`
	// Bind is the POST → Bound part of each lifecycle.
	Bind Latency `json:"bind"`
	// Teardown is the DELETE → instance gone part of each lifecycle.
	Teardown Latency `json:"teardown"`
	// BackendPerSecond is the local backend's own rate, called directly in the bench process:
	// as many create → ready → delete cycles from as many clients (the physical limit);
	// OverBackend is PerSecond / BackendPerSecond (goal ≥ 0.8).
	BackendSeconds   float64 `json:"backendSeconds"`
	BackendPerSecond float64 `json:"backendPerSecond"`
	OverBackend      float64 `json:"overBackend"`
}

// Cold is starting a cluster from nothing.
type Cold struct {
	// Local: the local backend in-process, Create → WaitReady (same code the pool runs).
	Local Latency `json:"local"`
	// Envtest: a fresh etcd + kube-apiserver with envtest's flags, start → /readyz 200.
	Envtest Latency `json:"envtest"`
}

// Floor is what the Temporal server of `kobe dev` costs by itself.
type Floor struct {
	// Update: an Update (waiting for Completed) to an already-running workflow.
	Update Latency `json:"update"`
	// UpdateWithStart: a fresh workflow started together with an Update (waiting for Completed).
	UpdateWithStart Latency `json:"updateWithStart"`
}

// Ratios compare the warm-lease bind latency (p50 at the smallest concurrency level, normally
// 1 client) with the other figures, all at p50.
type Ratios struct {
	// BindClients is the concurrency level whose p50 is the reference.
	BindClients int     `json:"bindClients"`
	BindP50Ms   float64 `json:"bindP50Ms"`
	// ColdLocalOverBind: how many times faster a warm lease is than a cold local instance.
	ColdLocalOverBind float64 `json:"coldLocalOverBind"`
	// EnvtestOverBind: how many times faster a warm lease is than etcd + kube-apiserver.
	EnvtestOverBind float64 `json:"envtestOverBind"`
	// BindOverUpdate: how many engine Updates one bind costs.
	BindOverUpdate float64 `json:"bindOverUpdate"`
	// BindOverUpdateWithStart: how many engine start+Updates one bind costs.
	BindOverUpdateWithStart float64 `json:"bindOverUpdateWithStart"`
	// ColdLocalOverEnvtest: a cold local instance's start over etcd + kube-apiserver's the
	// envtest way (the goal is at most 1.0).
	ColdLocalOverEnvtest float64 `json:"coldLocalOverEnvtest"`
	// WarmRSSOverEnvtest: a warm local instance's RSS over an idle etcd + kube-apiserver's the
	// envtest way (RSS, not PSS: the envtest pair's PSS is divided with the instances that share
	// its kube-apiserver binary, so the two PSS figures do not compare).
	WarmRSSOverEnvtest float64 `json:"warmRssOverEnvtest"`
}

// ComputeRatios fills r.Ratios from the figures.
func (r *Report) ComputeRatios() {
	if len(r.Bind) == 0 {
		return
	}
	ref := r.Bind[0]
	for _, b := range r.Bind[1:] {
		if b.Clients < ref.Clients {
			ref = b
		}
	}
	bind := ref.Latency.P50Ms
	r.Ratios = Ratios{
		BindClients:             ref.Clients,
		BindP50Ms:               bind,
		ColdLocalOverBind:       Ratio(r.Cold.Local.P50Ms, bind),
		EnvtestOverBind:         Ratio(r.Cold.Envtest.P50Ms, bind),
		BindOverUpdate:          Ratio(bind, r.Floor.Update.P50Ms),
		BindOverUpdateWithStart: Ratio(bind, r.Floor.UpdateWithStart.P50Ms),
		ColdLocalOverEnvtest:    Ratio(r.Cold.Local.P50Ms, r.Cold.Envtest.P50Ms),
		WarmRSSOverEnvtest:      Ratio(r.WarmInstances.RSSMiB, r.IdleEnvtest.RSSMiB),
	}
}

// WriteJSON writes the report, indented, to path.
func (r *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// FormatMs prints a duration given in milliseconds the way a reader compares it: milliseconds
// under a second, seconds above.
func FormatMs(ms float64) string {
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

// Render prints the header, the table of every figure and the ratios.
func (r *Report) Render(w io.Writer) error {
	m := r.Machine
	fmt.Fprintf(w, "kobe bench — %s\n", r.Date.Format(time.RFC3339))
	fmt.Fprintf(w, "machine:  %s, %d CPUs (%s), %d MiB memory, load average %s at start, %s at end\n",
		orUnknown(m.Hostname), m.CPUs, orUnknown(m.CPUModel), m.MemTotalMiB, loadString(m.LoadStart), loadString(m.LoadEnd))
	fmt.Fprintf(w, "go:       %s %s/%s\n", m.GoVersion, m.OS, m.Arch)
	fmt.Fprintf(w, "kobe:     commit %s, `kobe version`: %s\n", r.Kobe.Commit, r.Kobe.Version)
	fmt.Fprintf(w, "flags:    %s\n", r.Flags.CommandLine())
	p := r.Pool
	var warm []string
	for _, b := range r.Bind {
		warm = append(warm, fmt.Sprintf("%d in %.0f s", b.PoolMinReady, b.WarmupSeconds))
	}
	fmt.Fprintf(w, "pool:     %s, backend %s, Kubernetes %s, components %s, maxConcurrentProvisions %d; minReady = the level's clients (warm: %s)\n",
		p.Name, p.Backend, p.KubernetesVersion, strings.Join(p.Components, "+"), p.MaxConcurrentProvisions, strings.Join(warm, ", "))
	fmt.Fprintf(w, "run:      %.0f s\n\n", r.DurationSeconds)

	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The first column is left-aligned by hand (padded) so the numbers line up on the right.
	type row struct {
		name string
		cols []string
	}
	var rows []row
	lat := func(name string, l Latency) {
		rows = append(rows, row{name, []string{fmt.Sprint(l.N), FormatMs(l.P50Ms), FormatMs(l.P95Ms), FormatMs(l.P99Ms), FormatMs(l.MaxMs)}})
	}
	value := func(name, v string) { rows = append(rows, row{name, []string{"", v, "", "", ""}}) }
	mib := func(f float64) string { return fmt.Sprintf("%.1f MiB", f) }

	value("kobe dev: exec → /readyz 200", FormatMs(r.Dev.StartToReadyMs))
	value("kobe dev: idle RSS (PSS)", fmt.Sprintf("%s (%s)", mib(r.Dev.IdleRSSMiB), mib(r.Dev.IdlePSSMiB)))
	wi := r.WarmInstances
	value(fmt.Sprintf("warm local instance: RSS (PSS), mean of %d", wi.Instances), fmt.Sprintf("%s (%s)", mib(wi.RSSMiB), mib(wi.PSSMiB)))
	for _, c := range wi.Components {
		value("  "+c, fmt.Sprintf("%s (%s)", mib(wi.RSSMiBByComponent[c]), mib(wi.PSSMiBByComponent[c])))
	}
	value("  idle CPU, per instance", fmt.Sprintf("%.1f %% of a core", 100*wi.IdleCoresPerInstance))
	ie := r.IdleEnvtest
	value("etcd + kube-apiserver (envtest), idle: RSS (PSS)", fmt.Sprintf("%s (%s)", mib(ie.RSSMiB), mib(ie.PSSMiB)))
	for _, c := range ie.Components {
		value("  "+c, fmt.Sprintf("%s (%s)", mib(ie.RSSMiBByComponent[c]), mib(ie.PSSMiBByComponent[c])))
	}
	value("  idle CPU", fmt.Sprintf("%.1f %% of a core", 100*ie.IdleCoresPerInstance))
	for _, b := range r.Bind {
		lat(fmt.Sprintf("bind (POST → Bound + kubeconfig), %d client%s", b.Clients, plural(b.Clients)), b.Latency)
		value("  binds/s; kobe dev CPU: cores, per bind", fmt.Sprintf("%.1f /s; %.2f, %.0f ms", b.BindsPerSecond, b.KobeCores, b.KobeCPUPerBindMs))
		lat("  POST → first request with the kubeconfig answered", b.FirstRequest)
		lat("    that request alone"+firstRequestWhen(r.Flags.FirstRequestAtOnce), b.FirstRequestAlone)
		lat(fmt.Sprintf("  engine floor: Update, %d client%s at once", b.Clients, plural(b.Clients)), b.FloorUpdate)
		lat("  engine floor: Update starting a child, as many clients", b.FloorUpdateStartingChild)
		value("  503 answers retried", fmt.Sprint(b.Retries503))
		value("  host CPU during the bursts; load after", fmt.Sprintf("%.2f cores; %.2f", b.HostCores, b.Load))
	}
	lc := r.Lifecycles
	value(fmt.Sprintf("lease lifecycles/s, %d clients, pool of %d warm", lc.Clients, lc.PoolMinReady), fmt.Sprintf("%.2f /s", lc.PerSecond))
	lat("  one lifecycle (create → bound → released → gone)", lc.Lifecycle)
	lat("  its bind", lc.Bind)
	lat("  its release → instance gone", lc.Teardown)
	value(fmt.Sprintf("local backend create → ready → delete/s, %d clients", lc.Clients), fmt.Sprintf("%.2f /s", lc.BackendPerSecond))
	lat("cold local instance: create → ready", r.Cold.Local)
	lat("cold etcd + kube-apiserver (envtest) → /readyz", r.Cold.Envtest)
	lat("engine floor: Update to a running workflow", r.Floor.Update)
	lat("engine floor: UpdateWithStart (new workflow)", r.Floor.UpdateWithStart)

	width := len("FIGURE")
	for _, rw := range rows {
		width = max(width, len([]rune(rw.name)))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-len([]rune(s))) }
	fmt.Fprintf(tw, "%s\tN\tP50 / VALUE\tP95\tP99\tMAX\t\n", pad("FIGURE"))
	for _, rw := range rows {
		fmt.Fprintf(tw, "%s\t%s\t\n", pad(rw.name), strings.Join(rw.cols, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Right alignment pads every cell on the left, the first one too, and rows without
	// percentiles end in blank cells: trim both.
	for _, line := range strings.Split(strings.TrimRight(table.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(strings.TrimPrefix(line, "  "), " "))
	}

	ra := r.Ratios
	ref := fmt.Sprintf("warm lease bind p50 (%d client%s, %s)", ra.BindClients, plural(ra.BindClients), FormatMs(ra.BindP50Ms))
	fmt.Fprintf(w, "\nRATIOS (p50)\n")
	fmt.Fprintf(w, "  %s is %.1fx faster than a cold local instance (%s)\n", ref, ra.ColdLocalOverBind, FormatMs(r.Cold.Local.P50Ms))
	fmt.Fprintf(w, "  %s is %.1fx faster than etcd + kube-apiserver the envtest way (%s)\n", ref, ra.EnvtestOverBind, FormatMs(r.Cold.Envtest.P50Ms))
	fmt.Fprintf(w, "  %s costs %.1fx an engine Update (%s)\n", ref, ra.BindOverUpdate, FormatMs(r.Floor.Update.P50Ms))
	fmt.Fprintf(w, "  %s costs %.1fx an engine UpdateWithStart (%s)\n", ref, ra.BindOverUpdateWithStart, FormatMs(r.Floor.UpdateWithStart.P50Ms))
	fmt.Fprintf(w, "  cold local instance p50 (%s) takes %.2fx etcd + kube-apiserver the envtest way (%s)\n", FormatMs(r.Cold.Local.P50Ms), ra.ColdLocalOverEnvtest, FormatMs(r.Cold.Envtest.P50Ms))
	fmt.Fprintf(w, "  warm local instance RSS (%s) is %.2fx an idle etcd + kube-apiserver the envtest way (%s)\n", mib(wi.RSSMiB), ra.WarmRSSOverEnvtest, mib(ie.RSSMiB))
	fmt.Fprintf(w, "  lifecycles/s (%.2f) are %.2fx the local backend's own create+delete rate (%.2f /s)\n", lc.PerSecond, lc.OverBackend, lc.BackendPerSecond)
	levelRatios(w, r.Bind, "bind / the engine's Update at the same concurrency",
		func(b BindLevel) Latency { return b.FloorUpdate })
	levelRatios(w, r.Bind, "bind / the engine's Update starting a child workflow, same concurrency",
		func(b BindLevel) Latency { return b.FloorUpdateStartingChild })
	return nil
}

// RenderIncomplete prints what a run that failed measured before it stopped: the header and each
// bind level it completed, with their ratios (the rest of the table would be zeros).
func (r *Report) RenderIncomplete(w io.Writer) {
	fmt.Fprintf(w, "kobe bench — %s, INCOMPLETE: %s\n", r.Date.Format(time.RFC3339), r.Incomplete)
	fmt.Fprintf(w, "kobe:     commit %s, `kobe version`: %s\n", r.Kobe.Commit, r.Kobe.Version)
	fmt.Fprintf(w, "flags:    %s\n", r.Flags.CommandLine())
	if len(r.Bind) == 0 {
		fmt.Fprintln(w, "no bind level was completed")
		return
	}
	pct := func(l Latency) string {
		return fmt.Sprintf("N %d, p50 %s, p95 %s, p99 %s, max %s", l.N, FormatMs(l.P50Ms), FormatMs(l.P95Ms), FormatMs(l.P99Ms), FormatMs(l.MaxMs))
	}
	for _, b := range r.Bind {
		fmt.Fprintf(w, "bind (POST → Bound + kubeconfig), %d client%s: %s\n", b.Clients, plural(b.Clients), pct(b.Latency))
		fmt.Fprintf(w, "  POST → first request with the kubeconfig answered: %s\n", pct(b.FirstRequest))
		fmt.Fprintf(w, "  engine floor: Update, as many clients: %s\n", pct(b.FloorUpdate))
		fmt.Fprintf(w, "  engine floor: Update starting a child, as many clients: %s\n", pct(b.FloorUpdateStartingChild))
		fmt.Fprintf(w, "  503 answers retried %d; host CPU during the bursts %.2f cores\n", b.Retries503, b.HostCores)
	}
	levelRatios(w, r.Bind, "bind / the engine's Update at the same concurrency",
		func(b BindLevel) Latency { return b.FloorUpdate })
	levelRatios(w, r.Bind, "bind / the engine's Update starting a child workflow, same concurrency",
		func(b BindLevel) Latency { return b.FloorUpdateStartingChild })
}

// levelRatios prints, under its title, each level's bind p50 and p99 over the floor that floor
// picks from it; levels without that floor are left out, and so is the title if none has it.
func levelRatios(w io.Writer, levels []BindLevel, title string, floor func(BindLevel) Latency) {
	header := "\nRATIOS per level (" + title + ")\n"
	for _, b := range levels {
		f := floor(b)
		if f.N == 0 {
			continue
		}
		fmt.Fprint(w, header)
		header = ""
		fmt.Fprintf(w, "  %d client%s: p50 %.1fx (%s / %s), p99 %.1fx (%s / %s)\n", b.Clients, plural(b.Clients),
			Ratio(b.Latency.P50Ms, f.P50Ms), FormatMs(b.Latency.P50Ms), FormatMs(f.P50Ms),
			Ratio(b.Latency.P99Ms, f.P99Ms), FormatMs(b.Latency.P99Ms), FormatMs(f.P99Ms))
	}
}

// CommandLine renders the options as the flags that reproduce them.
func (o Options) CommandLine() string {
	atOnce := ""
	if o.FirstRequestAtOnce {
		atOnce = " -first-request-at-once"
	}
	return fmt.Sprintf("-clients %s -rounds %d -lifecycles %d -lifecycle-clients %d -cold %d -floor %d -max-provisions %d -thawed-spares %d -boot-cpu-shares %d%s -k8s-version %s -tools %s",
		joinInts(o.Clients), o.Rounds, o.Lifecycles, o.LifecycleClients, o.Cold, o.Floor, o.MaxProvisions, o.ThawedSpares, o.BootCPUShares, atOnce, orUnknown(o.KubernetesVersion), orUnknown(o.ToolsDir))
}

func loadString(l [3]float64) string { return fmt.Sprintf("%.2f/%.2f/%.2f", l[0], l[1], l[2]) }

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// firstRequestWhen says when the first requests of a round went out.
func firstRequestWhen(atOnce bool) string {
	if atOnce {
		return " (sent as soon as Bound)"
	}
	return " (sent once the round was bound)"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
