package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kunobi-ninja/kobe/testsuite/leaks"
)

// Memory is a process's memory, in KiB: VmRSS (what `ps` and `top` show) and PSS (the
// proportional set size: shared pages divided among the processes sharing them). Fifty
// kube-apiservers share one binary's pages, so summing their RSS counts that text fifty times;
// PSS sums to what the instances really cost together.
type Memory struct {
	RSSKiB int64
	PSSKiB int64
}

// ReadMemory reads a process's VmRSS and PSS. PSS needs /proc/<pid>/smaps_rollup (Linux 4.14+)
// and is 0 when unreadable.
func ReadMemory(pid int) (Memory, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	m := Memory{RSSKiB: ParseMeminfoKiB(string(status), "VmRSS")}
	if rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		m.PSSKiB = ParseMeminfoKiB(string(rollup), "Pss")
	}
	return m, nil
}

// InstanceMemory is the memory of a set of local instances: per instance on average, and per
// component (process name) on average over the instances.
type InstanceMemory struct {
	Instances int `json:"instances"`
	// Components are the process names found per instance, e.g. [kine kube-apiserver].
	Components        []string           `json:"components"`
	RSSMiB            float64            `json:"rssMiBPerInstance"`
	PSSMiB            float64            `json:"pssMiBPerInstance"`
	RSSMiBByComponent map[string]float64 `json:"rssMiBByComponent"`
	PSSMiBByComponent map[string]float64 `json:"pssMiBByComponent"`
	// IdleCoresPerInstance is the CPU the instances' processes used while nobody used them,
	// over a few seconds, per instance, in cores (0.02 = 2 % of one core).
	IdleCoresPerInstance float64 `json:"idleCoresPerInstance"`
}

// MeasureInstances sums the memory of every process of every instance under stateDir's local
// backend (processes are recognised by the instance directory they name, as testsuite/leaks
// does) and divides by the number of instances. want is the number of instances expected: a
// different count is an error, since an average over the wrong set would be wrong.
func MeasureInstances(ctx context.Context, stateDir string, want int) (InstanceMemory, error) {
	l, err := leaks.CountLocalInstances(ctx, stateDir, nil, "")
	if err != nil {
		return InstanceMemory{}, err
	}
	if len(l.Processes) != want {
		return InstanceMemory{}, fmt.Errorf("found processes of %d local instances under %s, want %d", len(l.Processes), leaks.InstancesDir(stateDir), want)
	}
	var procs []namedPID
	for id, ps := range l.Processes {
		for _, p := range ps {
			procs = append(procs, namedPID{Name: p.Name, PID: p.PID, Owner: "instance " + id})
		}
	}
	return measureProcesses(ctx, procs, want)
}

// MeasureEnvtest measures the etcd + kube-apiserver pair the cold starts kept (paused): it lets
// them run again, waits settle (their Go runtimes collect what piled up while paused: a forced
// GC comes at most 2 minutes after the last one), then reads their memory and idle CPU as
// MeasureInstances does for one instance, and pauses them again.
func MeasureEnvtest(ctx context.Context, e *Envtest, settle time.Duration) (InstanceMemory, error) {
	if err := e.Resume(); err != nil {
		return InstanceMemory{}, err
	}
	if err := sleepCtx(ctx, settle); err != nil {
		return InstanceMemory{}, err
	}
	var procs []namedPID
	for name, pid := range e.PIDs() {
		procs = append(procs, namedPID{Name: name, PID: pid, Owner: "etcd + kube-apiserver the envtest way"})
	}
	m, err := measureProcesses(ctx, procs, 1)
	if err != nil {
		return m, err
	}
	return m, e.Pause()
}

// namedPID is a process measured: its name (the component), its pid and what it belongs to.
type namedPID struct {
	Name  string
	PID   int
	Owner string
}

