// Package leaks counts what exists of local instances on a kobe host, seen three ways: the
// processes in /proc whose command line names an instance directory, the instance directories
// under <state-dir>/local/instances, and the rows of kobe's store. Tests compare those sets with
// what the pool says it holds: anything more is a leak.
package leaks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/kunobi-ninja/kobe/internal/store"
)

// Process is a live process: the base name of its executable and its pid.
type Process struct {
	Name string
	PID  int
	// Args is its command line without the executable.
	Args []string
}

func (p Process) String() string { return fmt.Sprintf("%s=%d", p.Name, p.PID) }

// ProcessesNaming lists the live processes (zombies excluded, this process excluded) whose
// arguments — not the executable — contain s. kobe's local backend names a path inside the
// instance directory in every argument list, so a directory followed by "/" finds exactly
// that instance's processes.
func ProcessesNaming(s string) []Process {
	var out []Process
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		if zombie(e.Name()) {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) < 2 || !strings.Contains(strings.Join(args[1:], " "), s) {
			continue
		}
		out = append(out, Process{Name: filepath.Base(args[0]), PID: pid, Args: args[1:]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func zombie(pid string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return true // gone meanwhile
	}
	// pid (comm) state …: comm may hold spaces, the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// Named keeps the processes whose executable is name (e.g. "kube-apiserver").
func Named(ps []Process, name string) []Process {
	var out []Process
	for _, p := range ps {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// KillNaming sends SIGKILL to every process whose arguments contain s and returns them. Tests
// use it to clean up after a failure: local instances run in their own process groups and
// outlive the kobe that started them.
func KillNaming(s string) []Process {
	ps := ProcessesNaming(s)
	for _, p := range ps {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return ps
}

// InstancesDir is where the local backend keeps a host's instances.
func InstancesDir(stateDir string) string { return filepath.Join(stateDir, "local", "instances") }

// Local is what exists of a host's local instances.
type Local struct {
	// Processes by instance id.
	Processes map[string][]Process
	// Dirs are the instance directories (by instance id).
	Dirs []string
	// Rows are the store's instance rows: id → phase. Nil when no store was given.
	Rows map[string]string
}

// CountLocalInstances looks at the processes, directories and (if s is not nil) store rows of
// the local instances under stateDir. pool, if not empty, restricts the store rows to one pool.
func CountLocalInstances(ctx context.Context, stateDir string, s store.Store, pool string) (Local, error) {
	root := InstancesDir(stateDir) + string(filepath.Separator)
	l := Local{Processes: map[string][]Process{}}
	for _, p := range ProcessesNaming(root) {
		id := instanceOf(p.Args, root)
		l.Processes[id] = append(l.Processes[id], p)
	}
	entries, err := os.ReadDir(InstancesDir(stateDir))
	if err != nil && !os.IsNotExist(err) {
		return l, err
	}
	for _, e := range entries {
		if e.IsDir() {
			l.Dirs = append(l.Dirs, e.Name())
		}
	}
	if s != nil {
		rows, err := s.ListInstances(ctx, store.InstanceFilter{Pool: pool})
		if err != nil {
			return l, err
		}
		l.Rows = map[string]string{}
		for _, r := range rows {
			l.Rows[r.ID] = string(r.Phase)
		}
	}
	return l, nil
}

// instanceOf finds the instance id in the first argument that names a path under root.
func instanceOf(args []string, root string) string {
	for _, a := range args {
		if i := strings.Index(a, root); i >= 0 {
			rest := a[i+len(root):]
			if j := strings.IndexByte(rest, filepath.Separator); j >= 0 {
				rest = rest[:j]
			}
			return rest
		}
	}
	return ""
}

// ProcessIDs are the instance ids that have at least one live process, sorted.
func (l Local) ProcessIDs() []string { return sortedKeys(l.Processes) }

// RowIDs are the instance ids with a store row, sorted.
func (l Local) RowIDs() []string { return sortedKeys(l.Rows) }

// DirIDs are the instance directories, sorted.
func (l Local) DirIDs() []string {
	out := append([]string{}, l.Dirs...)
	sort.Strings(out)
	return out
}

// Empty reports that nothing at all exists: no process, no directory, no row.
func (l Local) Empty() bool { return len(l.Processes) == 0 && len(l.Dirs) == 0 && len(l.Rows) == 0 }

// Diff says how l differs from exactly the instances want (each with processes, a directory and
// a row); it is empty when they match.
func (l Local) Diff(want []string) string {
	w := append([]string{}, want...)
	sort.Strings(w)
	var parts []string
	check := func(what string, got []string) {
		if strings.Join(got, ",") != strings.Join(w, ",") {
			parts = append(parts, fmt.Sprintf("%s %v, want %v", what, got, w))
		}
	}
	check("processes of", l.ProcessIDs())
	check("directories", l.DirIDs())
	if l.Rows != nil {
		check("store rows", l.RowIDs())
	}
	return strings.Join(parts, "; ")
}

func (l Local) String() string {
	var procs []string
	for _, id := range l.ProcessIDs() {
		var ps []string
		for _, p := range l.Processes[id] {
			ps = append(ps, p.String())
		}
		procs = append(procs, fmt.Sprintf("%s[%s]", id, strings.Join(ps, " ")))
	}
	var rows []string
	for _, id := range l.RowIDs() {
		rows = append(rows, id+"="+l.Rows[id])
	}
	return fmt.Sprintf("processes %d %v, dirs %d %v, rows %d %v", len(l.Processes), procs, len(l.Dirs), l.DirIDs(), len(l.Rows), rows)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
