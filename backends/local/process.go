package local

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one supervised component process of an instance (kine, kube-apiserver, …).
// Processes run in their own process group: they outlive a kobe crash or restart (kobe re-adopts
// them from the state dir) and do not receive the terminal's Ctrl-C meant for kobe.
type process struct {
	name string
	pid  int

	mu      sync.Mutex
	exited  chan struct{}
	exitMsg string
}

// startProcess starts bin with args and env added to kobe's environment, its output appended to
// logPath. onExit (if not nil) is called with the process once it has exited.
func startProcess(name, bin string, args, env []string, logPath string, onExit func(*process)) (*process, error) {
	closeInheritedFilesOnExec()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		msg := "exited"
		if err != nil {
			msg = err.Error()
		}
		p.markExited(msg)
		if onExit != nil {
			onExit(p)
		}
	}()
	return p, nil
}

// adoptProcess watches a process started by an earlier kobe. It is not our child, so it is
// polled rather than waited for. ok is false when no such process runs (any more). onExit is
// as for startProcess.
func adoptProcess(name string, pid int, mustContain string, onExit func(*process)) (*process, bool) {
	if !processMatches(pid, mustContain) {
		return nil, false
	}
	p := &process{name: name, pid: pid, exited: make(chan struct{})}
	go func() {
		for processMatches(pid, mustContain) {
			time.Sleep(500 * time.Millisecond)
		}
		const msg = "exited while kobe was not its parent"
		p.markExited(msg)
		if onExit != nil {
			onExit(p)
		}
	}()
	return p, true
}

// processMatches reports whether pid runs and its command line mentions mustContain (the
// instance directory): a recycled pid of some other program must never be adopted or killed.
func processMatches(pid int, mustContain string) bool {
	if pid <= 0 {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// A zombie has exited; only its exit status remains to be collected.
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
			return false
		}
	}
	if strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), mustContain) {
		return true
	}
	return hasInstanceDirEnv(pid, mustContain)
}

// instanceDirEnv is set in the environment of every process of an instance to its directory.
const instanceDirEnv = "KOBE_LOCAL_INSTANCE_DIR"

// hasInstanceDirEnv reports whether pid's environment names the instance directory dir
// (mustContain is dir or dir + "/"). Only kobe's own processes' environments are readable.
func hasInstanceDirEnv(pid int, mustContain string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	want := instanceDirEnv + "=" + strings.TrimSuffix(mustContain, "/")
	for _, kv := range strings.Split(string(data), "\x00") {
		if kv == want {
			return true
		}
	}
	return false
}

func (p *process) markExited(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
	default:
		p.exitMsg = msg
		close(p.exited)
	}
}

func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) exitMessage() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitMsg
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and waits until it is gone.
func (p *process) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	if grace > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-p.exited:
			return nil
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pid)
	}
}

// closeInheritedFilesOnExec marks every open file descriptor above stderr close-on-exec. Go opens
// its own files that way, but a descriptor kobe inherited from its parent without the flag (a
// lock held by `flock kobe …`, a CI runner's pipe) would otherwise pass to every instance process,
// which outlives kobe: the lock stays held and the pipe open until the instance is deleted.
func closeInheritedFilesOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
