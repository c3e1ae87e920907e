package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine names where a run happened: figures from two machines are not comparable, and
// load averages show whether something else was running.
type Machine struct {
	Hostname    string     `json:"hostname"`
	CPUs        int        `json:"cpus"`
	CPUModel    string     `json:"cpuModel"`
	MemTotalMiB int        `json:"memTotalMiB"`
	LoadStart   [3]float64 `json:"loadAvgStart"`
	LoadEnd     [3]float64 `json:"loadAvgEnd"`
	GoVersion   string     `json:"goVersion"`
	OS          string     `json:"os"`
	Arch        string     `json:"arch"`
}

// ReadMachine describes this machine (load average at start; the caller sets LoadEnd).
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	m.Hostname, _ = os.Hostname()
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = ParseCPUModel(string(data))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotalMiB = int(ParseMeminfoKiB(string(data), "MemTotal") / 1024)
	}
	m.LoadStart = LoadAverage()
	return m
}

// LoadAverage reads the 1, 5 and 15 minute load averages (zeros if unknown).
func LoadAverage() [3]float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]float64{}
	}
	return ParseLoadAvg(string(data))
}

// ParseCPUModel returns the first "model name" of /proc/cpuinfo ("" if absent, e.g. on arm64
// kernels that do not report one).
func ParseCPUModel(cpuinfo string) string {
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ParseMeminfoKiB returns a field of /proc/meminfo (or /proc/<pid>/status, same shape:
// "Name:   1234 kB") in KiB; 0 if absent.
func ParseMeminfoKiB(text, field string) int64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		return n
	}
	return 0
}

// ParseLoadAvg reads the first three fields of /proc/loadavg.
func ParseLoadAvg(s string) [3]float64 {
	var out [3]float64
	f := strings.Fields(s)
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// Build says which kobe was measured.
type Build struct {
	// Commit is `git rev-parse --short HEAD` of the working tree, "-dirty" appended when the
	// tree has changes to tracked files ("unknown" outside a git checkout).
	Commit string `json:"commit"`
	// Version is the first line of `kobe version` of the binary measured.
	Version string `json:"version"`
}

// ReadBuild asks git and the binary.
func ReadBuild(ctx context.Context, kobe string) Build {
	b := Build{Commit: "unknown", Version: "unknown"}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		b.Commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			b.Commit += "-dirty"
		}
	}
	if out, err := exec.CommandContext(ctx, kobe, "version").Output(); err == nil {
		b.Version = firstLine(string(out))
	}
	return b
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
