package soak

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// kobeProc is one of the three kobe processes of the soak (dev, server, worker). It can be
// killed with SIGKILL and started again on the same flags, state and ports; every run writes its
// own log files, and all of them are kept for the secrets scan.
type kobeProc struct {
	name    string
	args    []string
	env     []string
	logDir  string
	healthz string // URL answering 200 when the process serves

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs []string
	runs int
	// started is when each run started.
	started []time.Time
}

// start runs the process (again). It returns an error rather than failing a test: the fault
// injector restarts processes from its own goroutine.
func (p *kobeProc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	base := filepath.Join(p.logDir, fmt.Sprintf("%s-%d", p.name, p.runs))
	out, err := os.Create(base + ".stdout")
	if err != nil {
		return err
	}
	errf, err := os.Create(base + ".stderr")
	if err != nil {
		return err
	}
	p.logs = append(p.logs, out.Name(), errf.Name())
	cmd := exec.Command(kobeBin, p.args...)
	cmd.Stdout, cmd.Stderr = out, errf
	cmd.Env = append(os.Environ(), p.env...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kobe %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		errf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	p.started = append(p.started, time.Now())
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *kobeProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// signal sends sig to the running process (SIGSTOP, SIGCONT).
func (p *kobeProc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// starts are the times of every start of the process.
func (p *kobeProc) startTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time{}, p.started...)
}

// stop asks the process to stop (SIGTERM) and kills it if it has not after timeout.
func (p *kobeProc) stop(timeout time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

func (p *kobeProc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// serving reports whether the process answers its health URL.
func (p *kobeProc) serving() bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(p.healthz)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// waitServing waits for the health URL; a process that exits meanwhile is an error with the
// tail of its output.
func (p *kobeProc) waitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("kobe %s exited while starting:\n%s", p.name, p.tail())
		}
		if p.serving() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("kobe %s did not serve %s within %s:\n%s", p.name, p.healthz, timeout, p.tail())
}

// tail is the end of the current run's stderr.
func (p *kobeProc) tail() string {
	p.mu.Lock()
	logs := append([]string{}, p.logs...)
	p.mu.Unlock()
	if len(logs) == 0 {
		return ""
	}
	data, _ := os.ReadFile(logs[len(logs)-1])
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func (p *kobeProc) logFiles() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{}, p.logs...)
}
