package hostcluster

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one process of the node (kine, kube-apiserver, containerd, kubelet…), in its own
// process group, its output in workRoot/logs/<name>.log.
type proc struct {
	name, log string
	pid       int

	mu      sync.Mutex
	exited  chan struct{}
	exitMsg string
	// stopping is set when the fixture stops the process: its exit is then no failure.
	stopping bool
}

var netClient = http.Client{Timeout: 2 * time.Second}

// run starts a process of the node. env, if not nil, replaces PATH and adds to the environment.
func (c *RealCluster) run(name, bin string, env []string, args ...string) error {
	logPath := c.path("logs", name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		msg := "exited with status 0"
		if err != nil {
			msg = err.Error()
		}
		p.mu.Lock()
		p.exitMsg = msg
		p.mu.Unlock()
		close(p.exited)
	}()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return nil
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) exitMessage() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitMsg
}

// stop sends SIGTERM to a process's group, SIGKILL after grace, and waits for it to exit.
func (c *RealCluster) stop(name string, grace time.Duration) {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil || !p.alive() {
		return
	}
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
}

// deadProcess names a process of the node that exited, with the end of its log ("" if none).
func (c *RealCluster) deadProcess() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.procs {
		p.mu.Lock()
		stopping := p.stopping
		p.mu.Unlock()
		if !stopping && !p.alive() {
			data, _ := os.ReadFile(p.log)
			return fmt.Sprintf("%s exited (%s):\n%s", name, p.exitMessage(), lastLines(string(data), 20))
		}
	}
	return ""
}
