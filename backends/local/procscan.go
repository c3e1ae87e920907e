package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// findProcesses scans /proc for processes whose command line names dir, keyed by the base name
// of their executable (kine, kube-apiserver, …). It is how kobe finds an instance's processes
// after a restart, whatever pids its record holds.
func findProcesses(dir string) map[string]int {
	out := map[string]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	needle := dir + string(filepath.Separator)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if !strings.Contains(strings.Join(args[1:], " "), needle) && !hasInstanceDirEnv(pid, needle) {
			continue
		}
		if !processMatches(pid, needle) {
			continue // a zombie
		}
		out[filepath.Base(args[0])] = pid
	}
	return out
}

// killByDir kills every process that names dir, and waits for them to go.
func killByDir(dir string) error {
	for attempt := 0; attempt < 50; attempt++ {
		left := findProcesses(dir)
		if len(left) == 0 {
			return nil
		}
		for _, pid := range left {
			sig := syscall.SIGTERM
			if attempt > 20 {
				sig = syscall.SIGKILL
			}
			_ = syscall.Kill(pid, sig)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if left := findProcesses(dir); len(left) > 0 {
		return &leftoverError{dir: dir, procs: left}
	}
	return nil
}

type leftoverError struct {
	dir   string
	procs map[string]int
}

func (e *leftoverError) Error() string {
	var parts []string
	for name, pid := range e.procs {
		parts = append(parts, name+"="+strconv.Itoa(pid))
	}
	return "processes of " + e.dir + " survive SIGKILL: " + strings.Join(parts, ", ")
}