// measureProcesses sums the memory of procs and their CPU time over idleWindow, divided by n
// (the instances they make up). A process that exits meanwhile makes the figures wrong, so it
// is an error.
func measureProcesses(ctx context.Context, procs []namedPID, n int) (InstanceMemory, error) {
	var rss, pss int64
	rssBy, pssBy := map[string]int64{}, map[string]int64{}
	for _, p := range procs {
		m, err := ReadMemory(p.PID)
		if err != nil {
			return InstanceMemory{}, fmt.Errorf("%s: %s (pid %d): %w", p.Owner, p.Name, p.PID, err)
		}
		rss += m.RSSKiB
		pss += m.PSSKiB
		rssBy[p.Name] += m.RSSKiB
		pssBy[p.Name] += m.PSSKiB
	}
	out := averageMemory(n, rss, pss, rssBy, pssBy)

	cpu := func() (time.Duration, error) {
		var total time.Duration
		for _, p := range procs {
			d, err := ReadCPU(p.PID)
			if err != nil {
				return 0, fmt.Errorf("%s: %s (pid %d): %w", p.Owner, p.Name, p.PID, err)
			}
			total += d
		}
		return total, nil
	}
	c0, err := cpu()
	if err != nil {
		return out, err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, idleWindow); err != nil {
		return out, err
	}
	c1, err := cpu()
	if err != nil {
		return out, err
	}
	out.IdleCoresPerInstance = math.Round((c1-c0).Seconds()/time.Since(t0).Seconds()/float64(n)*10000) / 10000
	return out, nil
}

// idleWindow is how long idle CPU is observed: CPU times tick at 10 ms, so 10 s of a few
// percent of a core per instance is a figure to two digits.
const idleWindow = 10 * time.Second

// averageMemory divides KiB totals by the number of instances, in MiB.
func averageMemory(n int, rss, pss int64, rssBy, pssBy map[string]int64) InstanceMemory {
	perMiB := func(kib int64) float64 { return round1(float64(kib) / 1024 / float64(n)) }
	out := InstanceMemory{Instances: n, RSSMiB: perMiB(rss), PSSMiB: perMiB(pss),
		RSSMiBByComponent: map[string]float64{}, PSSMiBByComponent: map[string]float64{}}
	for name, kib := range rssBy {
		out.Components = append(out.Components, name)
		out.RSSMiBByComponent[name] = perMiB(kib)
		out.PSSMiBByComponent[name] = perMiB(pssBy[name])
	}
	sort.Strings(out.Components)
	return out
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100 on Linux for every
// architecture Go supports (the kernel converts to it whatever its internal HZ).
const clockTicks = 100

// ReadCPU returns the CPU time (user + system) a process has used so far.
func ReadCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStatCPU(string(data))
}

// ReadState returns a process's state letter from /proc/<pid>/stat: R running, S sleeping,
// T stopped by a signal…
func ReadState(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	return ParseStatState(string(data))
}

// ParseStatState reads the state (field 3) of a /proc/<pid>/stat line, after the command name's
// last ')' as ParseStatCPU does.
func ParseStatState(stat string) (string, error) {
	f, err := statFields(stat)
	if err != nil || len(f) == 0 {
		return "", fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	return f[0], nil
}

// statFields are the fields of a /proc/<pid>/stat line after the command name (field 2), which
// may hold spaces and parentheses: counted after its last ')'. The first is field 3, the state.
func statFields(stat string) ([]string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	return strings.Fields(stat[i+1:]), nil
}

// ParseStatCPU reads utime + stime from a /proc/<pid>/stat line. The command name (field 2)
// may hold spaces and parentheses, so the fields are counted after its last ')'.
func ParseStatCPU(stat string) (time.Duration, error) {
	f, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	// After the name: state(3) ppid(4) … utime(14) stime(15); f[0] is field 3.
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// ReadHostCPU reads the busy and total CPU time of the whole host since boot from /proc/stat
// (the "cpu" line; idle and iowait are not busy), in clock ticks.
func ReadHostCPU() (busy, total int64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return ParseHostCPU(string(data))
}

// ParseHostCPU reads the aggregate "cpu" line of /proc/stat: user nice system idle iowait irq
// softirq steal …, in clock ticks.
func ParseHostCPU(stat string) (busy, total int64, err error) {
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		for i, v := range f[1:] {
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			n, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("unexpected /proc/stat cpu line %q", line)
			}
			total += n
			if i != 3 && i != 4 {
				busy += n
			}
		}
		return busy, total, nil
	}
	return 0, 0, fmt.Errorf("no cpu line in /proc/stat")
}
